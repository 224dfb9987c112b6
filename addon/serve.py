"""`cassette serve` (the proxy in the foreground) and `cassette env` (its environment, for `eval`).

For people who start the proxy themselves, e.g. to run tests from an IDE:
    cassette serve            # in one terminal
    eval "$(cassette env)"    # in another; then run anything
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import stat
import sys
import tempfile
import time
from pathlib import Path

from . import launcher, run_summary, store


def register(subparsers: argparse._SubParsersAction) -> None:
    serve_parser = subparsers.add_parser(
        "serve",
        help="run the proxy in the foreground and print the environment to export",
        description="Start the proxy, print `export` lines for its client environment (also available from "
        "`cassette env`), show its log until Ctrl-C or SIGTERM, then print a summary.",
    )
    launcher.add_arguments(serve_parser)
    serve_parser.add_argument("--port", type=int, default=0, help="Forward-proxy port; 0 (default) picks a free one.")
    serve_parser.set_defaults(func=serve)
    env_parser = subparsers.add_parser(
        "env",
        help="print the environment of the running `cassette serve`",
        description='Print `export` lines pointing clients at the running `cassette serve`: eval "$(cassette env)".',
    )
    env_parser.set_defaults(func=env)


def state_file() -> Path:
    """Where `serve` leaves its exports for `env`, in a per-user folder only its owner can use (see `private_folder`)."""
    return (
        Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"cassette-proxy-{os.getuid()}" / "serve.env"
    )


def private_folder(folder: Path, create: bool) -> bool:
    """Check (and with `create`, make, mode 0700) the state file's folder; False when it does not exist.

    `eval "$(cassette env)"` runs what the state file says, and `$TMPDIR` is
    shared: a folder another user created first, or one others may write to,
    would let them choose the commands. Such a folder is refused before
    anything in it is read or written.
    """
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    try:
        status = os.lstat(folder)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(status.st_mode):
        raise launcher.LauncherError(
            f"{folder} is not a folder (a symlink or a file): the `cassette serve` state must live in a private "
            "folder; nothing was read. Remove it, then start `cassette serve` again."
        )
    if status.st_uid != os.getuid():
        raise launcher.LauncherError(
            f"{folder} belongs to user id {status.st_uid}, not to you ({os.getuid()}): another user may have made it "
            "to choose what `cassette env` prints; nothing was read. Remove it (or point XDG_RUNTIME_DIR or TMPDIR "
            "at a private folder), then start `cassette serve` again."
        )
    if status.st_mode & 0o077:
        raise launcher.LauncherError(
            f"{folder} has mode {stat.S_IMODE(status.st_mode):o}: others may read or write it, and `cassette env` "
            f"output is run by the shell; nothing was read. Run `chmod 700 {folder}` if you made it, else remove it, "
            "then start `cassette serve` again."
        )
    return True


STATE_HEADER = "# cassette serve pid "


def serve(args: argparse.Namespace) -> int:
    state = state_file()
    private_folder(state.parent, create=True)  # before the proxy starts: a refused folder starts nothing
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops cleanly, like Ctrl-C
    try:
        proxy = launcher.start(launcher.settings_from_arguments(args, os.environ))
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    try:
        exports = proxy.exports(os.environ)
        store.write_atomic(state, f"{STATE_HEADER}{os.getpid()}\n{exports}".encode(), mode=0o600)
        print(exports, end="")
        print(
            f'# serving at {proxy.url} in {proxy.settings.mode} mode; eval "$(cassette env)" elsewhere; Ctrl-C stops',
            flush=True,
        )
        _follow_log(proxy)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if state.exists() and state.read_text().startswith(f"{STATE_HEADER}{os.getpid()}\n"):
            state.unlink()
        report = proxy.stop()
    print(run_summary.text(report), file=sys.stderr)
    return 0 if proxy.process.returncode in (0, -signal.SIGTERM) else 1


def _follow_log(proxy: launcher.RunningProxy) -> None:
    """Copy mitmdump's log to stderr as it grows, until mitmdump exits."""
    with proxy.log_path.open("rb") as log:
        while True:
            chunk = log.read()
            if chunk:
                sys.stderr.buffer.write(chunk)
                sys.stderr.flush()
            elif proxy.process.poll() is not None:
                return
            else:
                time.sleep(0.2)


def env(args: argparse.Namespace) -> int:
    state = state_file()
    text = state.read_text() if private_folder(state.parent, create=False) and state.exists() else ""
    header, _, exports = text.partition("\n")
    pid = header.removeprefix(STATE_HEADER)
    if not header.startswith(STATE_HEADER) or not pid.isdigit() or not _alive(int(pid)):
        raise launcher.LauncherError("no `cassette serve` is running for this user; start one with `cassette serve`")
    print(exports, end="")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
