"""What `ls`, `show` and `diff` read out of a cassette, for each API shape we record, whole and streamed.

The summary is a projection of conversation.py's model (what `cassette view`
renders): refusals, tool calls, reasoning and streams read the same in both.
"""

from __future__ import annotations

import json

import pytest
from cassette_proxy.cli.diff import compare
from cassette_proxy.core.reading.conversation import conversation_from, conversation_of
from cassette_proxy.core.reading.summary import summarize_request, summarize_response, turn_lines


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
    ("url", "body", "turns"),
    [
        (
            "https://api.anthropic.com/v1/messages",
            {"system": "be brief", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
            [("system", "be brief"), ("user", "hi")],
        ),
        ("https://api.openai.com/v1/responses", {"instructions": "be brief", "input": "hi"}, [("system", "be brief"), ("user", "hi")]),
        (
            "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
            {"contents": [{"parts": [{"text": "hi"}, {"text": "there"}]}]},
            [("user", "hi there")],
        ),
        ("https://api.openai.com/v1/embeddings", {"input": ["a", "b"]}, [("input", "a"), ("input", "b")]),
        ("https://api.openai.com/v1/completions", {"prompt": "complete me"}, [("user", "complete me")]),
        (
            "https://compatible.example/v2/chat",
            {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
            [("user", "hi"), ("assistant", "hello")],
        ),
    ],
    ids=["anthropic", "responses", "gemini", "embeddings", "completions", "compatible-chat-on-another-path"],
)  # fmt: skip
def test_turns_of_each_request_shape(url, body, turns):
    request = {"method": "POST", "url": url, "body_format": "json", "body": body}
    assert turn_lines(conversation_from(request)) == turns
    assert summarize_request(request).first_user_message == next(text for role, text in turns if role != "system")


def test_model_comes_from_the_url_when_the_body_has_none():
    request = {
        "method": "POST",
        "url": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent",
        "body_format": "json",
        "body": {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    }
    summary = summarize_request(request)
    assert (summary.model, summary.first_user_message) == ("gemini-2.0-flash", "hi")


def chat_answer(message: dict, finish: str = "stop") -> dict:
    return {"model": "gpt-4o", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def whole(body: dict) -> dict:
    return {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json", "body": body}


REFUSED = {"role": "assistant", "content": None, "refusal": "I can't help with that."}


def test_a_chat_refusal_is_the_content_not_no_text():
    summary = summarize_response(whole(chat_answer(REFUSED)))
    assert summary.content == "[refusal] I can't help with that."


def test_two_different_refusals_are_a_content_change_for_diff():
    other = {**REFUSED, "refusal": "I won't do that."}
    changes, other_fields = compare({"response": whole(chat_answer(REFUSED))}, {"response": whole(chat_answer(other))})
    assert changes == [("content", "[refusal] I can't help with that.", "[refusal] I won't do that.")]
    assert other_fields == []


# Each case: a response, and what the summary's content must say (the viewer's model holds the same parts).
AGREEING = {
    "responses refusal, whole": (
        whole({"object": "response", "model": "gpt-4.1", "status": "completed", "output": [
            {"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}]}),
        "[refusal] No.",
    ),
    "chat refusal, streamed": (
        {"status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": "text", "body": sse(
            {"choices": [{"index": 0, "delta": {"refusal": "I can"}}]},
            {"choices": [{"index": 0, "delta": {"refusal": "not."}, "finish_reason": "stop"}]},
        ) + "data: [DONE]\n\n"},
        "[refusal] I cannot.",
    ),
    "anthropic thinking, text and a tool call": (
        whole({"type": "message", "model": "claude-sonnet-4", "stop_reason": "tool_use", "content": [
            {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Paris"}},
        ]}),
        '[thinking] The user wants weather.\nLet me look.\n[call weather] {\n  "city": "Paris"\n}',
    ),
    "responses reasoning and a function call, streamed": (
        {"status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": "text", "body": sse(
            {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Think."},
            {"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "name": "f"}},
            {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a": 1}'},
            {"type": "response.completed", "response": {"model": "o4-mini", "status": "completed"}},
            named=True,
        )},
        '[thinking] Think.\n[call f] {"a": 1}',
    ),
    "gemini thought and text": (
        whole({"candidates": [{"content": {"parts": [{"text": "Hmm.", "thought": True}, {"text": "Yes."}]},
                               "finishReason": "STOP"}]}),
        "[thinking] Hmm.\nYes.",
    ),
    "an error body": (
        {**whole({"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error"}}),
         "status": 404},
        '{\n  "message": "The model `gpt-9` does not exist",\n  "type": "invalid_request_error"\n}',
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", AGREEING)
def test_summary_content_and_the_viewers_answer_read_the_same_parts(case):
    response, content = AGREEING[case]
    assert summarize_response(response).content == content
    answer = conversation_of({"request": {}, "response": response}).answer
    labelled = [f"[{p.name}] {p.text}" if p.name in ("thinking", "refusal") else p.text for p in answer.parts]
    assert all(piece in content for piece in labelled if piece)
    assert "[refusal]" not in answer.text and "[thinking]" not in answer.text


def test_an_answer_no_reader_knows_has_no_content_so_diff_compares_its_fields():
    before, after = whole({"data": [{"id": "gpt-4o"}]}), whole({"data": [{"id": "gpt-4.1"}]})
    assert summarize_response(before).content == ""
    changes, other = compare({"response": before}, {"response": after})
    assert changes == [] and other
