"""The request hook with telemetry: a trace export is answered in replay, forwarded unsaved in record, counted."""

from __future__ import annotations

import json

import pytest
from in_process import Addon
from mitmproxy import exceptions, http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

TRACE = {"data": [{"object": "trace", "id": "trace_0af7651916cd43dd8448eb211c80319c", "workflow_name": "Agent"}]}


def export_flow(host: str = "api.openai.com", path: str = "/v1/traces/ingest") -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", host, 443
    flow.request.path = path
    flow.request.headers["content-type"] = "application/json"
    flow.request.content = json.dumps(TRACE).encode()
    return flow


@pytest.fixture
def proxy(tmp_path):
    """`proxy(flow, **options)` configures the addon and runs the request hook; with `upstream`, the response hooks
    then run for that answer, as for a forwarded request."""
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:

        def run(flow, upstream: http.Response | None = None, **options) -> Addon:
            tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), **options)
            addon.configure(set(tctx.options.keys()))
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            if upstream is not None:
                assert flow.response is None  # not answered here: mitmproxy forwards it
                flow.response = upstream
                addon.responseheaders(flow)
                tctx.master.event_loop.run_until_complete(addon.response(flow))
            return addon

        yield run


@pytest.mark.parametrize("host", ["api.openai.com", "api.smith.langchain.com"])  # in scope, and outside it
def test_a_trace_export_is_answered_offline_in_replay_and_is_no_miss(proxy, host, tmp_path):
    flow = export_flow(host, "/v1/traces/ingest" if host == "api.openai.com" else "/runs/multipart")
    addon = proxy(flow)
    assert flow.response.status_code == 200 and flow.response.headers["x-cassette-telemetry"] == "answered offline"
    assert addon.report.telemetry == 1
    assert addon.report.telemetry_sinks == {"openai-agents traces" if host == "api.openai.com" else "LangSmith": 1}
    assert addon.report.counts() | {"telemetry": 0} == dict.fromkeys(addon.report.counts(), 0)
    assert addon.report.strict_failures() == []
    assert not (tmp_path / "cassettes").exists()


@pytest.mark.parametrize("mode", ["record", "update"])
def test_a_trace_export_goes_to_the_real_sink_unsaved_when_recording(proxy, mode, tmp_path):
    flow = export_flow()
    addon = proxy(flow, upstream=tflow.tresp(), cassette_mode=mode)
    assert addon.report.telemetry == 1 and addon.report.upstream == 0 and addon.report.recorded == 0
    assert not list((tmp_path / "cassettes").rglob("*.json"))


def test_turned_off_a_trace_export_is_an_ordinary_request_again(proxy):
    flow = export_flow()
    addon = proxy(flow, cassette_telemetry=False)
    assert flow.response.status_code == 409 and len(addon.report.misses) == 1
    flow = export_flow("api.smith.langchain.com", "/runs")
    addon = proxy(flow, cassette_telemetry=False)
    assert flow.response.status_code == 403 and addon.report.offline


def test_a_listed_sink_is_answered_and_a_bad_one_refused(proxy):
    flow = export_flow("otel.internal.example", "/v1/traces")
    flow.request.headers["content-type"] = "application/x-protobuf"
    addon = proxy(flow, cassette_telemetry_sinks=["otel.internal.example/v1/*"])
    assert (flow.response.status_code, flow.response.content) == (200, b"")
    assert flow.response.headers["content-type"] == "application/x-protobuf"
    assert addon.report.telemetry == 1
    with pytest.raises(exceptions.OptionsError, match=r"cassette_telemetry_sinks: 'otel\.internal\.example' is not a"):
        proxy(export_flow(), cassette_telemetry_sinks=["otel.internal.example"])
