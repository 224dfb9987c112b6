"""`cassette import`: VCR.py / pytest-recording cassettes and HAR files (Polly.js, browser devtools,
mitmproxy) converted into cassettes, keyed and written exactly as the proxy records them.

Exit status: 0 when every usable entry is in the folder; 1 when something needs a person (a collision,
a file or an entry that could not be read); 2 when the command could not run (bad option, missing path).
Entries skipped on purpose (a host out of scope, a non-2xx status) do not change the status.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path

from ..core import importer
from ..core.defaults import DEFAULT_HOSTS, DEFAULT_KEY_HEADERS, default_dir

_LABELS = {
    importer.IMPORTED: "imported",
    importer.UPDATED: "updated",
    importer.REPLACED: "replaced",
    importer.UNCHANGED: "unchanged",
    importer.PRESENT: "present",
    importer.DUPLICATE: "duplicate",
    importer.REPEAT: "repeat",
    importer.COLLIDED: "COLLIDED",
    importer.SKIPPED: "skipped",
    importer.INVALID: "INVALID",
}


def display_name(path: Path, argument: Path) -> str:
    """The path as the summary and `imported_from` show it: relative to the working folder when inside it, else
    from the PATH argument's own name down (`cassettes/test_mod/test_a.yaml`), so a re-import from the same
    place writes the same bytes, two tests' files never share a name, and no home folder leaks into a cassette."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        pass
    if argument == path:
        return path.name
    return (Path(argument.resolve().name) / path.resolve().relative_to(argument.resolve())).as_posix()


def run(args: argparse.Namespace) -> int:
    try:
        settings = importer.import_settings(
            hosts=args.hosts or DEFAULT_HOSTS,
            key_headers=args.key_header if args.key_header is not None else DEFAULT_KEY_HEADERS,
            ignore=args.ignore,
            redact_specs=args.redact,
            keep_errors=args.keep_errors,
        )
    except ValueError as e:
        print(f"cassette import: {e}")
        return 2
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"cassette import: no such file or folder: {', '.join(missing)}")
        return 2
    root = args.dir.expanduser().resolve()
    if root.exists() and not root.is_dir():
        print(f"cassette import: --dir {args.dir} exists and is not a folder")
        return 2
    files, unreadable, ignored = [], [], []
    for path, argument in importer.recording_files(args.paths, exclude=root):
        name, named = display_name(path, argument), path == argument
        try:
            kind, entries = importer.read_recording(path.read_bytes(), name, args.source_format)
        except (OSError, importer.UnreadableRecording) as e:
            problem = str(e) if isinstance(e, importer.UnreadableRecording) else f"{name}: {e.strerror or e}"
            # A file found in a folder may be anything (fixtures, package.json); one named must be a recording.
            (unreadable if named or path.suffix.lower() in (".yaml", ".yml", ".har") else ignored).append(problem)
            continue
        files.append(importer.RecordingFile(name, kind, entries))
    outcomes = importer.plan(files, settings, root, replace=args.replace)
    if not args.dry_run:
        try:
            importer.write(outcomes, root)
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
    needs_a_person = any(o.action in (importer.COLLIDED, importer.INVALID) for o in outcomes)
    return 1 if unreadable or needs_a_person else 0


def _print_summary(args: argparse.Namespace, files: list, unreadable: list[str], outcomes: list) -> None:
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


def _sequence_number(relative: str) -> int:
    stem = os.path.basename(relative).removesuffix(".json")
    _, _, n = stem.rpartition(".")
    return int(n) if "." in stem and n.isdigit() else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="convert VCR.py / pytest-recording cassettes and HAR files into cassettes, keyed as the proxy keys",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="VCR cassettes (YAML or JSON), HAR files, or folders of them",
    )
    parser.add_argument("--dir", type=Path, default=default_dir(), help="cassette folder to write into")
    parser.add_argument(
        "--from",
        dest="source_format",
        choices=("auto", *importer.FORMATS),
        default="auto",
        help="the recordings' format (default: recognised from each file's content)",
    )
    parser.add_argument(
        "--hosts",
        action="append",
        metavar="GLOB",
        help="a host under cassette control, as the suite's cassette_hosts; repeat it (default: the known LLM APIs)",
    )
    parser.add_argument(
        "--key-header",
        action="append",
        metavar="NAME",
        help="a request header in the key, as the suite's cassette_key_headers; repeat it; given, it replaces "
        f"the default ({', '.join(DEFAULT_KEY_HEADERS)})",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATH",
        help="a body field left out of the key, as the suite's cassette_ignore (messages.*.id); repeat it",
    )
    parser.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="RULE",
        help="a redaction rule, as the suite's cassette_redact (pii, /target/regex/replacement); repeat it",
    )
    parser.add_argument(
        "--keep-errors", action="store_true", help="also import 4xx/5xx responses (the proxy records only 2xx)"
    )
    parser.add_argument(
        "--replace", action="store_true", help="overwrite a cassette that holds a different answer to the same request"
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be imported; write nothing")
    parser.set_defaults(func=run)
