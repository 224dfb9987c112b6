"""The proxy's command-line flags, shared by `cassette run` and `cassette serve`, and the launcher's settings from them."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core import option_table
from ..core.defaults import MITMDUMP_ARGS_VAR, MITMDUMP_VAR, default_dir
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

KEY_SETTINGS = ("cassette_ignore", "cassette_key_headers", "cassette_ignore_values", "cassette_frameworks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The proxy's command-line options, shared by `cassette run` and `cassette serve`."""
    add_option_flags(parser, "cassette_mode")
    add_folder_and_hosts(parser)
    parser.add_argument(
        "--reverse", action="append", default=[], metavar="NAME=URL[@PORT]",
        help="Also listen in reverse mode for URL (on PORT if given, else a free port) and set NAME_BASE_URL "
        "(OPENAI_BASE_URL, ANTHROPIC_BASE_URL): clients then need no proxy variables and no CA. Repeatable.",
    )  # fmt: skip
    add_option_flags(parser, "cassette_report")
    add_key_settings(parser)
    add_option_flags(parser, "cassette_allow_hosts", "cassette_telemetry_sinks", "cassette_telemetry")
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


def add_option_flags(parser: argparse.ArgumentParser, *names: str) -> None:
    """The `cassette run` flags of these options, as the table (core/option_table.py) declares them."""
    for name in names:
        option = option_table.BY_NAME[name]
        assert option.flag is not None, f"{name} has no flag"
        parser.add_argument(option.flag.spelling, **option_table.flag_keywords(option, option.flag))


def add_folder_and_hosts(parser: argparse.ArgumentParser) -> None:
    """--dir and --hosts: also `cassette drift`'s, which re-sends what a run recorded."""
    add_option_flags(parser, "cassette_dir", "cassette_hosts")


def add_key_settings(parser: argparse.ArgumentParser) -> None:
    """The key settings (--ignore, --key-header, --ignore-value, --frameworks): also `cassette drift`'s."""
    add_option_flags(parser, *KEY_SETTINGS)


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
    """The launcher's settings: every option flag of the table read into its `Settings` field (a flag a subcommand
    does not take, such as `cassette drift`'s missing --no-telemetry, leaves the field's default), then what the
    launcher decides itself."""
    mode = resolve_mode(args.mode, environ)
    reverse = [parse_reverse(spec) for spec in args.reverse]
    only_reverse = getattr(args, "only_reverse", False)
    if only_reverse and not reverse:
        raise LauncherError("--only-reverse needs at least one --reverse NAME=URL route for the clients to use")
    cassette_dir = checked_folder(Path(args.dir) if args.dir else default_dir(environ), mode)  # before mitmdump
    defaults = {field.name: field.default for field in dataclasses.fields(Settings)}
    values: dict[str, Any] = {
        option.setting: getattr(args, option.flag.dest, defaults[option.setting])
        for option in option_table.with_flag()
        if option.setting is not None and option.flag is not None
    }
    values.update(
        mitmdump=find_mitmdump(args.mitmdump, environ),
        mode=mode,
        cassette_dir=cassette_dir,
        reverse=reverse,
        port=getattr(args, "port", 0),
        report=Path(args.report) if args.report else None,
        extra_args=[*extra_args_from(environ), *args.mitmdump_arg],
        only_reverse=only_reverse,
        # How the user started it, for the proxy's hints: `cassette run` or `cassette serve` (drift never misses).
        started_by=subcommand if (subcommand := getattr(args, "subcommand", "run")) in STARTERS else "run",
        proxy_ca_only=proxy_ca_only_by_default(mode, environ)
        if getattr(args, "proxy_ca_only", None) is None
        else args.proxy_ca_only,
    )
    return Settings(**values)
