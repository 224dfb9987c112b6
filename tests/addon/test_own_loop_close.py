"""In-process tests of the answers to a test that runs on an event loop of its own (`"own_loop": true` in its
start, proxy/control_channel.py): each ends its connection (`Connection: close`), replayed, recorded or missed,
so no pooled connection outlives the loop; the other tests' answers, and what is stored, are unchanged."""

from __future__ import annotations

import json

import pytest
from in_process import chat_flow, files_under, json_answer
from mitmproxy import http

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

TOKEN = "control-token-for-tests-0123456789"
ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
OTHER = {**ASK, "model": "never-recorded"}


def connection(flow: http.HTTPFlow) -> str | None:
    return flow.response.headers.get("connection")


def start(proxies, mode: str):
    return proxies.start(cassette_mode=mode, cassette_hosts=["127.0.0.1"], cassette_control_token=TOKEN)


def test_a_hit_and_a_miss_close_their_connection_in_an_own_loop_test_only(proxies, upstream):
    proxies.record(upstream, ASK, {"answer": "hi"})
    proxy = start(proxies, "replay")

    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async", "own_loop": True})
    hit = proxy.answered(chat_flow(ASK, upstream.url()))
    miss = proxy.answered(chat_flow(OTHER, upstream.url()))
    assert (hit.response.status_code, miss.response.status_code) == (200, 409)
    assert connection(hit) == connection(miss) == "close"

    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_sync"})  # the next test keeps its connections
    hit = proxy.answered(chat_flow(ASK, upstream.url()))
    miss = proxy.answered(chat_flow(OTHER, upstream.url()))
    assert connection(hit) is None and connection(miss) is None

    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async_again", "own_loop": True})
    proxy.control(TOKEN, "/v1/test/end", {"test": "t.py::test_async_again"})
    assert connection(proxy.answered(chat_flow(ASK, upstream.url()))) is None  # outside any test: the run's rules
    assert proxy.done()["counts"]["hits"] == 3


def test_a_recorded_answer_closes_its_connection_and_the_cassette_does_not_keep_the_header(proxies, upstream):
    proxy = start(proxies, "record")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async", "own_loop": True})
    flow = proxy.answer(proxy.request(chat_flow(ASK, upstream.url())), json_answer({"answer": "hi"}))
    assert connection(flow) == "close"
    assert proxy.done()["counts"]["recorded"] == 1
    [cassette] = files_under(proxies.cassette_dir)
    assert "connection" not in json.loads(cassette.read_text())["response"]["headers"]


def test_an_upstreams_keep_alive_is_replaced_and_a_sync_tests_is_left_alone(proxies, upstream):
    proxy = start(proxies, "record")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async", "own_loop": True})
    flow = proxy.answer(proxy.request(chat_flow(ASK, upstream.url())), json_answer({}, connection="keep-alive"))
    assert connection(flow) == "close"
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_sync", "own_loop": False})
    flow = proxy.answer(proxy.request(chat_flow(OTHER, upstream.url())), json_answer({}, connection="keep-alive"))
    assert connection(flow) == "keep-alive"


def test_http2_and_an_upgrade_keep_their_connection(proxies, upstream):
    proxies.record(upstream, ASK, {"answer": "hi"})
    proxy = start(proxies, "replay")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async", "own_loop": True})
    over_h2 = chat_flow(ASK, upstream.url())
    over_h2.request.http_version = "HTTP/2.0"  # HTTP/2 forbids the header; its streams are not pooled per loop
    assert connection(proxy.answered(over_h2)) is None
    assert over_h2.response.status_code == 200

    proxy = start(proxies, "record")
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_async", "own_loop": True})
    upgrade = proxy.request(chat_flow(b"", upstream.url("/v1/realtime")))  # forwarded: the upstream answers
    upgrade.response = http.Response.make(101, b"", {"connection": "Upgrade", "upgrade": "websocket"})
    proxy.addon.responseheaders(upgrade)
    assert connection(upgrade) == "Upgrade"  # a 101's connection goes on as the WebSocket


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_own_loop_must_be_a_boolean(proxies, value):
    proxy = start(proxies, "replay")
    answer = proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_a", "own_loop": value}, status=400)
    assert '"own_loop" must be true or false' in answer["error"]["message"]
