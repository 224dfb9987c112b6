"""Runs inside mitmdump: the addon (options and hooks) and the objects it delegates to."""
