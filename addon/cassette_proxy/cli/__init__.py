"""The `cassette` console command: a thin dispatcher over one module per subcommand.

Each module in SUBCOMMANDS exposes `register(subparsers)`, which adds its
parser(s) and sets `func` (args -> exit status) as a default.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..core.printable import PrintableStream
from ..launch.launcher import LauncherError
from . import diff, drift, env, import_, ls, prune, rekey, run, scan, serve, show, stale, view

SUBCOMMANDS = (run, serve, env, ls, show, view, diff, drift, scan, stale, prune, import_, rekey)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cassette",
        description="Record LLM API calls once through mitmproxy, replay them from disk in CI; review the cassettes.",
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    # Everything a command prints may hold a cassette's or a client's text: escaped on its way out (core/printable.py).
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PrintableStream(stdout), PrintableStream(stderr)
    try:
        return args.func(args)
    except LauncherError as e:
        print(f"cassette: {e}", file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = stdout, stderr


if __name__ == "__main__":
    sys.exit(main())
