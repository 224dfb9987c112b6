"""Where `cassette serve` leaves its exports for `cassette env`: a state file in a per-user folder."""

from __future__ import annotations

from pathlib import Path

from .user_folder import user_folder

STATE_HEADER = "# cassette serve pid "


def state_file() -> Path:
    """Where `serve` leaves its exports for `env`, in a per-user folder only its owner can use (see `private_folder`)."""
    return user_folder() / "serve.env"
