"""`cassette import`: VCR.py / pytest-recording cassettes, LangChain's `langchain_tests` cassettes and HAR files
(Polly.js, browser devtools, mitmproxy), gzip'd or not, converted into cassettes keyed and written exactly as
the proxy records them under the same settings.

Exit status: 0 when every interaction is in the folder (imported, or already there); 1 when anything was left
out (skipped, collided, invalid, or a file that could not be read): the summary says what and why; 2 when the
command could not run (a bad option, a missing path).
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from ..core.defaults import DEFAULT_HOSTS, default_dir
from ..core.files.safe_read import CassetteError, read_limited
from ..core.keys.frameworks import DEFAULT_FRAMEWORKS
from ..core.migration import importer
from ..core.migration.recording_formats import (
    FORMATS,
    LIBYAML,
    MAX_RECORDING_BYTES,
    UnreadableRecording,
    read_recording,
)
from ..core.migration.vcr_test_ids import TestModules
from ..core.record_statuses import DEFAULT_RECORD_STATUSES
from ..core.traffic.per_test import DEFAULT_SCOPE, SCOPES
from . import add_command, proxy_flags

_LABELS = {
    importer.IMPORTED: "imported",
    importer.UPDATED: "updated",
    importer.REPLACED: "replaced",
    importer.UNCHANGED: "unchanged",
    importer.PRESENT: "present",
    importer.DUPLICATE: "duplicate",
    importer.REPEAT: "repeat",
    importer.COLLIDED: "COLLIDED",
    importer.SKIPPED: "SKIPPED",
    importer.INVALID: "INVALID",
}
LEFT_OUT = (importer.COLLIDED, importer.SKIPPED, importer.INVALID)


def display_name(path: Path, argument: Path, cwd: Path) -> str:
    """The path (resolved) as the summary and `imported_from` show it: relative to the working folder `cwd`
    (resolved) when inside it, else from the PATH argument's own name down (`cassettes/test_mod/test_a.yaml`),
    so a re-import from the same place writes the same bytes, two tests' files never share a name, and no home
    folder leaks into a cassette."""
    if path.is_relative_to(cwd):
        return path.relative_to(cwd).as_posix()
    real = argument.resolve()
    return path.name if path == real else (Path(real.name) / path.relative_to(real)).as_posix()


def run(args: argparse.Namespace) -> int:
    try:
        settings = importer.import_settings(
            hosts=args.hosts or DEFAULT_HOSTS,
            key_headers=args.key_header,
            ignore=args.ignore,
            ignore_values=args.ignore_value,
            frameworks=DEFAULT_FRAMEWORKS if args.frameworks is None else args.frameworks,
            record_statuses=args.record_status or DEFAULT_RECORD_STATUSES,
            redact_specs=args.redact,
            scope=args.scope,
            redacted_url=args.redacted_url,
            redacted_headers=args.redacted_header,
        )
    except ValueError as e:
        print(f"cassette import: {e}")
        return 2
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"cassette import: no such file or folder: {', '.join(missing)}")
        return 2
    if args.node_ids and not args.node_ids.is_file():
        print(f"cassette import: --node-ids {args.node_ids}: no such file (write it with pytest --collect-only -q)")
        return 2
    root = args.dir.expanduser().resolve()
    if root.exists() and not root.is_dir():
        print(f"cassette import: --dir {args.dir} exists and is not a folder")
        return 2
    files: list[str] = []
    unreadable: list[str] = []
    ignored: list[str] = []
    planned = importer.outcomes(
        _read_files(args, settings, root, files, unreadable, ignored), settings, root, args.replace
    )
    if args.dry_run:
        outcomes = list(planned)
    else:
        try:
            outcomes = importer.write(planned, root)
        except OSError as e:
            print(f"cassette import: could not write into {args.dir}: {e.strerror or e}")
            return 2
    for outcome in outcomes:
        label = f"{_LABELS[outcome.action]:<9}"
        if outcome.relative:
            print(
                f"{label} {outcome.relative}  <- {outcome.source}" + (f"  {outcome.detail}" if outcome.detail else "")
            )
        else:
            print(f"{label} {outcome.source}: {outcome.detail}")
    for problem in ignored:
        print(f"ignored   {problem}")
    for problem in unreadable:
        print(f"UNREADABLE {problem}")
    _print_summary(args, files, unreadable, outcomes)
    return 1 if unreadable or any(o.action in LEFT_OUT for o in outcomes) else 0


def _read_files(
    args: argparse.Namespace,
    settings: importer.ImportSettings,
    root: Path,
    files: list[str],
    unreadable: list[str],
    ignored: list[str],
) -> Iterator[importer.RecordingFile]:
    """The recordings found, one by one as they are read (their names kept in `files`); the problems of files
    that should have been recordings go to `unreadable`, of those that need not to `ignored`."""
    cwd = Path.cwd().resolve()
    modules = TestModules(cwd, args.node_ids.read_text().splitlines() if args.node_ids else None)
    for path, argument in importer.recording_files(args.paths, exclude=root):
        name, named = display_name(path, argument, cwd), not argument.is_dir()
        try:
            kind, entries = read_recording(read_limited(path, None, MAX_RECORDING_BYTES), name, args.source_format)
        except (OSError, CassetteError, UnreadableRecording) as e:
            problem = f"{name}: {e.problem}" if isinstance(e, CassetteError) else str(e)
            if isinstance(e, OSError):
                problem = f"{name}: {e.strerror or e}"
            # A file found in a folder may be anything (fixtures, package.json); one named must be a recording.
            yaml_like = path.name.lower().removesuffix(".gz").endswith((".yaml", ".yml", ".har"))
            (unreadable if named or yaml_like or isinstance(e, CassetteError) else ignored).append(problem)
            continue
        except Exception as e:  # a failure of ours: this file is reported, the others are read
            unreadable.append(f"{name}: could not be read ({type(e).__name__}: {e}): a bug, please report it")
            continue
        test_ids: tuple[str, ...] = ()
        problem = ""
        if settings.scope == "test":
            try:
                test_ids = tuple(modules.test_ids(path))
            except ValueError as e:
                problem = str(e)
        folders = tuple(folder.name for folder in path.parents if folder.name)
        files.append(name)
        yield importer.RecordingFile(name, kind, entries, folders, test_ids, problem)


def _print_summary(args: argparse.Namespace, files: list[str], unreadable: list[str], outcomes: list) -> None:
    counts = Counter(o.action for o in outcomes)
    parts = [f"{counts[action]} {_LABELS[action].lower()}" for action in _LABELS if counts[action]]
    print(
        f"cassette import{' (dry run, nothing written)' if args.dry_run else ''}: {len(files)} file(s)"
        f"{f', {len(unreadable)} unreadable' if unreadable else ''} into {args.dir}: "
        f"{', '.join(parts) or 'nothing to import'}"
    )
    sequences = sorted({o.relative for o in outcomes if _sequence_number(o.relative) > 1})
    if sequences:
        print(
            f"cassette import: {len(sequences)} recording(s) answer a request made more than once with different "
            "answers (<key>.2.json, ...): they replay in order under cassette_repeats=sequence; "
            "under the default reuse every call gets the first"
        )
    left_out = sum(counts[action] for action in LEFT_OUT)
    if left_out or unreadable:
        print(
            f"cassette import: {left_out} interaction(s) and {len(unreadable)} file(s) not imported (the lines in "
            "capitals say why); check what was: cassette ls, then replay the suite with cassette run --strict"
        )
    if not LIBYAML and any(name.lower().removesuffix(".gz").endswith((".yaml", ".yml")) for name in files):
        print(
            "cassette import: note: this PyYAML has no libyaml, so YAML was read by the pure-Python loader (about "
            "20x slower); PyYAML's wheels ship libyaml: pip install --force-reinstall --only-binary pyyaml pyyaml"
        )


def _sequence_number(relative: str) -> int:
    stem = os.path.basename(relative).removesuffix(".json")
    _, _, n = stem.rpartition(".")
    return int(n) if "." in stem and n.isdigit() else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "import", __doc__)
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH",
        help="VCR cassettes (YAML or JSON; cassetter's too), langchain_tests cassettes, HAR files, each maybe gzip'd, or folders of them",
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, default=default_dir(), help="cassette folder to write into")
    parser.add_argument(
        "--from", dest="source_format", choices=("auto", *FORMATS), default="auto",
        help="the recordings' format (default: recognised from each file's content)",
    )  # fmt: skip
    parser.add_argument(
        "--hosts", action="append", metavar="GLOB",
        help="a host under cassette control, as the suite's cassette_hosts; repeat it (default: the known LLM APIs)",
    )  # fmt: skip
    proxy_flags.add_key_settings(parser)  # exactly as `cassette run` takes them: the same keys
    parser.add_argument(
        "--record-status", action="append", metavar="STATUS",
        help="A status (or class such as 2xx) to import, as the suite's cassette_record_statuses; repeat it; given, "
        f"it replaces the default ({', '.join(DEFAULT_RECORD_STATUSES)})",
    )  # fmt: skip
    parser.add_argument(
        "--redact", action="append", default=[], metavar="RULE",
        help="a redaction rule, as the suite's cassette_redact (pii, /target/regex/replacement); repeat it",
    )  # fmt: skip
    parser.add_argument(
        "--scope", choices=SCOPES, default=DEFAULT_SCOPE,
        help="test: each file's interactions go to the folder of the test it is named after (cassette_scope = test; "
        "run from the folder pytest runs in); shared (default): one folder for all",
    )  # fmt: skip
    parser.add_argument(
        "--node-ids", type=Path, metavar="FILE",
        help="with --scope test: the suite's node ids, one a line (pytest --collect-only -q > FILE), so that a file "
        "named without parameters goes to every parametrization of its test, and inherited tests are found",
    )  # fmt: skip
    parser.add_argument(
        "--redacted-url", metavar="URL",
        help="where a request whose URI the recording redacted (**REDACTED**) went when the request does not show it "
        "(its provider or endpoint unknown, a GET): https://api.groq.com/openai/v1/chat/completions",
    )  # fmt: skip
    parser.add_argument(
        "--redacted-header", action="append", default=[], metavar="RULE",
        help="the value a key header had where the recording redacted it: NAME=VALUE (anthropic-version=2023-06-01), "
        "NAME@FILE_GLOB=VALUE for the files a glob names, or NAME=/REGEX/TEMPLATE/ for a value the recorded request "
        "body shows; every rule that applies adds its value, joined with ','. Repeatable.",
    )  # fmt: skip
    parser.add_argument(
        "--replace", action="store_true", help="overwrite a cassette that holds a different answer to the same request"
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be imported; write nothing")
    parser.set_defaults(func=run)
