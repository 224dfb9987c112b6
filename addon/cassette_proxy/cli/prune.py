"""`cassette prune`: the cassettes no test run used, from the runs' reports; `--delete` removes them.

A cassette nobody replays rots: it still costs review time and still may
hold data. But "unused" is only known from complete runs: a run with a miss
or an error stopped early somewhere, and pruning after it would delete live
cassettes. So prune refuses, and deletes nothing, unless every report is clean.

By test (reports of runs whose runner announced its tests, e.g. the pytest
plugin): `--test PATTERN` counts only the uses of the tests matching PATTERN
(keep their recordings, list the rest), `--drop-test PATTERN` ignores the uses
of the matching tests (list what only they used: a deleted test's recordings,
or a test's before it is recorded afresh). Patterns are globs on test ids;
requests outside any test are the test `<no test>`.
"""

from __future__ import annotations

import argparse
import fnmatch
from pathlib import Path

from ..core.defaults import default_dir
from ..core.files.cassette_file import load
from ..core.files.location import cassette_files
from ..core.files.safe_read import CassetteError
from ..core.files.session_file import sidecar_of
from ..core.report import Report, ReportError
from . import add_command


class Refusal(Exception):
    """Pruning on these reports could delete cassettes a complete run would use."""


def used_cassettes(
    report_paths: list[Path], keep_tests: list[str] | None = None, drop_tests: list[str] | None = None
) -> set[str]:
    """The union of what the runs read or wrote (by the tests selected, if any patterns are given);
    raises Refusal when a report cannot vouch for its run."""
    used: set[str] = set()
    by_test: dict[str, set[str]] = {}
    for path in report_paths:
        try:
            report = Report.read(path)
        except ReportError as e:
            raise Refusal(str(e)) from None
        misses, errors = len(report.misses), len(report.errors)
        if misses or errors:
            raise Refusal(
                f"{path}: the run had {misses} miss(es) and {errors} error(s), so it may not have reached every "
                "cassette; fix the run and prune on a clean report"
            )
        if report.mode == "off":
            raise Refusal(f"{path}: an off-mode run reads no cassettes")
        used.update(report.cassettes_used)
        if keep_tests or drop_tests:
            tests = report.tests
            if not tests:
                raise Refusal(
                    f"{path}: the report does not say which test used which cassette (its runner did not announce "
                    "its tests); prune by test needs a run through the pytest plugin or the Node helper"
                )
            for test, entry in tests.items():
                by_test.setdefault(test, set()).update(entry["cassettes"])
    if not (keep_tests or drop_tests):
        return used
    for pattern in [*(keep_tests or []), *(drop_tests or [])]:
        if not any(fnmatch.fnmatchcase(test, pattern) for test in by_test):
            known = ", ".join(sorted(by_test)[:5])
            raise Refusal(f"--test/--drop-test {pattern!r} matches no test of these runs (they ran e.g. {known})")

    def counted(test: str) -> bool:
        kept = not keep_tests or any(fnmatch.fnmatchcase(test, p) for p in keep_tests)
        return kept and not any(fnmatch.fnmatchcase(test, p) for p in drop_tests or [])

    return set().union(*(names for test, names in by_test.items() if counted(test)))


def unused_cassettes(root: Path, used: set[str]) -> list[Path]:
    present = {path.relative_to(root).as_posix(): path for path in cassette_files(root)}
    vanished = sorted(used - present.keys())
    if vanished:
        raise Refusal(
            f"the reports name {len(vanished)} cassette(s) that are not in {root} (first: {vanished[0]}); "
            "is --dir the folder those runs used?"
        )
    return [path for name, path in sorted(present.items()) if name not in used]


def session_sidecar(path: Path) -> Path | None:
    """The sidecar a session cassette keeps its audio in (session_file.py): it goes with the cassette."""
    try:
        return sidecar_of(path, load(path))
    except (OSError, CassetteError):
        return None


def delete(paths: list[Path], root: Path) -> None:
    """Remove the files, then the folders they leave empty (never the cassette folder itself)."""
    for path in paths:
        sidecar = session_sidecar(path)
        path.unlink()
        if sidecar is not None:
            sidecar.unlink(missing_ok=True)
        folder = path.parent
        while folder != root and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def run(args: argparse.Namespace) -> int:
    root = args.dir.resolve()
    try:
        if not root.is_dir():
            raise Refusal(f"{args.dir} is not a folder (pass --dir, or set CASSETTE_DIR)")
        unused = unused_cassettes(root, used_cassettes(args.reports, args.test, args.drop_test))
    except Refusal as e:
        print(f"cassette prune: refusing, nothing deleted: {e}")
        return 2
    for path in unused:
        print(path.relative_to(root).as_posix())
    if not unused:
        print(f"every cassette in {args.dir} was used by these {len(args.reports)} run(s){_by_test(args)}")
        return 0
    if args.delete:
        delete(unused, root)
        print(f"deleted {len(unused)} unused cassette(s)")
        return 0
    print(f"{len(unused)} cassette(s) no run used{_by_test(args)}; run again with --delete to remove them")
    return 1


def _by_test(args: argparse.Namespace) -> str:
    parts = [f"--test {p}" for p in args.test or []] + [f"--drop-test {p}" for p in args.drop_test or []]
    return f" (counting by test: {', '.join(parts)})" if parts else ""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "prune", __doc__)
    parser.add_argument(
        "reports", nargs="+", type=Path, metavar="REPORT", help="run reports (cassette_report) to trust"
    )
    parser.add_argument("--dir", type=Path, default=default_dir(), help="cassette folder the runs used")
    parser.add_argument("--delete", action="store_true", help="remove the unused cassettes instead of listing them")
    parser.add_argument(
        "--test", action="append", default=[], metavar="PATTERN",
        help="count only the uses of the tests matching this glob on test ids (keep their recordings); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--drop-test", action="append", default=[], metavar="PATTERN",
        help="ignore the uses of the tests matching this glob (list what only they used); `<no test>` names "
        "requests outside any test; repeatable",
    )  # fmt: skip
    parser.set_defaults(func=run)
