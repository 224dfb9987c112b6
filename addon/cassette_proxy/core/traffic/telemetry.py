"""Telemetry sinks: where agent frameworks send their traces, which is not a model call.

openai-agents posts its traces to api.openai.com/v1/traces/ingest, LangChain (and
litellm's callback) to LangSmith, Langfuse and Logfire (pydantic-ai) take OpenTelemetry
over HTTP, PostHog takes product and LLM analytics events, a Datadog agent traces. Each
export carries new trace and span ids and timestamps, so it could never be
keyed: recorded like a model call it missed on every replay (and `--strict`
failed although the application's output was right), and on a host outside the
scope it was refused as offline. So a request to a sink is never recorded,
keyed or a miss: in replay the proxy answers it with the success its client
reads, in record and update it passes through to the real sink, and the report
counts it as telemetry.

Pure: no mitmproxy import. The addon asks `TelemetrySinks.match()` and sends `answer()`.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..keys.hosts import host_path_glob

ACCEPTED = "accepted"
"""A JSON `{}` with 200: all openai-agents' exporter and LangSmith's client read is a 2xx status."""
OTLP = "otlp"
"""OTLP/HTTP's success: an empty ExportServiceResponse, in the encoding the export was sent in."""
LANGFUSE_INGESTION = "langfuse-ingestion"
"""Langfuse's batch ingestion answers 207 with the events that succeeded and failed."""
LOGFIRE_INFO = "logfire-info"
"""Logfire checks its write token with GET /v1/info and reads the project's name and URL."""
POSTHOG = "posthog"
"""PostHog's capture endpoints answer `{"status": 1}`; posthog-python reads only the 200."""
DATADOG_AGENT = "datadog-agent"
"""A Datadog agent's trace intake answers `{"rate_by_service": {}}` (ddtrace reads the sampling rates from it)."""


@dataclass(frozen=True)
class Sink:
    name: str
    """Whose sink it is, as the docs and the log name it."""
    methods: frozenset[str] | None
    """None: any method (sinks the user lists)."""
    host: str
    """A host glob."""
    path: str
    """A path glob (the query is never part of it)."""
    answer: str


def _sinks(name: str, methods: str, hosts: Iterable[str], paths: Iterable[str], answer: str) -> list[Sink]:
    return [Sink(name, frozenset(methods.split()), h, p, answer) for h in hosts for p in paths]


_LANGSMITH = ("api.smith.langchain.com", "eu.api.smith.langchain.com")
_LANGFUSE = ("cloud.langfuse.com", "*.cloud.langfuse.com")
_LOGFIRE = ("logfire-*.pydantic.dev",)
_POSTHOG = ("us.i.posthog.com", "eu.i.posthog.com", "app.posthog.com", "*.i.posthog.com")
_DATADOG_AGENT = ("localhost", "127.0.0.1", "datadog-agent", "dd-agent", "datadog")
"""Where a suite's Datadog agent listens: on the machine (a client that proxies loopback too, or a reverse route),
or a CI service container by its usual names. Reaching it through the proxy takes a client that does not keep
the agent's host in NO_PROXY (loopback usually is)."""
_DATADOG_SITES = ("*.datadoghq.com", "*.datadoghq.eu", "*.ddog-gov.com")

