"""The `cassette` console command: a dispatcher over one module per subcommand.

Each module in COMMANDS exposes `register(subparsers)`, which adds its
parser(s) and sets `func` (args -> exit status) as a default. A module parses
its command's flags and calls what does the work below the CLI: the proxy's
start (launch/), drift's engine (launch/drift_plan.py, launch/drift_run.py),
the MCP relay (launch/mcp_relay.py), the viewer (viewer/). The review
commands that only read the folder (ls, show, diff, scan, stale, prune,
rekey, import) keep that reading in their own module; none is over 300
lines. Only the module of the command typed is imported (all of them for
`--help` or a typo): the review commands' imports cost `cassette run` about
half a second before its proxy could start.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from ..core.output import PrintableStream
from ..launch.errors import LauncherError

COMMANDS = {
    "run": "run", "serve": "serve", "env": "env", "ls": "ls", "show": "show", "view": "view", "diff": "diff",
    "drift": "drift", "scan": "scan", "stale": "stale", "prune": "prune", "import": "import_", "rekey": "rekey",
    "frameworks": "frameworks",
    "mcp": "mcp",
}  # fmt: skip
"""Each command's name → its module's (`import` is a keyword)."""


def subcommands(names: Sequence[str] = tuple(COMMANDS)) -> list[ModuleType]:
    """The modules of the commands named, imported."""
    return [importlib.import_module(f"{__name__}.{COMMANDS[name]}") for name in names]


def __getattr__(name: str) -> object:
    if name == "SUBCOMMANDS":  # every command's module, for the checks that walk them all (the docs test)
        return tuple(subcommands())
    raise AttributeError(name)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(
        prog="cassette",
        description="Record LLM API calls once through mitmproxy, replay them from disk in CI; review the cassettes.",
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    typed = argv[0] if argv and argv[0] in COMMANDS else None
    for module in subcommands([typed] if typed else tuple(COMMANDS)):
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
