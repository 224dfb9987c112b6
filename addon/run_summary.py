"""The end-of-run summary of a proxy's report (`cassette run`, the pytest plugin), and what `--strict` fails a run for."""

from __future__ import annotations


def text(report: dict | None) -> str:
    """One line for the end of a run, plus one line per miss."""
    if report is None:
        return "cassette: no run report (the proxy did not shut down cleanly)"
    counts = report["counts"]
    line = (
        f"cassette: {report['mode']}: {counts['hits']} hits, {counts['misses']} misses, {counts['recorded']} recorded, "
        f"{counts['upstream']} upstream, {counts['passthrough']} passthrough"
    )
    if counts["errors"]:
        line += f", {counts['errors']} errors"
    client_errors = report.get("client_errors") or {}
    if client_errors.get("hits") or client_errors.get("recorded"):
        line += (
            f" (recorded 4xx answers: {client_errors.get('hits', 0)} of the hits, "
            f"{client_errors.get('recorded', 0)} of the recorded)"
        )
    lines = [line]
    lines += [f"cassette: miss {m['method']} {m['url']} (would be {m['cassette']})" for m in report["misses"]]
    lines += [f"cassette: error {e['type']}: {e.get('message', '')}" for e in report["errors"]]
    return "\n".join(lines)


def strict_failures(report: dict | None) -> list[str]:
    """What `--strict` fails on even when the suite swallowed it: misses, errors, upstream calls in replay."""
    if report is None:
        return ["no run report"]
    counts = report["counts"]
    failures = []
    if counts["misses"]:
        failures.append(f"{counts['misses']} misses")
    if counts["errors"]:
        failures.append(f"{counts['errors']} errors")
    if report["mode"] == "replay" and counts["upstream"]:
        failures.append(f"{counts['upstream']} upstream requests in replay mode")
    return failures


def merged(reports: list[dict]) -> dict:
    """One report for several proxies (xdist workers): counts added up, misses and errors listed together."""
    return {
        "mode": reports[0]["mode"],
        "counts": {name: sum(r["counts"][name] for r in reports) for name in reports[0]["counts"]},
        "misses": [miss for r in reports for miss in r["misses"]],
        "errors": [error for r in reports for error in r["errors"]],
        "client_errors": {
            name: sum((r.get("client_errors") or {}).get(name, 0) for r in reports) for name in ("hits", "recorded")
        },
    }
