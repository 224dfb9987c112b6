"""Print `export` lines pointing clients at the running `cassette serve`: eval "$(cassette env)"."""

from __future__ import annotations

import argparse

from ..launch import launcher
from ..launch.serve_state import serving_pid, state_file
from ..launch.user_folder import private_folder
from . import add_command


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "env", __doc__)
    parser.set_defaults(func=env)


def env(args: argparse.Namespace) -> int:
    state = state_file()
    text = state.read_text() if private_folder(state.parent, create=False) and state.exists() else ""
    header, _, exports = text.partition("\n")
    if serving_pid(header) is None:  # none, or a leftover whose pid another process has now
        raise launcher.LauncherError("no `cassette serve` is running for this user; start one with `cassette serve`")
    print(exports, end="")
    return 0
