"""Run reports as the viewer shows them: counts summed, each miss with the changed fields of its closest recordings
side by side, errors, the cassettes no run used."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.files.cassette_file import load
from ..core.files.safe_read import CassetteError
from ..core.reading.diff import ABSENT, changes
from ..core.report import Miss, Report, ReportError
from .index import Index, resolve_id


def read_report(path: Path) -> Report:
    """The run report at `path`, read as every reader reads it (core/report.py)."""
    try:
        return Report.read(path)
    except ReportError as e:
        raise ReportError(f"{e} (pass the file cassette_report wrote)") from None


def _shown(value: Any) -> str | None:
    """One side of a side-by-side change: readable JSON, or None where the field does not exist."""
    if value is ABSENT:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def miss_view(root: Path, miss: Miss) -> dict[str, Any]:
    """A miss with, for each closest recording, the changed fields side by side (recorded | this run)."""
    closest = []
    for near in miss.get("closest") or []:
        if not isinstance(near, dict):
            continue
        cassette_id = str(near.get("cassette", ""))
        entry: dict[str, Any] = {"cassette": cassette_id, "differences": list(near.get("differences") or [])}
        path = resolve_id(root, cassette_id)
        if path is not None and "body" in miss:
            try:
                recorded = load(path, root)["request"].get("body")
            except (OSError, CassetteError):
                recorded = None
            else:
                entry["rows"] = [
                    [where, _shown(old), _shown(new)] for where, old, new in changes(recorded, miss["body"])
                ]
        closest.append(entry)
    shown = {name: miss.get(name, "") for name in ("key", "method", "url", "cassette")}
    return {**shown, "closest": closest}


def report_view(root: Path, reports: list[tuple[Path, Report]], ids: list[str]) -> dict[str, Any] | None:
    """What the pages show of one or more run reports: counts summed, misses with diffs, errors, unused cassettes."""
    if not reports:
        return None
    total = Report.merged([report for _, report in reports])
    return {
        "files": [str(path) for path, _ in reports],
        "counts": total.counts(),
        "misses": [miss_view(root, miss) for miss in total.misses],
        "errors": [error.to_json() for error in total.errors],
        "used": sorted(total.cassettes_used),
        "unused": [cassette_id for cassette_id in ids if cassette_id not in total.cassettes_used],
    }


@dataclass(frozen=True)
class ViewState:
    """What one view shows: the cassette folder, through its index, and the run reports named."""

    root: Path
    report_paths: list[Path]
    index: Index

    def reports(self) -> list[tuple[Path, Report]]:
        """Re-read on every index request: a report written by a run still going is picked up; an unreadable
        one is left out (the command read each once before it started)."""
        out = []
        for path in self.report_paths:
            try:
                out.append((path, read_report(path)))
            except ReportError:
                continue
        return out
