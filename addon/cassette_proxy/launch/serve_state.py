"""Where `cassette serve` leaves its exports for `cassette env`: a state file in a per-user folder."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

STATE_HEADER = "# cassette serve pid "


def state_file() -> Path:
    """Where `serve` leaves its exports for `env`, in a per-user folder only its owner can read."""
    return (
        Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"cassette-proxy-{os.getuid()}" / "serve.env"
    )
