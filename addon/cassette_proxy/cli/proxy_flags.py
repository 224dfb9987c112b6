"""The proxy's command-line flags, shared by `cassette run` and `cassette serve`, and the launcher's settings from them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from ..core.defaults import DEFAULT_KEY_HEADERS, MITMDUMP_ARGS_VAR, MITMDUMP_VAR, MODES, default_dir
from ..core.frameworks import PRESETS
from ..core.hints import STARTERS
from ..launch.launcher import (
    LauncherError,
    Settings,
    extra_args_from,
    find_mitmdump,
    parse_reverse,
    proxy_ca_only_by_default,
    resolve_mode,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The proxy's command-line options, shared by `cassette run` and `cassette serve`."""
    parser.add_argument("--mode", choices=MODES, help="Cassette mode; defaults to $CASSETTE_MODE, else replay.")
    add_folder_and_hosts(parser)
    parser.add_argument(
        "--reverse", action="append", default=[], metavar="NAME=URL[@PORT]",
        help="Also listen in reverse mode for URL (on PORT if given, else a free port) and set NAME_BASE_URL "
        "(OPENAI_BASE_URL, ANTHROPIC_BASE_URL): clients then need no proxy variables and no CA. Repeatable.",
    )  # fmt: skip
    parser.add_argument("--report", help="Also keep the JSON run report at this path.")
    add_key_settings(parser)
    parser.add_argument(
        "--allow-host", action="append", default=[], metavar="GLOB",
        help="Host outside the cassette hosts that a replay run may still reach (cassette_allow_hosts), e.g. an "
        "image CDN; every other non-loopback host answers 403 cassette_offline in replay. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--telemetry-sink", action="append", default=[], metavar="HOST/PATH",
        help="Another telemetry sink (cassette_telemetry_sinks), e.g. otel-collector.example.com/v1/traces: answered "
        "offline in replay like openai-agents' traces, LangSmith, Langfuse and Logfire, never recorded. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--no-telemetry", dest="telemetry", action="store_false",
        help="Treat the known telemetry sinks as any other request (cassette_telemetry=false): recorded when in "
        "scope, refused offline in replay when not.",
    )  # fmt: skip
    parser.add_argument(
        "--only-reverse", action="store_true",
        help="With --reverse: give the command only the NAME_BASE_URL variables, no proxy or CA variables; requests "
        "to hosts without a --reverse route are not seen by the proxy (in replay nothing keeps them offline). A new "
        "SDK client then loads its own CA store (the environment's, certifi's or the system's: ~150 CAs) once, "
        "instead of the bundle once per proxy variable: cheaper than the full bundle of record and update (or "
        "--system-cas), dearer than replay's default of the proxy's CA alone (tens of ms a client against about 1 ms).",
    )  # fmt: skip
    bundle = parser.add_mutually_exclusive_group()
    bundle.add_argument(
        "--proxy-ca-only", action="store_true", default=None,
        help="Give clients a CA bundle holding only the proxy's CA, not the system's and the environment's: a new SDK "
        "client then loads 1 certificate instead of ~150 once per proxy variable (tens of ms a client). HTTPS that "
        "does not go through the proxy (NO_PROXY hosts, clients that ignore proxy variables) fails verification, "
        "except in Node, whose bundled roots NODE_EXTRA_CA_CERTS only adds to (--isolate seals those). "
        "The default in replay mode when the environment sets no CA variable and NO_PROXY names only loopback.",
    )  # fmt: skip
    bundle.add_argument(
        "--system-cas", dest="proxy_ca_only", action="store_false",
        help="Give clients the system's CAs and the environment's besides the proxy's (the default in the other "
        "modes, or when the environment sets a CA variable or a non-loopback NO_PROXY).",
    )  # fmt: skip
    add_mitmdump(parser)


def add_folder_and_hosts(parser: argparse.ArgumentParser) -> None:
    """--dir and --hosts: also `cassette drift`'s, which re-sends what a run recorded."""
    parser.add_argument("--dir", help="Cassette folder; defaults to $CASSETTE_DIR, else ./cassettes.")
    parser.add_argument(
        "--hosts", nargs="+", action="extend", default=[], metavar="GLOB",
        help="Hosts under cassette control (globs, `*` for all); defaults to the known LLM API hosts.",
    )  # fmt: skip


