"""Re-send the recorded requests to the live providers through a proxy that records into a scratch folder (the
cassette folder is only read, unless --write), compare each answer with its cassette and print a table, worst
first: status, shape, behaviour, text. Exit status: 1 for drift at or above --fail-on, 3 when a cassette could not
be checked (or none was), 2 for a usage error, else 0. Credentials come from each SDK's usual variable
(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...).

Replay proves the requests are unchanged; it cannot see a retired model, a new
response shape or a changed answer. This command parses its flags into what a
drift run takes and starts one (launch/drift_run.py): each selected cassette's
request is re-sent through a proxy started in update mode, which records into a
scratch folder (the cassette folder is only read, unless `--write`), compared
with its cassette (core/drift/drift.py: status, shape, behaviour, text) and printed
as a table; `--report` and `--markdown` keep it for a scheduled job, `--write`
accepts the drifted re-recordings into the cassette folder for review. Which
cassettes can be re-sent, and how, is launch/drift_plan.py. Credentials come
from the environment (core/drift/credentials.py), the key and host settings are
`cassette run`'s own flags (proxy_flags.py).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from ..core.defaults import DEFAULT_KEY_HEADERS
from ..core.drift.credentials import parse_rule
from ..core.drift.drift import SEVERITY_NAMES, parse_severity
from ..core.keys.recipe import make_recipe
from ..launch import drift_run
from ..launch.drift_plan import Selection
from ..launch.errors import LauncherError
from . import add_command, proxy_flags


def selection(args: argparse.Namespace) -> Selection:
    """The cassettes the arguments choose."""
    return Selection(args.paths, args.select_host, args.select_test, args.older_than)


def run_drift(args: argparse.Namespace) -> int:
    try:
        rules = [parse_rule(spec) for spec in args.credential]
        recipe = make_recipe(args.ignore, [*DEFAULT_KEY_HEADERS, *args.key_header], args.ignore_value)
    except ValueError as e:
        raise LauncherError(str(e)) from None
    policy = drift_run.Policy(args.concurrency, args.max_requests, args.retries, args.max_wait, args.timeout,
                              args.max_time, args.max_bytes)  # fmt: skip
    outputs = drift_run.Outputs(parse_severity(args.fail_on), args.drift_report, args.markdown, args.write)
    settings = proxy_flags.settings_from_arguments(args, os.environ)
    return drift_run.run(settings, selection(args), recipe, rules, policy, outputs, os.environ)


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below {minimum}")
        return value

    return parse


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "drift", __doc__)
    parser.add_argument("paths", nargs="*", metavar="GLOB", help="cassettes to check: globs on their paths "
                        "relative to the folder (api.openai.com/**); default: every cassette")  # fmt: skip
    proxy_flags.add_folder_and_hosts(parser)
    proxy_flags.add_key_settings(parser)
    parser.add_argument("--select-host", action="append", default=[], metavar="GLOB",
                        help="only cassettes whose request went to a host matching GLOB; repeatable")  # fmt: skip
    parser.add_argument("--select-test", action="append", default=[], metavar="GLOB",
                        help="only per-test cassettes of tests matching GLOB (a test id, e.g. "
                        "'tests/test_chat.py::test_*'); repeatable")  # fmt: skip
    parser.add_argument("--older-than", type=_seconds, metavar="DAYS",
                        help="only cassettes recorded at least DAYS days ago")  # fmt: skip
    parser.add_argument("--fail-on", choices=SEVERITY_NAMES, default="behaviour",
                        help="exit 1 when drift of this severity or worse is found (default behaviour: a changed "
                        "text alone is listed, and exits 0)")  # fmt: skip
    parser.add_argument("--report", dest="drift_report", type=Path, metavar="FILE", help="also write the JSON report")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write a Markdown summary, for a job summary or an issue comment")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help="put the drifted re-recordings in their cassettes' place, for review as a change "
                        "(choose them with the selection); never a 401, 429 or 5xx answer")  # fmt: skip
    parser.add_argument("--credential", action="append", default=[], metavar="HOST=[HEADER:]VARIABLE",
                        help="the credential for hosts the providers' table does not cover: $VARIABLE sent as a "
                        "bearer token, or in HEADER; repeatable")  # fmt: skip
    parser.add_argument("--concurrency", type=_count(1), default=4, metavar="N",
                        help="requests in flight at once (default 4)")  # fmt: skip
    parser.add_argument("--max-requests", type=_count(0), metavar="N",
                        help="send at most N requests, retries included; the rest are listed as skipped")  # fmt: skip
    parser.add_argument("--retries", type=_count(0), default=2, metavar="N", help="retries of a 429 answer (default 2)")
    parser.add_argument(
        "--max-wait",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="the longest retry-after waited for; a longer one ends the retries (default 60)",
    )
    parser.add_argument("--timeout", type=_seconds, default=120.0, metavar="SECONDS",
                        help="seconds an answer may stay silent (default 120)")  # fmt: skip
    parser.add_argument("--max-time", type=_seconds, default=600.0, metavar="SECONDS",
                        help="seconds a request may take in all, its answer included: a stream still arriving "
                        "then is cut off and listed as not checked (default 600)")  # fmt: skip
    parser.add_argument("--max-bytes", type=_count(1), default=64 * 1024 * 1024, metavar="BYTES",
                        help="the largest answer read; a larger one is cut off and listed as not checked "
                        "(default 67108864, 64 MiB)")  # fmt: skip
    proxy_flags.add_mitmdump(parser)
    # What proxy_flags.settings_from_arguments reads and drift does not take: the scratch proxy is its own.
    parser.set_defaults(func=run_drift, mode="update", reverse=[], report=None, allow_host=[], proxy_ca_only=True)
