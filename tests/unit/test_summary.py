"""What `ls`, `show` and `diff` read out of a cassette, for each API shape we record, whole and streamed."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.summary import conversation, summarize_request, summarize_response


def sse(*events: dict, named: bool = False) -> str:
    return "".join(
        (f"event: {event.get('type', 'message')}\n" if named else "") + f"data: {json.dumps(event)}\n\n"
        for event in events
    )


WHOLE = {
    "openai chat": {
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}],
    },
    "openai tool call": {
        "model": "gpt-4o",
        "choices": [
            {
                "message": {"content": None, "tool_calls": [{"function": {"name": "weather", "arguments": "{}"}}]},
                "finish_reason": "tool_calls",
            }
        ],
    },
    "anthropic": {
        "type": "message",
        "model": "claude-sonnet-4",
        "content": [{"type": "text", "text": "Paris"}],
        "stop_reason": "end_turn",
    },
    "openai responses": {
        "object": "response",
        "model": "gpt-4.1",
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Paris"}]}],
    },
    "gemini": {
        "modelVersion": "gemini-2.0-flash",
        "candidates": [{"content": {"parts": [{"text": "Paris"}]}, "finishReason": "STOP"}],
    },
    "ollama": {"model": "llama3", "message": {"role": "assistant", "content": "Paris"}, "done_reason": "stop"},
}
EXPECTED = {
    "openai chat": ("gpt-4o-mini-2024-07-18", "stop", "Paris"),
    "openai tool call": ("gpt-4o", "tool_calls", "[call weather] {}"),
    "anthropic": ("claude-sonnet-4", "end_turn", "Paris"),
    "openai responses": ("gpt-4.1", "completed", "Paris"),
    "gemini": ("gemini-2.0-flash", "STOP", "Paris"),
    "ollama": ("llama3", "stop", "Paris"),
}


@pytest.mark.parametrize("api", WHOLE)
def test_whole_response_summary(api):
    summary = summarize_response({"status": 200, "body_format": "json", "body": WHOLE[api]})
    assert (summary.status, summary.model, summary.finish_reason, summary.content) == (200, *EXPECTED[api])


STREAMS = {
    "openai chat": sse(
        {"model": "gpt-4o-mini", "choices": [{"delta": {"content": "Par"}, "finish_reason": None}]},
        {"model": "gpt-4o-mini", "choices": [{"delta": {"content": "is"}, "finish_reason": None}]},
        {"model": "gpt-4o-mini", "choices": [{"delta": {}, "finish_reason": "stop"}]},
    )
    + "data: [DONE]\n\n",
    "anthropic": sse(
        {"type": "message_start", "message": {"model": "claude-sonnet-4", "content": []}},
        {"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Par"}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "is"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        named=True,
    ),
    "openai responses": sse(
        {"type": "response.created", "response": {"model": "gpt-4.1", "status": "in_progress"}},
        {"type": "response.output_text.delta", "delta": "Par"},
        {"type": "response.output_text.delta", "delta": "is"},
        {"type": "response.completed", "response": {"model": "gpt-4.1", "status": "completed"}},
        named=True,
    ),
    "ollama": '{"model":"llama3","message":{"content":"Par"}}\n{"model":"llama3","message":{"content":"is"},'
    '"done_reason":"stop"}\n',
}


@pytest.mark.parametrize("api", STREAMS)
def test_streamed_response_summary_joins_the_pieces(api):
    summary = summarize_response({"status": 200, "body_format": "text", "body": STREAMS[api]})
    assert summary.content == "Paris"
    assert summary.finish_reason == {"anthropic": "end_turn", "openai responses": "completed"}.get(api, "stop")


def test_embeddings_show_size_and_a_digest_that_changes_with_the_vector():
    def content(vector):
        body = {"object": "list", "data": [{"embedding": vector}], "model": "text-embedding-3-small"}
        return summarize_response({"status": 200, "body_format": "json", "body": body}).content

    assert content([0.1, 0.2]).startswith("[embedding 2 values, sha256 ")
    assert content([0.1, 0.2]) != content([0.1, 0.3])


@pytest.mark.parametrize(
    ("body", "turns"),
    [
        (
            {"system": "be brief", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
            [("system", "be brief"), ("user", "hi")],
        ),
        ({"instructions": "be brief", "input": "hi"}, [("system", "be brief"), ("input", "hi")]),
        ({"contents": [{"parts": [{"text": "hi"}, {"text": "there"}]}]}, [("user", "hi there")]),
        ({"input": ["a", "b"]}, [("input", "a"), ("input", "b")]),
        ({"prompt": "complete me"}, [("input", "complete me")]),
    ],
)
def test_conversation_of_each_request_shape(body, turns):
    assert conversation(body) == turns


def test_model_comes_from_the_url_when_the_body_has_none():
    request = {
        "method": "POST",
        "url": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
        "body_format": "json",
        "body": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }
    summary = summarize_request(request)
    assert (summary.model, summary.first_user_message) == ("gemini-2.0-flash", "hi")
