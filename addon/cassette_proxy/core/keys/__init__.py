"""The request's key and the settings it is computed under: URL and body canonical forms, volatile values, presets, hosts."""
