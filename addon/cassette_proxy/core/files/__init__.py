"""The file formats (cassettes, sessions, events), where a file lives, and how files are read bounded and written atomically."""
