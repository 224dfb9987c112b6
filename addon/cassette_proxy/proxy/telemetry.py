"""Requests to a telemetry sink (core/traffic/telemetry.py): answered here in replay, passed through otherwise, never saved.

Called from the cassette addon's request hook, before the scope check: a sink on
a host outside `cassette_hosts` (LangSmith, Langfuse, Logfire) would otherwise be
refused as offline in replay, and one inside it (openai-agents' traces on
api.openai.com) would be keyed and missed.
"""

from __future__ import annotations

from mitmproxy import http

from ..core.report import Report
from ..core.traffic.telemetry import Sink, TelemetrySinks, answer, parse_sinks
from .state import FlowState, Outcome


class Telemetry:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.sinks: TelemetrySinks = parse_sinks(True, [])

    def configure(self, sinks: TelemetrySinks) -> None:
        """cassette_telemetry and cassette_telemetry_sinks, as options.py parsed them."""
        self.sinks = sinks

    def match(self, request: http.Request, host: str) -> Sink | None:
        return self.sinks.match(request.method, host, request.path)

    def handle(self, flow: http.HTTPFlow, state: FlowState, mode: str, sink: Sink) -> None:
        """Count it; in replay answer it with the success its client reads (else it goes to the real sink)."""
        state.outcome = Outcome.TELEMETRY
        self.report.telemetry_request(sink.name)
        if mode == "replay":
            status, headers, body = answer(sink, flow.request.headers.get("content-type", ""))
            flow.response = http.Response.make(status, body, headers)
