"""`cassette serve`: the proxy in the foreground; `cassette env` (env.py) prints its environment for `eval`.

For people who start the proxy themselves, e.g. to run tests from an IDE:
    cassette serve            # in one terminal
    eval "$(cassette env)"    # in another; then run anything
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from ..core.atomic_write import write_atomic
from ..core.report import summary
from ..launch import launcher
from ..launch.serve_state import STATE_HEADER, state_file
from ..launch.user_folder import private_folder
from . import proxy_flags


def register(subparsers: argparse._SubParsersAction) -> None:
    serve_parser = subparsers.add_parser(
        "serve",
        help="run the proxy in the foreground and print the environment to export",
        description="Start the proxy, print `export` lines for its client environment (also available from "
        "`cassette env`), show its log until Ctrl-C or SIGTERM, then print a summary.",
    )
    proxy_flags.add_arguments(serve_parser)
    serve_parser.add_argument("--port", type=int, default=0, help="Forward-proxy port; 0 (default) picks a free one.")
    serve_parser.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    state = state_file()
    private_folder(state.parent, create=True)  # before the proxy starts: a refused folder starts nothing
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops cleanly, like Ctrl-C
    try:
        proxy = launcher.start(proxy_flags.settings_from_arguments(args, os.environ))
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    try:
        exports = proxy.exports(os.environ)
        write_atomic(state, f"{STATE_HEADER}{os.getpid()}\n{exports}".encode(), mode=0o600)
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
    print(summary(report), file=sys.stderr)
    return 0 if proxy.process.returncode in (0, -signal.SIGTERM) else 1


def _follow_log(proxy: launcher.RunningProxy) -> None:
    """Copy mitmdump's log to stderr as it grows, until mitmdump exits."""
    with proxy.log_path.open(encoding="utf-8", errors="replace") as log:
        while True:
            chunk = log.read()
            if chunk:
                sys.stderr.write(chunk)  # as text: escaped on its way out (cli/__init__.py), mitmproxy's lines too
                sys.stderr.flush()
            elif proxy.process.poll() is not None:
                return
            else:
                time.sleep(0.2)
