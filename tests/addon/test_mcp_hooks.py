"""MCP over streamable HTTP in-process, through the addon's hooks: an SSE answer recorded at its JSON-RPC response
even when the client stops reading there, the GET stream saved when the client leaves it, a session kept whole on
the server in record mode, a 404 "session not found" never saved, a miss as the JSON-RPC error of the request, and
a local server's conversations keyed without its port. Through a real mitmdump and the real SDKs:
tests/integration/test_mcp.py."""

from __future__ import annotations

import json

from cassette_proxy.core.files.cassette_file import load
from in_process import LoopbackUpstream, Proxies, chat_flow, files_under, json_answer
from mitmproxy import flow as mflow
from mitmproxy import http
from mitmproxy.test import tflow

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

SESSION = "7c1f0e4d2b8a4f6e9d3c5b1a0f2e4d6c"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
PROGRESS = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'
RESULT = 'event: message\ndata: {"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"3"}]}}\n\n'
SSE = {"content-type": "text/event-stream"}


def mcp_post(upstream: LoopbackUpstream, message: dict | list, session: str | None = SESSION) -> http.HTTPFlow:
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    if session:
        headers["mcp-session-id"] = session
    if isinstance(message, dict) and message.get("method") == "initialize":
        headers = {"accept": headers["accept"]}  # the first request carries no MCP header
    return chat_flow(json.dumps(message).encode(), upstream.url("/mcp"), headers)


def mcp_get(upstream: LoopbackUpstream) -> http.HTTPFlow:
    flow = tflow.tflow()
    headers = {"accept": "text/event-stream", "mcp-session-id": SESSION, "mcp-protocol-version": "2025-11-25"}
    flow.request = http.Request.make("GET", upstream.url("/mcp"), b"", headers)
    return flow


def stream_through(proxy, flow: http.HTTPFlow, chunks: list[str], *, then: str | None = None) -> None:
    """The upstream's SSE answer arriving in `chunks` through the addon's stream callable; `then` ends the flow
    with mitmproxy's error message (the client leaving, the upstream failing), else with the upstream's end."""
    flow.response = http.Response.make(200, b"", {**SSE, "mcp-session-id": SESSION})
    proxy.addon.responseheaders(flow)
    assert callable(flow.response.stream)

    async def feed() -> None:
        for chunk in chunks:
            assert flow.response.stream(chunk.encode()) == chunk.encode()  # passed through unchanged
        if then is None:
            flow.response.stream(b"")
            await proxy.addon.response(flow)
        else:
            flow.error = mflow.Error(then)
            proxy.addon.error(flow)

    proxy.loop.run_until_complete(feed())


def recorded(proxies: Proxies) -> list[dict]:
    return [load(path) for path in files_under(proxies.cassette_dir)]


def record_proxy(proxies: Proxies, mode: str = "record"):
    return proxies.start(cassette_mode=mode, cassette_hosts=["127.0.0.1"])


def test_an_sse_answer_is_saved_at_its_jsonrpc_response_though_the_client_stops_reading(proxies, upstream):
    proxy = record_proxy(proxies)
    flow = proxy.request(mcp_post(upstream, CALL))
    # The client has its result and closes before the server's end of stream reaches the proxy.
    stream_through(proxy, flow, [PROGRESS, RESULT[:30], RESULT[30:]], then="Client disconnected.")
    report = proxy.done()
    assert report["errors"] == [] and report["counts"]["recorded"] == 1
    [cassette] = recorded(proxies)
    assert [event["text"] for event in cassette["response"]["body"]] == [PROGRESS, RESULT]


def test_an_sse_answer_cut_before_its_jsonrpc_response_is_not_saved(proxies, upstream):
    proxy = record_proxy(proxies)
    flow = proxy.request(mcp_post(upstream, CALL))
    stream_through(proxy, flow, [PROGRESS], then="Client disconnected.")
    report = proxy.done()
    assert recorded(proxies) == []
    assert [error["type"] for error in report["errors"]] == ["stream_incomplete"]


def test_a_response_to_another_id_does_not_complete_the_answer(proxies, upstream):
    proxy = record_proxy(proxies)
    flow = proxy.request(mcp_post(upstream, CALL))
    other = RESULT.replace('"id":3', '"id":"3"')  # a string id is another id
    stream_through(proxy, flow, [other], then="Client disconnected.")
    assert recorded(proxies) == [] and proxy.done()["counts"]["errors"] == 1


def test_the_get_stream_is_saved_when_the_client_leaves_it(proxies, upstream):
    proxy = record_proxy(proxies)
    flow = proxy.request(mcp_get(upstream))
    listed = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
    stream_through(proxy, flow, [listed, "event: mess"], then="Client disconnected.")
    report = proxy.done()
    assert report["errors"] == [] and report["counts"]["recorded"] == 1
    [cassette] = recorded(proxies)
    assert cassette["request"]["method"] == "GET"
    assert [event["text"] for event in cassette["response"]["body"]] == [listed]  # the half event left out


