"""`cassette view`: the cassettes as conversations in a browser, served read-only on 127.0.0.1 or exported to one file.

This module parses the flags and calls the viewer (viewer/: the folder's index,
the run reports, the page, the server, the export), whose docstrings say how
a recorded prompt stays text and a foreign page is refused. No mitmproxy import.
"""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path

from ..core.defaults import default_dir
from ..core.report import Report, ReportError
from ..viewer.export import export
from ..viewer.index import Index, default_cache_file
from ..viewer.reports import ViewState, read_report, report_view
from ..viewer.server import serve
from . import add_command, diff


def changed_ids(rev: str, root: Path) -> set[str]:
    """Cassettes added or re-recorded against a git revision (as `cassette diff` finds them), as ids."""
    diff.check_revision(rev)
    base = root.resolve()
    ids = set()
    for status, path in diff.changed_files(rev, root):
        if status != "D":
            try:
                ids.add((Path.cwd() / path).resolve().relative_to(base).as_posix())
            except ValueError:
                continue
    return ids


def run(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if not root.is_dir():
        print(f"cassette view: {root} is not a folder (pass the cassette folder, or set CASSETTE_DIR)")
        return 2
    reports: list[tuple[Path, Report]] = []
    for path in args.report:
        try:
            reports.append((path, read_report(path)))
        except ReportError as e:
            print(f"cassette view: {e}")
            return 2
    if (args.only_used or args.changed) and not args.html:
        print("cassette view: --only-used and --changed limit an export: add --html OUT")
        return 2
    if args.only_used and not reports:
        print("cassette view: --only-used needs the run's report: add --report FILE")
        return 2
    state = ViewState(root, list(args.report), Index(root, None if args.no_cache else default_cache_file(root)))
    if not args.html:
        return serve(state, args.port, args.open)
    only: set[str] | None = None
    if args.only_used and (view := report_view(root, reports, [])) is not None:  # it is: reports is not empty
        only = set(view["used"]) | {near["cassette"] for miss in view["misses"] for near in miss["closest"]}
    if args.changed:
        try:
            changed = changed_ids(args.changed, root)
        except (diff.GitError, OSError) as e:
            print(f"cassette view: --changed {args.changed}: {e}")
            return 2
        only = changed if only is None else only | changed
    code = export(state, args.html, only)
    if args.open:
        webbrowser.open(args.html.resolve().as_uri())
    return code


def port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 1 to 65535, or 0 for a free one")
    return number


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "view", __doc__)
    parser.add_argument("dir", nargs="?", type=Path, default=default_dir(), help="cassette folder")
    parser.add_argument(
        "--report",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a run report (cassette_report) to show: hits, misses with their diffs, errors, unused cassettes; repeatable",
    )
    parser.add_argument(
        "--html", type=Path, metavar="OUT", help="write one self-contained HTML file instead of serving"
    )
    parser.add_argument("--port", type=port, default=0, help="port on 127.0.0.1 to serve on (default: a free one)")
    parser.add_argument("--open", action="store_true", help="open the page in the default browser")
    parser.add_argument(
        "--only-used", action="store_true", help="export only the cassettes the report(s) used or missed near"
    )
    parser.add_argument(
        "--changed", metavar="REV", help="export only the cassettes added or re-recorded against a git revision"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="do not keep the cassettes' summaries between runs (kept in $XDG_CACHE_HOME/cassette-proxy/view)",
    )
    parser.set_defaults(func=run)
