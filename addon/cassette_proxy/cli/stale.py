"""`cassette stale`: cassettes recorded longer ago than a limit, so a team re-records against today's model on purpose.

Age comes from the `recorded_at` the cassette stores, not from the file's
modification time, which a git checkout resets.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ..core.defaults import default_dir
from ..core.files.cassette_file import load
from ..core.files.location import cassette_files
from ..core.files.safe_read import CassetteError
from . import add_command

UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1), "y": timedelta(days=365)}
_AGE = re.compile(r"^(\d+)([hdwy])$")


def parse_age(text: str) -> timedelta:
    """`36h`, `90d`, `12w`, `1y`."""
    m = _AGE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age; use a number and a unit: 36h, 90d, 12w, 1y")
    return int(m.group(1)) * UNITS[m.group(2)]


def recorded_at(path: Path, root: Path) -> datetime:
    """When the cassette was recorded; raises ValueError when the file does not say."""
    value = load(path, root).get("recorded_at")  # the proxy's checks: inside the folder, regular, size-bounded
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None:
        raise ValueError(f"no valid recorded_at ({value!r})")
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    if not args.dir.is_dir():
        print(f"cassette stale: {args.dir} is not a folder (pass the cassette folder, or set CASSETTE_DIR)")
        return 2
    now, files, problems = datetime.now(UTC), cassette_files(args.dir), 0
    hours = int(args.max_age.total_seconds()) // 3600
    limit = f"{hours} hours" if hours % 24 else f"{hours // 24} days"
    for path in files:
        name = path.relative_to(args.dir).as_posix()
        try:
            age = now - recorded_at(path, args.dir)
        except (OSError, ValueError, CassetteError) as e:
            print(f"{name}: age unknown: {e}")
            problems += 1
            continue
        if age > args.max_age:
            print(f"{name}: recorded {age.days} days ago")
            problems += 1
    print(
        f"{problems} of {len(files)} cassette(s) older than {limit} or undated; re-record them on purpose"
        if problems
        else f"all {len(files)} cassette(s) recorded within {limit}"
    )
    return 1 if problems else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "stale")
    parser.add_argument("dir", nargs="?", type=Path, default=default_dir(), help="cassette folder")
    parser.add_argument(
        "--max-age", type=parse_age, default="90d", help="oldest acceptable recording: 36h, 90d, 12w, 1y (default 90d)"
    )
    parser.set_defaults(func=run)
