"""MCP cassettes read as conversations (core/reading/conversation.py), as `show`, `ls` and `view` print them: the method
and tool of a request, a tool's text, the tools a server lists, an error, the notifications of an SSE answer."""

from __future__ import annotations

import json

from cassette_proxy.core.reading.conversation import MCP, conversation_of
from cassette_proxy.core.reading.summary import summarize_request, summarize_response, turn_lines

CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1}}}


def cassette(request: dict, response: dict) -> dict:
    return {"request": {"method": "POST", "url": "http://127.0.0.1/mcp", "body_format": "json", "body": request},
            "response": {"status": 200, **response}}  # fmt: skip


def sse(*messages: dict) -> dict:
    events = [{"ms": i, "text": f"event: message\ndata: {json.dumps(m)}\n\n"} for i, m in enumerate(messages)]
    return {"headers": {"content-type": "text/event-stream"}, "body_format": "events", "body": events}


def test_a_tool_call_shows_its_tool_arguments_and_result_with_the_notifications_before_it():
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    result = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "2"}], "isError": False}}
    data = cassette(CALL, sse(progress, result))
    conversation = conversation_of(data)
    assert conversation.shape == MCP and conversation.tools == ["add"]
    assert turn_lines(conversation) == [("user", 'tools/call add [call add] {\n  "a": 1\n}')]
    assert [event.name for event in conversation.answer.timeline] == ["notifications/progress", "response"]
    assert summarize_response(data["response"]).content == "2"
    assert summarize_request(data["request"]).first_user_message == "tools/call add"  # what `ls` lists


def test_a_tools_list_answer_names_the_servers_tools():
    listed = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "add"}, {"name": "echo"}]}}
    data = cassette({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"body_format": "json", "body": listed})
    conversation = conversation_of(data)
    assert conversation.tools == ["add", "echo"]
    assert summarize_response(data["response"]).content == "tools: add, echo"


def test_an_error_answer_is_shown_with_its_code_and_message():
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "Unknown tool: ad"}}
    answer = conversation_of(cassette(CALL, {"body_format": "json", "body": error})).answer
    assert answer.finish_reason == "error" and answer.parts[0].text == "error -32602: Unknown tool: ad"


def test_a_model_request_is_not_read_as_mcp():
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "tools/call"}]}
    assert conversation_of(cassette(chat, {"body_format": "json", "body": {}})).shape != MCP