DEFAULT_SINKS = (
    # agents/tracing/processors.py BackendSpanExporter: _OPENAI_TRACING_INGEST_ENDPOINT; any status below 300 is success.
    *_sinks("openai-agents traces", "POST", ["api.openai.com"], ["/v1/traces/ingest"], ACCEPTED),
    # langsmith/client.py: GET /info once (LangSmithInfo() if it fails), then runs by POST /runs, /runs/batch,
    # /runs/multipart and PATCH /runs/<id>; OTel mode posts /otel/v1/traces. Reads (GET /runs/<id>, POST
    # /runs/query) and the prompt hub are data a test may need: not sinks.
    *_sinks("LangSmith", "GET", _LANGSMITH, ["/info"], ACCEPTED),
    *_sinks("LangSmith", "POST", _LANGSMITH, ["/runs", "/runs/batch", "/runs/multipart"], ACCEPTED),
    *_sinks("LangSmith", "PATCH", _LANGSMITH, ["/runs/*"], ACCEPTED),
    *_sinks("LangSmith", "POST", _LANGSMITH, ["/otel/v1/traces"], OTLP),
    # litellm's LangSmith callback (litellm/integrations/langsmith.py) posts to {base}/api/v1/runs/batch; the
    # langsmith client with LANGSMITH_ENDPOINT=…/api/v1 sends its own paths under the same prefix.
    *_sinks("LangSmith", "GET", _LANGSMITH, ["/api/v1/info"], ACCEPTED),
    *_sinks(
        "LangSmith", "POST", _LANGSMITH, ["/api/v1/runs", "/api/v1/runs/batch", "/api/v1/runs/multipart"], ACCEPTED
    ),
    *_sinks("LangSmith", "PATCH", _LANGSMITH, ["/api/v1/runs/*"], ACCEPTED),
    # langfuse/_client/span_processor.py: OTLP to {base_url}/api/public/otel/v1/traces; SDKs before v3 batch events
    # to /api/public/ingestion. Prompts (GET /api/public/v2/prompts/...) are data: not sinks.
    *_sinks("Langfuse", "POST", _LANGFUSE, ["/api/public/otel/v1/traces"], OTLP),
    *_sinks("Langfuse", "POST", _LANGFUSE, ["/api/public/ingestion"], LANGFUSE_INGESTION),
    # logfire/_internal/config.py: GET /v1/info with the write token, OTLP to /v1/traces, /v1/metrics, /v1/logs
    # on the region's base URL (logfire-us, logfire-eu, logfire-api).
    *_sinks("Logfire", "GET", _LOGFIRE, ["/v1/info"], LOGFIRE_INFO),
    *_sinks("Logfire", "POST", _LOGFIRE, ["/v1/traces", "/v1/metrics", "/v1/logs"], OTLP),
    # posthog/request.py: batch_post() to {host}/batch/ (EVENTS_ENDPOINT) and /i/v0/ai/batch/ (LLM analytics);
    # posthog-js and older clients capture at /capture/, /e/, /i/v0/e/. Feature flags (/flags/, /decide/) are
    # answers a test reads: not sinks.
    *_sinks("PostHog", "POST", _POSTHOG, ["/batch/", "/capture/", "/e/", "/i/v0/e/", "/i/v0/ai/batch/"], POSTHOG),
    # The Datadog trace agent's intake (datadog-agent pkg/trace/api/endpoints.go): traces, stats, the tracers'
    # telemetry and the EVP proxy LLM Observability posts through; agentless, LLM Observability's intake.
    *_sinks(
        "Datadog agent",
        "PUT POST",
        _DATADOG_AGENT,
        ["/v0.3/traces", "/v0.4/traces", "/v0.5/traces", "/v0.7/traces"],
        DATADOG_AGENT,
    ),
    *_sinks(
        "Datadog agent", "PUT POST", _DATADOG_AGENT, ["/v0.6/stats", "/telemetry/proxy/*", "/evp_proxy/*"], ACCEPTED
    ),
    # The agent's OTLP receiver (port 4318): OpenTelemetry's exporters post through requests, which honours the
    # proxy variables, while ddtrace's own writer (http.client) connects directly.
    *_sinks("Datadog agent", "POST", _DATADOG_AGENT[2:], ["/v1/traces", "/v1/metrics", "/v1/logs"], OTLP),
    *_sinks("Datadog", "POST", _DATADOG_SITES, ["/api/v2/llmobs", "/api/v2/apmtelemetry"], ACCEPTED),
)
"""The sinks answered unless `cassette_telemetry` is off."""

HEADERS = {"cache-control": "no-store", "x-cassette-telemetry": "answered offline"}


class TelemetrySinks:
    """Which requests go to a telemetry sink; asked on every request, so nearly all fail on one cheap test: the host
    against every sink's host at once, then the path against every sink's path at once (a model call to a host that
    also has sinks, 127.0.0.1 with a Datadog agent's, fails there); only a request passing both is compared sink
    by sink, in order."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = tuple(sinks)
        self._hosts = re.compile("|".join(dict.fromkeys(fnmatch.translate(s.host) for s in self.sinks)) or r"(?!)")
        self._paths = re.compile("|".join(dict.fromkeys(fnmatch.translate(s.path) for s in self.sinks)) or r"(?!)")
        self._compiled = [
            (s, re.compile(fnmatch.translate(s.host)), re.compile(fnmatch.translate(s.path))) for s in sinks
        ]

    def match(self, method: str, host: str, path: str) -> Sink | None:
        if not self.sinks or self._hosts.match(host := host.lower()) is None:
            return None
        path = path.partition("?")[0]
        if self._paths.match(path) is None:
            return None
        for sink, host_glob, path_glob in self._compiled:
            if (sink.methods is None or method in sink.methods) and host_glob.match(host) and path_glob.match(path):
                return sink
        return None


def parse_sinks(enabled: bool, extra: Sequence[str]) -> TelemetrySinks:
    """The default sinks (unless `enabled` is false) plus `extra` (`HOST/PATH` globs, any method, answered as OTLP
    when the export is protobuf, else `{}`); ValueError naming a bad entry."""
    sinks = list(DEFAULT_SINKS) if enabled else []
    for entry in extra:
        glob, host, path = host_path_glob(
            entry, "telemetry sink glob", "otel-collector.example.com/v1/traces or traces.example.com/*"
        )
        sinks.append(Sink(f"cassette_telemetry_sinks {glob}", None, host, f"/{path}", OTLP))
    return TelemetrySinks(sinks)


def answer(sink: Sink, content_type: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the success `sink`'s client expects, for an export sent as `content_type`."""
    if sink.answer == OTLP and "protobuf" in content_type.lower():
        return 200, {**HEADERS, "content-type": "application/x-protobuf"}, b""  # an empty Export*ServiceResponse
    body: dict[str, Any] = {}
    status = 200
    if sink.answer == LANGFUSE_INGESTION:
        status, body = 207, {"successes": [], "errors": []}
    elif sink.answer == POSTHOG:
        body = {"status": 1}
    elif sink.answer == DATADOG_AGENT:
        body = {"rate_by_service": {}}
    elif sink.answer == LOGFIRE_INFO:
        body = {"project_name": "cassette-replay", "project_url": "https://logfire.pydantic.dev/cassette-replay"}
    return status, {**HEADERS, "content-type": "application/json"}, json.dumps(body).encode()
