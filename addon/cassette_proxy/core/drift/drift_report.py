"""The drift report: one result per cassette checked, as a table, JSON for an artifact and Markdown for an issue.

Results are ordered worst first: drift by severity (status, shape, behaviour,
text), then what could not be checked (errors, rate limits, the request
budget), then the cassettes whose answer held. A rate limit is listed, never
counted as drift. Pure: a drift run (launch/drift_run.py) fills it and writes it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..printable import printable
from ..reading.summary import code_span, fence, one_line
from .drift import Finding, Severity, worst

REPORT_VERSION = 1


class Outcome(StrEnum):
    SAME = "same"
    DRIFT = "drift"
    ERROR = "error"
    """Not checked: no credentials, a request that cannot be re-sent, the network, the proxy."""
    RATE_LIMITED = "rate_limited"
    """Not checked: still 429 after the retries the provider's `retry-after` allowed."""
    SKIPPED = "skipped"
    """Not checked: over `--max-requests`."""


_UNCHECKED_ORDER = {Outcome.ERROR: 0, Outcome.RATE_LIMITED: 1, Outcome.SKIPPED: 2, Outcome.SAME: 3}

EXIT_DRIFT = 1
EXIT_UNCHECKED = 3
"""No drift at or above the threshold, but a cassette could not be checked (or none was)."""


@dataclass
class Result:
    cassette: str
    """The cassette's path relative to the cassette folder."""
    request: str
    """`POST api.openai.com/v1/chat/completions`: method, host and path."""
    model: str = ""
    prompt: str = ""
    recorded_at: str = ""
    outcome: Outcome = Outcome.SAME
    findings: list[Finding] = field(default_factory=list)
    message: str = ""
    """Why it was not checked, or what else happened (a 429 retried before the answer came)."""
    attempts: int = 0
    """Requests sent for it, retries included."""

    @property
    def severity(self) -> Severity | None:
        return worst(self.findings)

    def to_json(self) -> dict[str, Any]:
        severity = self.severity
        return {
            "cassette": self.cassette,
            "request": self.request,
            "model": self.model,
            "prompt": self.prompt,
            "recorded_at": self.recorded_at,
            "outcome": self.outcome.value,
            "severity": severity.label if severity else None,
            "findings": [finding.to_json() for finding in self.findings],
            "message": self.message,
            "attempts": self.attempts,
        }


@dataclass
class DriftReport:
    cassette_dir: str
    fail_on: Severity
    checked_at: str
    results: list[Result] = field(default_factory=list)

    def ordered(self) -> list[Result]:
        def rank(result: Result) -> tuple[int, int, str]:
            severity = result.severity
            return (
                -(severity or 0),
                _UNCHECKED_ORDER.get(result.outcome, 0) if severity is None else 0,
                result.cassette,
            )

        return sorted(self.results, key=rank)

    def counts(self) -> dict[str, int]:
        counts = {label: 0 for label in ("checked", *(s.label for s in sorted(Severity, reverse=True)))}
        counts.update({outcome.value: 0 for outcome in Outcome if outcome is not Outcome.DRIFT})
        for result in self.results:
            severity = result.severity
            if result.outcome in (Outcome.SAME, Outcome.DRIFT):
                counts["checked"] += 1
            counts[severity.label if severity else result.outcome.value] += 1
        return counts

    def worst(self) -> Severity | None:
        return max((r.severity for r in self.results if r.severity is not None), default=None)

    def exit_status(self) -> int:
        """1 for drift at or above `fail_on`; 3 when a cassette could not be checked (or none was); else 0.

        Rate limits and the request budget leave cassettes unchecked without failing the run, as long as
        at least one was checked: a budgeted scheduled job is expected to run into them.
        """
        found = self.worst()
        if found is not None and found >= self.fail_on:
            return EXIT_DRIFT
        counts = self.counts()
        if counts[Outcome.ERROR.value] or not counts["checked"]:
            return EXIT_UNCHECKED
        return 0

    def headline(self) -> str:
        counts = self.counts()
        drifted = ", ".join(f"{counts[s.label]} {s.label}" for s in sorted(Severity, reverse=True))
        unchecked = ", ".join(
            f"{counts[o.value]} {o.value.replace('_', '-')}" for o in (Outcome.RATE_LIMITED, Outcome.SKIPPED)
        )
        errors = counts[Outcome.ERROR.value]
        return (
            f"{counts['checked']} checked: {drifted}, {counts[Outcome.SAME.value]} same; {unchecked}, "
            f"{errors} error{'s' * (errors != 1)}"
        )

    def to_json(self) -> dict[str, Any]:
        found = self.worst()
        return {
            "drift_report": REPORT_VERSION,
            "checked_at": self.checked_at,
            "cassette_dir": self.cassette_dir,
            "fail_on": self.fail_on.label,
            "worst": found.label if found else None,
            "exit_status": self.exit_status(),
            "counts": self.counts(),
            "results": [result.to_json() for result in self.ordered()],
        }