def add_key_settings(parser: argparse.ArgumentParser) -> None:
    """The key settings (--ignore, --key-header, --ignore-value, --frameworks): also `cassette drift`'s."""
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="PATH",
        help="JSON body field left out of the key (cassette_ignore): messages.*.id, messages.0.name. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--key-header", action="append", default=[], metavar="NAME",
        help=f"Request header that is part of the key, on top of {', '.join(DEFAULT_KEY_HEADERS)}. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--ignore-value", action="append", default=[], metavar="REGEX",
        help="Volatile value pattern (cassette_ignore_values), or a preset such as pydantic-ai: matches in string "
        "values are keyed as numbered placeholders. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--frameworks", nargs="*", metavar="NAME", choices=sorted(PRESETS),
        help="Framework presets to key with (cassette_frameworks), replacing the default of all: "
        f"{', '.join(sorted(PRESETS))}. The values these frameworks make up on every run are keyed as placeholders; "
        "--frameworks with no name turns them all off.",
    )  # fmt: skip


def add_mitmdump(parser: argparse.ArgumentParser) -> None:
    """--mitmdump and --mitmdump-arg: also `cassette drift`'s."""
    parser.add_argument(
        "--mitmdump",
        help=f"The mitmdump to run; defaults to ${MITMDUMP_VAR}, else the one beside this Python, else PATH.",
    )
    parser.add_argument(
        "--mitmdump-arg", action="append", default=[], metavar="ARG",
        help=f"Extra mitmdump argument (write --mitmdump-arg=-s); ${MITMDUMP_ARGS_VAR} adds shell words too.",
    )  # fmt: skip


def checked_folder(folder: Path, mode: str) -> Path:
    """The cassette folder, refused before any proxy starts when it is a file (mitmdump would fail on it later,
    with a traceback); in replay a folder that does not exist is said, once, since every request will miss."""
    if folder.exists() and not folder.is_dir():
        raise LauncherError(f"--dir {folder} is a file, not a folder: pass the folder the cassettes are in (or set "
                            "CASSETTE_DIR)")  # fmt: skip
    if mode == "replay" and not folder.exists():
        print(f"cassette: warning: the cassette folder {folder} does not exist: in replay every request to a "
              "controlled host will miss (pass --dir, or record first with --mode record)", file=sys.stderr)  # fmt: skip
    return folder


def settings_from_arguments(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    mode = resolve_mode(args.mode, environ)
    reverse = [parse_reverse(spec) for spec in args.reverse]
    only_reverse = getattr(args, "only_reverse", False)
    if only_reverse and not reverse:
        raise LauncherError("--only-reverse needs at least one --reverse NAME=URL route for the clients to use")
    cassette_dir = checked_folder(Path(args.dir) if args.dir else default_dir(environ), mode)
    return Settings(
        mitmdump=find_mitmdump(args.mitmdump, environ),
        mode=mode,
        cassette_dir=cassette_dir,
        hosts=args.hosts,
        reverse=reverse,
        port=getattr(args, "port", 0),
        report=Path(args.report) if args.report else None,
        extra_args=[*extra_args_from(environ), *args.mitmdump_arg],
        ignore=args.ignore,
        key_headers=args.key_header,
        ignore_values=args.ignore_value,
        frameworks=args.frameworks,
        allow_hosts=args.allow_host,
        telemetry=getattr(args, "telemetry", True),  # `cassette drift` takes neither: its proxy is its own
        telemetry_sinks=getattr(args, "telemetry_sink", []),
        only_reverse=only_reverse,
        # How the user started it, for the proxy's hints: `cassette run` or `cassette serve` (drift never misses).
        started_by=subcommand if (subcommand := getattr(args, "subcommand", "run")) in STARTERS else "run",
        proxy_ca_only=proxy_ca_only_by_default(mode, environ)
        if getattr(args, "proxy_ca_only", None) is None
        else args.proxy_ca_only,
    )
