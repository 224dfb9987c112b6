"""What a miss tells the developer: which request had no cassette, and what changed since the closest recordings.

A bare "no match" invites a blind re-record; a field-level diff against the
nearest recorded requests shows the prompt edit that caused the miss.
"""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any

from ..core.cassette_file import CassetteError, load
from ..core.diff import differences
from ..core.test_scope import test_dir
from .errors import error_body

MAX_CANDIDATES = 200
"""Cassettes of the same endpoint compared on a miss (newest first); bounds the miss path on large folders."""

MAX_CLOSEST = 3
MAX_DIFFERENCES = 8


def newest_cassettes(folder: Path, count: int) -> list[Path]:
    """The `count` most recently written cassettes of a folder, without building a Path for every file in it."""
    try:
        with os.scandir(folder) as entries:
            stamped = [
                (entry.stat().st_mtime_ns, entry.name)
                for entry in entries
                if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file()
            ]
    except OSError:
        return []
    return [folder / name for _, name in heapq.nlargest(count, stamped)]


def closest(endpoint_dir: Path, root: Path, method: str, body: Any) -> list[dict]:
    """The recorded requests of the same endpoint nearest to this one, with what differs."""
    ranked = []
    for path in newest_cassettes(endpoint_dir, MAX_CANDIDATES):
        try:
            request = load(path)["request"]
        except (OSError, CassetteError):
            continue
        diff = differences(request.get("body"), body)
        if request.get("method") != method:
            diff.insert(0, f"method: {request.get('method')} → {method}")
        ranked.append((len(diff), path, diff))
    ranked.sort(key=lambda item: item[0])
    return [
        {
            "cassette": path.relative_to(root).as_posix(),
            "differences": diff[:MAX_DIFFERENCES]
            + ([f"… and {len(diff) - MAX_DIFFERENCES} more"] if len(diff) > MAX_DIFFERENCES else []),
        }
        for _, path, diff in ranked[:MAX_CLOSEST]
    ]


def miss_body(
    key: str,
    method: str,
    url: str,
    cassette: str,
    mode: str,
    nearest: list[dict],
    scope: str = "shared",
    test: str | None = None,
) -> dict:
    if nearest:
        first = nearest[0]
        changed = "; ".join(first["differences"][:3]) or "identical body (headers or query differ)"
        hint = f"closest recording {first['cassette']} differs in: {changed}"
    else:
        hint = "no recording exists for this endpoint yet"
    where = ""
    if test is not None and scope == "test":
        # A renamed or moved test looks here first: say whose folder was searched.
        where = (
            f" in the test scope of test {test} (its recordings live under {test_dir(test)}/; "
            "a renamed test loses them unless its folder is renamed too)"
        )
    elif test is not None:
        where = f" for test {test} (shared scope)"
    message = (
        f"cassette miss: no recording for {method} {url} (key {key}) in {mode} mode{where}; {hint}. "
        "Run with cassette_mode=record to record it."
    )
    return error_body(
        "cassette_miss",
        message,
        key=key,
        method=method,
        url=url,
        cassette=cassette,
        mode=mode,
        scope=scope,
        test=test,
        closest=nearest,
    )
