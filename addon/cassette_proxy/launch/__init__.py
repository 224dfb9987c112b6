"""Finding and starting mitmdump, and the environment a client process needs to use it."""
