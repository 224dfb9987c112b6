"""The cassette modes, shared by the addon, the launcher and the pytest plugin (none of which may disagree)."""

MODES = ("replay", "record", "update", "off")

DEFAULT_MODE = "replay"
"""The safe default: answer from disk only; recording is always asked for."""
