"""Requests to a telemetry sink (core/telemetry.py): answered here in replay, passed through otherwise, never saved.

Called from the cassette addon's request hook, before the scope check: a sink on
a host outside `cassette_hosts` (LangSmith, Langfuse, Logfire) would otherwise be
refused as offline in replay, and one inside it (openai-agents' traces on
api.openai.com) would be keyed and missed.
"""

from __future__ import annotations

import threading

from mitmproxy import exceptions, http

from ..core.report import Report
from ..core.telemetry import Sink, TelemetrySinks, answer, parse_sinks
from .state import FlowState


class Telemetry:
    def __init__(self, report: Report, lock: threading.Condition) -> None:
        self.report = report
        self.lock = lock
        self.sinks = parse_sinks(True, [])

    def configure(self, enabled: bool, extra: list[str]) -> None:
        try:
            self.sinks: TelemetrySinks = parse_sinks(enabled, extra)
        except ValueError as e:
            raise exceptions.OptionsError(f"cassette_telemetry_sinks: {e}") from None

    def match(self, request: http.Request, host: str) -> Sink | None:
        return self.sinks.match(request.method, host, request.path)

    def handle(self, flow: http.HTTPFlow, state: FlowState, mode: str, sink: Sink) -> None:
        """Count it; in replay answer it with the success its client reads (else it goes to the real sink)."""
        state.outcome = "telemetry"
        with self.lock:
            self.report.telemetry += 1
        if mode == "replay":
            status, headers, body = answer(sink, flow.request.headers.get("content-type", ""))
            flow.response = http.Response.make(status, body, headers)
