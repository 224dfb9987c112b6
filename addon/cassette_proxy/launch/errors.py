"""The launcher's one error type, in a module of its own so that every launch module can raise it."""

from __future__ import annotations


class LauncherError(Exception):
    """A problem the user can fix; the message says what and how."""
