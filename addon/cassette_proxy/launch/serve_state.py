"""Where `cassette serve` leaves its exports for `cassette env`: a state file in a per-user folder."""

from __future__ import annotations

import re
from pathlib import Path

from .user_folder import user_folder
from .warm_proxy import is_process, process_started

STATE_HEADER = "# cassette serve pid "


def state_file() -> Path:
    """Where `serve` leaves its exports for `env`, in a per-user folder only its owner can use (see `private_folder`)."""
    return user_folder() / "serve.env"


def state_header(pid: int) -> str:
    """The state file's first line: the serving process by pid and start time, so that a crash's leftover whose pid
    was reused is not taken for a running serve."""
    return f"{STATE_HEADER}{pid} started {process_started(pid)}"


def serving_pid(header: str) -> int | None:
    """The pid of the `cassette serve` a state file's first line names, while it is still that process; else None."""
    found = re.fullmatch(re.escape(STATE_HEADER) + r"(\d+) started (\d+|None)", header)
    if found is None:
        return None
    pid, started = int(found.group(1)), found.group(2)
    return pid if is_process(pid, None if started == "None" else started) else None
