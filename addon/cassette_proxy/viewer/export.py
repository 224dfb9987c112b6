"""The viewer written to one self-contained HTML file: the page with the chosen cassettes and the reports in it, for
a CI artifact or a review without a server."""

from __future__ import annotations

from pathlib import Path

from ..core.files.atomic_write import write_atomic
from .index import detail
from .page import page
from .reports import ViewState, report_view


def export(state: ViewState, out: Path, only: set[str] | None) -> int:
    """Write the page to `out` with the cassettes `only` names (None: every one) in full."""
    summaries = state.index.summaries()
    report = report_view(state.root, state.reports(), [s["id"] for s in summaries])
    chosen = [s for s in summaries if only is None or s["id"] in only]
    data = {
        "mode": "export",
        "root": str(state.root),
        "cassettes": chosen,
        "report": report,
        "details": {s["id"]: detail(state.root, s["id"]) for s in chosen},
    }
    write_atomic(out, page(data, served=False).html.encode("utf-8"))
    print(f"cassette view: wrote {out} ({len(chosen)} of {len(summaries)} cassettes)")
    return 0
