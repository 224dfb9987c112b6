"""Telemetry sinks: which requests are a framework's traces, and the success each client reads back."""

from __future__ import annotations

import fnmatch
import json

import pytest
from cassette_proxy.core.traffic.telemetry import answer, parse_sinks

SINKS = parse_sinks(True, [])


@pytest.mark.parametrize(
    ("method", "host", "path", "sink"),
    [
        ("POST", "api.openai.com", "/v1/traces/ingest", "openai-agents traces"),
        ("GET", "api.smith.langchain.com", "/info", "LangSmith"),
        ("POST", "api.smith.langchain.com", "/runs/multipart", "LangSmith"),
        ("POST", "eu.api.smith.langchain.com", "/runs/batch", "LangSmith"),
        ("PATCH", "api.smith.langchain.com", "/runs/0f3c0b8e-5c2a-4a8e-9d1e-3c1b7f9a2e11", "LangSmith"),
        ("POST", "us.cloud.langfuse.com", "/api/public/otel/v1/traces", "Langfuse"),
        ("POST", "cloud.langfuse.com", "/api/public/ingestion", "Langfuse"),
        ("POST", "logfire-us.pydantic.dev", "/v1/traces", "Logfire"),
        ("GET", "logfire-eu.pydantic.dev", "/v1/info", "Logfire"),
        ("POST", "API.OpenAI.com", "/v1/traces/ingest?x=1", "openai-agents traces"),
        ("POST", "api.smith.langchain.com", "/api/v1/runs/batch", "LangSmith"),  # litellm's callback
        ("PATCH", "api.smith.langchain.com", "/api/v1/runs/0f3c0b8e", "LangSmith"),
        ("POST", "us.i.posthog.com", "/batch/", "PostHog"),
        ("POST", "eu.i.posthog.com", "/capture/", "PostHog"),
        ("POST", "us.i.posthog.com", "/i/v0/ai/batch/", "PostHog"),
        ("PUT", "localhost", "/v0.4/traces", "Datadog agent"),
        ("POST", "datadog-agent", "/v0.5/traces", "Datadog agent"),
        ("POST", "127.0.0.1", "/evp_proxy/v2/api/v2/llmobs", "Datadog agent"),
        ("POST", "127.0.0.1", "/telemetry/proxy/api/v2/apmtelemetry", "Datadog agent"),
        ("POST", "llmobs-intake.datadoghq.com", "/api/v2/llmobs", "Datadog"),
        ("POST", "datadog-agent", "/v1/traces", "Datadog agent"),  # its OTLP receiver
    ],
)
def test_the_known_sinks_are_recognised(method, host, path, sink):
    assert SINKS.match(method, host, path).name == sink


@pytest.mark.parametrize(
    ("method", "host", "path"),
    [
        ("POST", "api.openai.com", "/v1/responses"),  # a model call
        ("GET", "api.openai.com", "/v1/traces/ingest"),
        ("GET", "api.smith.langchain.com", "/runs/0f3c0b8e-5c2a-4a8e-9d1e-3c1b7f9a2e11"),  # reading a run back
        ("POST", "api.smith.langchain.com", "/runs/query"),
        ("GET", "api.smith.langchain.com", "/commits/hwchase17/react/latest"),  # a prompt from the hub: data
        ("GET", "cloud.langfuse.com", "/api/public/v2/prompts/greeting"),
        ("POST", "evil.example", "/v1/traces/ingest"),
        ("POST", "us.i.posthog.com", "/flags/"),  # feature flags a test reads: data
        ("POST", "api.smith.langchain.com", "/api/v1/runs/query"),
        ("GET", "localhost", "/v0.4/traces"),
        ("POST", "127.0.0.1", "/v1/chat/completions"),  # a local model server
        (
            "POST",
            "127.0.0.1",
            "/v1/traces",
        ),  # OTLP on loopback: a collector of the suite's own, not known to be an agent
        ("POST", "traces.example.com", "/v0.4/traces"),  # an agent path on a host that is no agent's
    ],
)
def test_model_calls_and_the_data_a_test_reads_are_not_sinks(method, host, path):
    assert SINKS.match(method, host, path) is None


def test_the_cheap_tests_answer_as_the_sinks_one_by_one_would():
    """Every known host and path crossed with every other (and a model call's): the host and path filters a request
    meets first change no answer, they only spare the sink-by-sink comparison."""
    sinks = parse_sinks(True, ["otel.example.com/v1/*"])
    hosts = {s.host.replace("*", "x") for s in sinks.sinks} | {"api.openai.com", "127.0.0.1"}
    paths = {s.path.replace("*", "x") for s in sinks.sinks} | {"/v1/chat/completions", "/v1/traces?x=1"}
    for method in ("GET", "POST", "PUT", "PATCH"):
        for host in hosts:
            for path in paths:
                one_by_one = next(
                    (
                        s
                        for s in sinks.sinks
                        if (s.methods is None or method in s.methods)
                        and fnmatch.fnmatchcase(host, s.host)
                        and fnmatch.fnmatchcase(path.partition("?")[0], s.path)
                    ),
                    None,
                )
                assert sinks.match(method, host, path) == one_by_one, (method, host, path)


def test_more_sinks_can_be_listed_and_the_known_ones_turned_off():
    extra = parse_sinks(True, ["otel.example.com/v1/*"])
    assert extra.match("POST", "otel.example.com", "/v1/traces") is not None
    assert extra.match("POST", "api.openai.com", "/v1/traces/ingest") is not None
    off = parse_sinks(False, ["otel.example.com/v1/*"])
    assert off.match("POST", "api.openai.com", "/v1/traces/ingest") is None
    assert off.match("PUT", "otel.example.com", "/v1/logs") is not None
    assert parse_sinks(False, []).match("POST", "api.openai.com", "/v1/traces/ingest") is None


@pytest.mark.parametrize("entry", ["otel.example.com", "https://otel.example.com/v1/traces", "/v1/traces", ""])
def test_a_sink_glob_without_host_or_path_is_refused(entry):
    with pytest.raises(ValueError, match="is not a telemetry sink glob; write HOST/PATH"):
        parse_sinks(True, [entry])


def test_each_client_gets_the_success_it_reads():
    status, headers, body = answer(SINKS.match("POST", "api.openai.com", "/v1/traces/ingest"), "application/json")
    assert (status, json.loads(body), headers["content-type"]) == (200, {}, "application/json")
    otlp = SINKS.match("POST", "logfire-us.pydantic.dev", "/v1/traces")
    assert answer(otlp, "application/x-protobuf")[::2] == (200, b"")  # an empty ExportTraceServiceResponse
    assert answer(otlp, "application/json")[2] == b"{}"
    info = json.loads(answer(SINKS.match("GET", "logfire-us.pydantic.dev", "/v1/info"), "")[2])
    assert set(info) == {"project_name", "project_url"}  # what logfire's from_token() reads
    status, _, body = answer(SINKS.match("POST", "cloud.langfuse.com", "/api/public/ingestion"), "application/json")
    assert (status, json.loads(body)) == (207, {"successes": [], "errors": []})
    assert headers["x-cassette-telemetry"] == "answered offline"


@pytest.mark.parametrize(
    ("host", "path", "body"),
    [("us.i.posthog.com", "/batch/", {"status": 1}), ("localhost", "/v0.4/traces", {"rate_by_service": {}})],
)
def test_posthog_and_the_datadog_agent_get_the_answer_their_clients_read(host, path, body):
    status, headers, content = answer(SINKS.match("POST", host, path), "application/json")
    assert (status, json.loads(content)) == (200, body)
    assert headers["x-cassette-telemetry"] == "answered offline"