def test_a_get_stream_the_upstream_cut_is_not_saved(proxies, upstream):
    proxy = record_proxy(proxies)
    flow = proxy.request(mcp_get(upstream))
    stream_through(proxy, flow, [PROGRESS], then="server closed connection")
    assert recorded(proxies) == [] and proxy.done()["errors"][0]["type"] == "stream_incomplete"


def test_record_mode_sends_a_recorded_initialize_live_and_keeps_its_cassette(proxies, upstream):
    first = record_proxy(proxies)
    first.answer(first.request(mcp_post(upstream, INITIALIZE)), json_answer({"jsonrpc": "2.0", "id": 0, "result": {}}))
    first.done()
    [path] = files_under(proxies.cassette_dir)
    before = path.read_bytes()
    connections = upstream.connections()

    second = record_proxy(proxies)
    flow = second.request(mcp_post(upstream, INITIALIZE))
    assert flow.response is None, "a recorded initialize was replayed: its session id is not the server's"
    assert upstream.connections() == connections + 1
    fresh = {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "new"}}}
    second.answer(flow, json_answer(fresh, **{"mcp-session-id": "fresh-live-id"}))
    report = second.done()
    assert path.read_bytes() == before  # kept, not rewritten
    assert report["counts"]["recorded"] == 0 and report["counts"]["overwritten"] == 0
    assert report["cassettes_used"] == [str(path.relative_to(proxies.cassette_dir))]


def test_record_mode_replays_a_recorded_request_of_a_live_session_and_forwards_its_notifications(proxies, upstream):
    first = record_proxy(proxies)
    first.answer(first.request(mcp_post(upstream, CALL)), json_answer({"jsonrpc": "2.0", "id": 3, "result": {}}))
    first.done()
    second = record_proxy(proxies)
    assert second.request(mcp_post(upstream, CALL)).response.status_code == 200  # replayed
    note = second.request(mcp_post(upstream, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert note.response is None  # the server's session must hear it
    assert second.request(mcp_get(upstream)).response is None


def test_a_replayed_answer_carries_the_session_id_of_the_request_it_answers(proxies, upstream):
    first = record_proxy(proxies)
    listed = json_answer({"jsonrpc": "2.0", "id": 3, "result": {}}, **{"mcp-session-id": "recorded-session"})
    first.answer(first.request(mcp_post(upstream, CALL, session="recorded-session")), listed)
    first.done()
    second = record_proxy(proxies)
    replayed = second.request(mcp_post(upstream, CALL, session="live-session"))
    assert replayed.response.status_code == 200
    assert replayed.response.headers["mcp-session-id"] == "live-session"  # the TypeScript SDK adopts this id


def test_a_404_for_a_session_id_is_never_saved(proxies, upstream):
    proxy = record_proxy(proxies)
    gone = json_answer(
        {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Session not found"}}
    )
    gone.status_code = 404
    proxy.answer(proxy.request(mcp_post(upstream, CALL)), gone)
    report = proxy.done()
    assert recorded(proxies) == []
    [error] = report["errors"]
    assert error["type"] == "not_recorded" and error["reason"] == "mcp session not found"


def test_a_miss_answers_the_jsonrpc_error_of_the_request_with_the_cassette_message(proxies, upstream):
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(mcp_post(upstream, CALL))
    assert flow.response.status_code == 409
    body = json.loads(flow.response.content)
    assert body["jsonrpc"] == "2.0" and body["id"] == 3
    assert body["error"]["code"] == -32001 and body["error"]["message"].startswith("cassette miss: no recording")
    assert body["error"]["data"]["cassette"].startswith("127.0.0.1/mcp/")
    batch = proxy.request(mcp_post(upstream, [CALL, {**CALL, "id": 4}]))
    assert [error["id"] for error in json.loads(batch.response.content)] == [3, 4]
    assert proxy.done()["counts"]["misses"] == 2


def test_a_miss_of_a_notification_keeps_the_cassette_error_shape(proxies, upstream):
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(mcp_post(upstream, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert json.loads(flow.response.content)["error"]["type"] == "cassette_miss"  # no id to answer


def test_a_local_mcp_server_replays_on_another_port(proxies, upstream):
    first = record_proxy(proxies)
    first.answer(first.request(mcp_post(upstream, CALL)), json_answer({"jsonrpc": "2.0", "id": 3, "result": {}}))
    first.done()
    [path] = files_under(proxies.cassette_dir)
    assert path.parent.relative_to(proxies.cassette_dir).as_posix() == "127.0.0.1/mcp"
    moved = LoopbackUpstream()  # the server started again: a new port
    try:
        replay = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
        assert replay.request(mcp_post(moved, CALL)).response.status_code == 200
        assert replay.done()["counts"]["hits"] == 1
    finally:
        moved.close()


def test_other_requests_to_a_local_server_keep_their_port(proxies, upstream):
    proxies.record(upstream, {"model": "m", "messages": []}, {"choices": []})
    [path] = files_under(proxies.cassette_dir)
    assert path.relative_to(proxies.cassette_dir).parts[0] == f"127.0.0.1_{upstream.port}"
