"""The `cassette` console command: a dispatcher over one module per subcommand.

Each module in COMMANDS exposes `register(subparsers)`, which adds its parser
(`add_command`: its line in `cassette --help` is its COMMANDS entry, its
description its docstring's first paragraph) and sets `func` (args -> exit
status) as a default. A module parses its command's flags and calls what does
the work below the CLI: the proxy's start (launch/), drift's engine
(launch/drift_plan.py, launch/drift_run.py), the MCP relay
(launch/mcp_relay.py), the viewer (viewer/). The review commands that only
read the folder (ls, show, diff, scan, stale, prune, rekey, import) keep that
reading in their own module; none is over 300 lines. Only the module of the
command typed is imported (all of them for `--help` or a typo): the review
commands' imports cost `cassette run` about half a second before its proxy
could start.
"""

from __future__ import annotations

import argparse
import importlib
import keyword
import sys
from collections.abc import Sequence
from types import ModuleType

from ..core.output import PrintableStream
from ..launch.errors import LauncherError

COMMANDS = {
    "run": "run a command with a proxy wired into its environment",
    "serve": "run the proxy in the foreground (or --detach) and print the environment to export",
    "env": "print the environment of the running `cassette serve`",
    "ls": "one line per cassette: key, recorded date, size, model, endpoint, prompt",
    "show": "one cassette in full, readable: request, messages, response",
    "view": "browse the cassettes as conversations: served on 127.0.0.1, or exported to one HTML file",
    "diff": "review cassettes changed against a git revision: new, removed, re-recorded and what changed",
    "drift": "re-send the recorded requests to the live providers and report what changed, worst first",
    "scan": "find secrets (and, with --rule pii, personal data) in cassette files; exits 1 when it finds any",
    "stale": "list cassettes recorded longer ago than --max-age; exits 1 when there are any",
    "prune": (
        "list (or --delete) the cassettes no run used, from run reports; refuses on a report with misses or errors"
    ),
    "import": (
        "convert VCR.py / pytest-recording / langchain_tests cassettes and HAR files into cassettes, keyed as the "
        "proxy keys"
    ),
    "rekey": "recompute every cassette's key under other settings and rename the files",
    "frameworks": "the framework presets' rules, one line each: what each keys as a placeholder, and where",
    "mcp": "record and replay an MCP server over stdio (the command an MCP client spawns)",
}
"""Each command's name → its line in `cassette --help`, in the order it lists them."""


def _module_name(command: str) -> str:
    """The module of `command`: its name, with `_` after a keyword (`import_`)."""
    return f"{command}_" if keyword.iskeyword(command) else command


def subcommands(names: Sequence[str] = tuple(COMMANDS)) -> list[ModuleType]:
    """The modules of the commands named, imported."""
    return [importlib.import_module(f"{__name__}.{_module_name(name)}") for name in names]


def add_command(subparsers: argparse._SubParsersAction, name: str, doc: str | None = None) -> argparse.ArgumentParser:
    """The parser of the command `name`, with its line in `cassette --help` (COMMANDS) and, when its module passes
    its docstring as `doc`, that docstring's first paragraph as the description its `--help` opens with."""
    return subparsers.add_parser(
        name, help=COMMANDS[name], description=doc.split("\n\n")[0] if doc is not None else None
    )


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
