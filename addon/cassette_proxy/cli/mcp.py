"""Pass an MCP client's stdio JSON-RPC messages to SERVER_COMMAND, recording each request with the server's answer;
in replay, answer from the cassettes without starting the server. Inside `cassette run` the run's mode, folder and
key settings apply and its report counts these requests.

`cassette mcp -- SERVER_COMMAND…`: an MCP server over stdio, recorded and replayed (core/sessions/mcp_stdio.py).

Used as the command an MCP client spawns (`MCPServerStdio(params={"command": "cassette", "args": ["mcp",
"--", "python", "server.py"]})`): it passes the newline-delimited JSON-RPC messages between the client (its
own stdin and stdout) and the server it starts, and records each client request with the server's lines up to
its response. In replay it answers from the cassettes and never starts the server; a request without a
recording is answered with a JSON-RPC error carrying the miss's message. Inside `cassette run` it takes the
run's mode, folder and key settings, and adds its counts to the run's report (`CASSETTE_MCP_REPORTS`). This
module reads the flags and the enclosing run; the relay is launch/mcp_relay.py.

Stdout is the protocol: every message of ours goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from ..core.defaults import DEFAULT_KEY_HEADERS, default_dir, default_mode
from ..core.keys.recipe import make_recipe
from ..core.secrets import redact
from ..core.sessions.mcp_stdio import server_name, valid_name
from ..launch.control_client import CONTROL_TOKEN_VAR
from ..launch.enclosing_run import REPORTS_VAR, run_environ
from ..launch.errors import LauncherError
from ..launch.mcp_relay import StdioSession
from ..launch.outer_proxy import OUTER_PROXY_VAR, outer_proxy
from . import add_command

MODES = ("replay", "record", "update", "off")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "mcp", __doc__)
    parser.add_argument("--mode", choices=MODES, help="Cassette mode; defaults to the enclosing `cassette run`'s, "
                        "else $CASSETTE_MODE, else replay.")  # fmt: skip
    parser.add_argument("--dir", type=Path, help="Cassette folder; defaults to the enclosing `cassette run`'s, "
                        "else $CASSETTE_DIR, else ./cassettes.")  # fmt: skip
    parser.add_argument(
        "--name",
        help="The server's name in its cassettes' folder (stdio/NAME/) and URL (stdio://NAME/); defaults to "
        "SERVER_COMMAND's words without their folders, e.g. python-server.py.",
    )
    parser.add_argument("--ignore", action="append", default=[], metavar="PATH",
                        help="JSON body field left out of the key, as `cassette run --ignore`. Repeatable.")  # fmt: skip
    parser.add_argument("--redact", action="append", default=[], metavar="RULE",
                        help="Redaction rule on top of the built-in secret rules (cassette_redact). Repeatable.")  # fmt: skip
    parser.add_argument("--report", type=Path, help="Write this server's run report (JSON) to this path.")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- SERVER_COMMAND ...")
    parser.set_defaults(func=mcp)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def mcp(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise LauncherError("no server to run: cassette mcp [options] -- SERVER_COMMAND ...")
    # The enclosing `cassette run`'s variables: an MCP client starts its stdio server without them.
    environ = run_environ(os.environ, (OUTER_PROXY_VAR, CONTROL_TOKEN_VAR, REPORTS_VAR))
    try:
        run = outer_proxy(environ)
        name = valid_name(args.name) if args.name else server_name(command)
    except ValueError as e:
        raise LauncherError(str(e)) from None
    enclosing = run.settings if run is not None else None
    mode = args.mode or (enclosing["mode"] if enclosing else default_mode())
    root = args.dir or (Path(enclosing["dir"]) if enclosing else default_dir())
    try:
        recipe = make_recipe(
            [*(enclosing["ignore"] if enclosing else ()), *args.ignore],
            DEFAULT_KEY_HEADERS,
            enclosing["ignore_values"] if enclosing else (),
            *([enclosing["frameworks"]] if enclosing else []),
        )
        rules = redact.parse_rules(args.redact)
    except ValueError as e:
        raise LauncherError(str(e)) from None
    session = StdioSession(mode, root.resolve(), name, recipe, rules, sys.stdout.buffer)
    if run is None:
        session.started_by = "mitmdump"  # no run around it: the hint names the option; `--mode record` here
    session.start(command)
    # An MCP client that closed our stdin stops us with SIGTERM when we take a while: the report is still written.
    signal.signal(signal.SIGTERM, _stop)
    stopped = True
    try:
        for line in sys.stdin.buffer:
            session.handle(line)
        stopped = False
    finally:
        status = session.finish(stopped)
        if args.report is not None:
            session.report.write(args.report)
        if folder := environ.get(REPORTS_VAR):
            session.report.write(Path(folder) / f"mcp-{os.getpid()}.json")
    return status
