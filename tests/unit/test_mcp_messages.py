"""MCP's JSON-RPC facts (core/sessions/mcp.py): which requests are MCP, which ids an answer must respond to, which SSE
events respond, and a miss as JSON-RPC errors."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.sessions.mcp import McpRequest, answered_ids, id_key, mcp_request, miss_answer

CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "initialize"}]}).encode()
INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}).encode()
MARKED = {"mcp-protocol-version": "2025-11-25"}


@pytest.mark.parametrize(
    ("method", "body", "headers", "expected"),
    [
        ("POST", CHAT, {}, None),  # a model call that mentions "initialize" is no MCP
        ("POST", INIT, {}, McpRequest("POST", (0,), initialize=True)),
        ("POST", b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}', {}, McpRequest("POST", (1,))),
        ("POST", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {}, None),  # unmarked, not a first request
        ("POST", b'{"jsonrpc":"2.0","id":"a","method":"tools/list"}', MARKED, McpRequest("POST", ("a",))),
        ("POST", b'{"jsonrpc":"2.0","method":"notifications/initialized"}', MARKED, McpRequest("POST")),
        ("POST", b'{"jsonrpc":"2.0","id":5,"result":{}}', MARKED, McpRequest("POST")),  # a response has no id to answer
        (
            "POST",
            b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]',
            MARKED,
            McpRequest("POST", (1, 2), batch=True),
        ),
        ("POST", b"not json", MARKED, None),
        ("POST", b'{"id":1,"method":"initialize"}', {}, None),  # no jsonrpc member
        ("GET", b"", {"mcp-session-id": "s1"}, McpRequest("GET", session="s1")),
        ("DELETE", b"", {"mcp-session-id": "s1"}, McpRequest("DELETE", session="s1")),
        ("GET", b"", {}, None),
    ],
)
def test_mcp_requests_are_recognised_by_the_protocols_own_marks(method, body, headers, expected):
    fields = [(name.title().encode(), value.encode()) for name, value in headers.items()]  # any case on the wire
    assert mcp_request(method, body, fields) == expected


def test_a_big_unmarked_body_is_not_searched_for_an_initialize():
    big = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"x": "y" * 70000}}).encode()
    assert mcp_request("POST", big, []) is None
    assert mcp_request("POST", big, [(b"mcp-protocol-version", b"2025-11-25")]) is not None


@pytest.mark.parametrize(
    ("request_", "keeps"),
    [
        (McpRequest("POST", (0,), initialize=True), True),
        (McpRequest("POST"), True),  # a notification or a response the server waits for
        (McpRequest("GET", session="s"), True),
        (McpRequest("DELETE", session="s"), True),
        (McpRequest("POST", (3,), session="s"), False),  # a request with an answer to replay
    ],
)
def test_what_keeps_the_servers_session_whole(request_, keeps):
    assert request_.keeps_session is keeps


def test_only_responses_answer_ids():
    result = 'event: message\ndata: {"jsonrpc":"2.0","id":3,"result":{}}\n\n'
    error = 'data: {"jsonrpc":"2.0","id":"x","error":{"code":1,"message":"m"}}\n\n'
    request = 'data: {"jsonrpc":"2.0","id":9,"method":"sampling/createMessage"}\n\n'
    assert answered_ids(result) == [id_key(3)]
    assert answered_ids(error) == [id_key("x")]
    assert answered_ids(request) == [] and answered_ids(": ping\n\n") == []
    assert id_key(3) != id_key("3")


def test_a_miss_is_the_jsonrpc_error_of_each_request():
    one = miss_answer(McpRequest("POST", (3,)), "cassette miss: x", {"key": "k"})
    assert one == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32001, "message": "cassette miss: x", "data": {"key": "k"}},
    }
    batch = miss_answer(McpRequest("POST", (1, "b"), batch=True), "m", {})
    assert [error["id"] for error in batch] == [1, "b"]
