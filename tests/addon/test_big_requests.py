"""A request body above BIG_REQUEST_BYTES is keyed, diffed and stored by a worker process (core/workers/request_worker.py),
in-process through the addon's hooks: the same key, the same redacted cassette and the same miss answer as the
proxy's own functions give, and the worker really is another process."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.keys.key import request_key
from cassette_proxy.core.workers import request_worker
from cassette_proxy.core.workers.request_worker import BIG_REQUEST_BYTES
from cassette_proxy.proxy import upstream
from cassette_proxy.proxy.facts import request_facts
from in_process import Addon
from mitmproxy import http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

SECRET = "sk-fake-DO-NOT-STORE-0123456789abcdef"


def big_body(last: str) -> bytes:
    turns = [{"role": "user", "content": f"turn {i}: " + "words " * 200} for i in range(BIG_REQUEST_BYTES // 1000)]
    body = {"model": "gpt-4o-mini", "api_key": SECRET, "messages": [*turns, {"role": "user", "content": last}]}
    return json.dumps(body).encode()


def chat_flow(body: bytes) -> http.HTTPFlow:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", "api.openai.com", 443
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["content-type"] = "application/json"
    flow.request.content = body
    return flow


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    """`proxy(flow, mode, answer=None)` runs the request hook (and, with an upstream answer, the response hook);
    `proxy.workers` counts the worker processes started."""
    addon, started = Addon(), []
    real_run = request_worker.subprocess.run

    def counted(*args, **kwargs):
        started.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(request_worker.subprocess, "run", counted)

    async def reachable(*args) -> None:  # no network here: the upstream the flow names is taken as reachable
        return None

    monkeypatch.setattr(upstream, "unreachable", reachable)
    with taddons.context(addon, Proxyserver()) as tctx:

        def run(flow, mode: str, answer: dict | None = None) -> Addon:
            tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), cassette_mode=mode, cassette_preload=0)
            addon.configure(set(tctx.options.keys()))
            loop = tctx.master.event_loop
            loop.run_until_complete(addon.request(flow))
            if answer is not None:
                flow.response = http.Response.make(200, json.dumps(answer), {"content-type": "application/json"})
                loop.run_until_complete(addon.response(flow))
            return addon

        run.workers = started
        yield run


def test_a_big_request_is_keyed_by_a_worker_as_the_proxy_keys_it(proxy):
    flow = chat_flow(big_body("which turn was longest?"))
    addon = proxy(flow, "replay")
    assert flow.response.status_code == 409
    facts = request_facts(flow.request, addon.options.read_headers, "api.openai.com")
    assert json.loads(flow.response.content)["error"]["key"] == request_key(facts, addon.options.recipe.key_headers)
    assert proxy.workers  # the key and the miss: other processes
    assert "body" not in addon.report.misses[0]  # no megabytes in the report


def test_a_big_request_records_redacted_by_a_worker_then_replays_and_a_near_miss_is_explained(proxy, tmp_path):
    recorded = chat_flow(big_body("which turn was longest?"))
    addon = proxy(recorded, "record", answer={"choices": [{"message": {"content": "turn 3"}}]})
    assert "x-cassette-error" not in recorded.response.headers
    assert addon.report.recorded == 1 and addon.report.errors == []
    [file] = (tmp_path / "cassettes").rglob("*.json")
    assert SECRET.encode() not in file.read_bytes()  # redacted as any cassette is: a credential field
    cassette = load(file)
    assert cassette["request"]["body"]["messages"][-1]["content"] == "which turn was longest?"
    assert cassette["keyed_with"]["request_redacted"] is True

    again = chat_flow(big_body("which turn was longest?"))
    proxy(again, "replay")
    assert again.response.status_code == 200 and json.loads(again.response.content)["choices"]

    near = chat_flow(big_body("which turn was shortest?"))
    addon = proxy(near, "replay")
    assert near.response.status_code == 409
    [closest] = addon.report.misses[-1]["closest"]
    assert closest["cassette"] == file.relative_to(tmp_path / "cassettes").as_posix()
    assert any("messages" in difference and "shortest" in difference for difference in closest["differences"])
    assert SECRET not in json.dumps(addon.report.misses[-1])


def test_a_request_just_below_the_threshold_stays_in_the_proxy(proxy):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * (BIG_REQUEST_BYTES - 100)}]})
    flow = chat_flow(body.encode())
    proxy(flow, "replay")
    assert flow.response.status_code == 409 and proxy.workers == []


def test_a_failing_worker_fails_closed(proxy, monkeypatch):
    monkeypatch.setattr(request_worker, "WORKER_CODE", "import sys; sys.exit(3)")
    flow = chat_flow(big_body("anything"))
    addon = proxy(flow, "replay")
    assert flow.response.status_code == 500
    assert json.loads(flow.response.content)["error"]["type"] == "cassette_error"
    assert "exit code 3" in addon.report.errors[0].message