def describe(finding: Finding) -> str:
    """One line a reviewer reads: `added usage.service_tier (string)`, `finish_reason: stop → length`."""
    if finding.field == "status":
        return f"{finding.old} → {finding.new}" + (f": {finding.detail}" if finding.detail else "")
    if finding.field in ("added", "removed"):
        return f"{finding.field} {finding.detail} ({finding.new or finding.old})"
    if finding.field == "type":
        return f"{finding.detail}: {finding.old} → {finding.new}"
    if finding.severity is Severity.TEXT:
        return f"{finding.field} changed: {finding.detail}"
    return f"{finding.field}: {finding.old} → {finding.new}" + (f" ({finding.detail})" if finding.detail else "")


def _label(result: Result) -> str:
    severity = result.severity
    return severity.label if severity else result.outcome.value.replace("_", "-")


def _change(result: Result) -> str:
    if result.findings:
        more = len(result.findings) - 1
        return describe(result.findings[0]) + (f" (+{more} more)" if more else "")
    return result.message


def short_cassette(path: str) -> str:
    """The folder and the start of the key: enough to find the file, short enough for a table."""
    folder, _, name = path.rpartition("/")
    stem = name.removesuffix(".json")
    return f"{folder}/{stem[:8]}{stem[32:]}" if len(stem) >= 32 else path


def render_text(report: DriftReport) -> str:
    """A table, worst first, then each drifted cassette's findings in full."""
    ordered = report.ordered()
    lines = [f"cassette drift: {report.headline()}", ""]
    width = max((len(short_cassette(r.cassette)) for r in ordered), default=8)
    lines.append(f"{'RESULT':<12} {'CASSETTE':<{width}}  CHANGE")
    for result in ordered:
        lines.append(
            f"{_label(result):<12} {short_cassette(result.cassette):<{width}}  {one_line(_change(result), 160)}"
        )
    for result in (r for r in ordered if r.findings):
        lines += ["", f"{_label(result)}: {result.cassette}", f"    {_request_line(result)}"]
        lines += [f"    {finding.severity.label:<10} {describe(finding)}" for finding in result.findings]
    return "\n".join(lines)


def _request_line(result: Result) -> str:
    parts = [result.request, result.model, f'"{one_line(result.prompt, 80)}"' if result.prompt else ""]
    parts.append(f"recorded {result.recorded_at[:10]}" if result.recorded_at else "")
    return " · ".join(part for part in parts if part)


def render_markdown(report: DriftReport) -> str:
    """For an issue comment or a job summary: recorded and live content only inside code spans and fences, and
    every control character escaped (printable.py): the file is posted as an issue, where a raw ESC, BEL or a
    bidi override (U+202E) would reorder or hide what a reviewer reads."""
    ordered = report.ordered()
    found = report.worst()
    verdict = "❌" if report.exit_status() == EXIT_DRIFT else "⚠️" if report.exit_status() else "✅"
    lines = [f"### {verdict} Cassette drift: {report.headline()}", ""]
    lines.append(f"Fails on **{report.fail_on.label}** or worse; worst found: **{found.label if found else 'none'}**.")
    lines += ["", "| result | cassette | request | change |", "|---|---|---|---|"]
    for result in ordered:
        cells = [_label(result), code_span(short_cassette(result.cassette)), code_span(_request_line(result)),
                 code_span(one_line(_change(result), 200)) if _change(result) else ""]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    for result in (r for r in ordered if r.findings):
        body = [f"{finding.severity.label:<10} {describe(finding)}" for finding in result.findings]
        lines += ["", f"<details><summary>{_label(result)}: <code>{html.escape(result.cassette)}</code></summary>", ""]
        lines += [fence(body), *body, fence(body), "", "</details>"]
    return printable("\n".join(lines) + "\n", keep_newlines=True)
