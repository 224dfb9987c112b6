"""The proxy's sockets: handed over by the launcher, their backlog, the ready file, the routes they serve."""
