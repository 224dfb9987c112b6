"""core/drift/drift.py: what changed between a recorded answer and a live one, by severity, for each API shape.

Answers come from the fake upstream's builders (the shapes the real SDKs are
tested against) and are stored as the recorder stores them.
"""

from __future__ import annotations

import copy
import json

import fake_upstream
import pytest
from cassette_proxy.core.drift.drift import Severity, compare, parse_severity, similarity, word_diff
from cassette_proxy.core.files.cassette_file import body_fields, events_fields

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
CLAUDE = {"model": "claude-test-model", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


def whole(payload: dict, status: int = 200) -> dict:
    data = json.dumps(payload).encode()
    return {"status": status, "headers": {"content-type": "application/json"}, **body_fields(data, "application/json")}


def streamed(events: list[str]) -> dict:
    timed = [{"ms": 10 * i, "text": text} for i, text in enumerate(events)]
    return {"status": 200, "headers": {"content-type": "text/event-stream"}, **events_fields(timed)}


DROP = object()


def chat(text: str | None = "echo: hi", **changes) -> dict:
    """An OpenAI chat completion (text None: `content: null`); `changes` set paths written with `__`
    (`choices__0__finish_reason`), a value of DROP removes the field."""
    body = fake_upstream.openai_chat(CHAT, text or "")
    body["choices"][0]["message"]["content"] = text
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = body
        for name in parents:
            target = target[int(name)] if name.isdigit() else target[name]
        if value is DROP:
            del target[int(last) if last.isdigit() else last]
        else:
            target[int(last) if last.isdigit() else last] = value
    return whole(body)


TOOL = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]


def tool_call(name: str = "get_weather", arguments: str = '{"city": "Paris"}') -> dict:
    call = [{**TOOL[0], "function": {"name": name, "arguments": arguments}}]
    return chat(choices__0__message__content=None, choices__0__message__tool_calls=call,
                choices__0__finish_reason="tool_calls")  # fmt: skip


def anthropic(blocks: list[dict], stop: str = "end_turn") -> dict:
    return whole({**fake_upstream.anthropic_message(CLAUDE, ""), "content": blocks, "stop_reason": stop})


def anthropic_stream(text: str, edit=None) -> dict:
    events = fake_upstream.anthropic_stream(CLAUDE, text, error=False)
    if edit:
        events = [_edit_event(event, edit) for event in events]
    return streamed(events)


def _edit_event(event: str, edit) -> str:
    name, data = event.split("\n", 1)
    payload = json.loads(data.removeprefix("data: "))
    return f"{name}\ndata: {json.dumps(edit(copy.deepcopy(payload)))}\n\n"


def _without_index(payload: dict) -> dict:
    if payload["type"] == "content_block_delta":
        del payload["index"]
    return payload


def openai_stream(text: str, extra: dict | None = None) -> dict:
    events = fake_upstream.openai_chat_stream({**CHAT, "stream": True}, text, error=False)
    if extra:
        events = [
            event if "[DONE]" in event else fake_upstream.sse({**json.loads(event[6:]), **extra}) for event in events
        ]
    return streamed(events)


CASES = {
    "the same answer": (chat(), chat(), []),
    "an id and a timestamp changed": (chat(), chat(id="chatcmpl-other", created=1800000000), []),
    "a retired model": (
        chat(),
        whole(
            {
                "error": {
                    "message": "The model `gpt-4o-mini` does not exist",
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                }
            },
            404,
        ),
        [(Severity.STATUS, "status", "200", "404", "The model `gpt-4o-mini` does not exist")],
    ),
    "a field added": (chat(), chat(service_tier="default"), [(Severity.SHAPE, "added", "", "string", "service_tier")]),
    "a nested field removed": (
        chat(),
        chat(usage__total_tokens=DROP),
        [(Severity.SHAPE, "removed", "number", "", "usage.total_tokens")],
    ),
    "a field of another type": (
        chat(),
        chat(created="2024-01-01"),
        [(Severity.SHAPE, "type", "number", "string", "created")],
    ),
    "a null that now holds a value is not a shape change": (
        chat(choices__0__logprobs=None),
        chat(choices__0__logprobs={"content": None}),
        [],
    ),
    "a finish reason": (
        chat(),
        chat(choices__0__finish_reason="length"),
        [(Severity.BEHAVIOUR, "finish_reason", "stop", "length", "")],
    ),
    "the model behind an alias": (
        chat(model="gpt-4o-2024-08-06"),
        chat(model="gpt-4o-2024-11-20"),
        [(Severity.BEHAVIOUR, "model", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20", "")],
    ),
    "a tool call's argument keys": (
        tool_call(),
        tool_call(arguments='{"city": "Paris", "unit": "C"}'),
        [(Severity.BEHAVIOUR, "tool_calls", "get_weather(city)", "get_weather(city, unit)", "")],
    ),
    "a tool call's argument values only": (
        tool_call(),
        tool_call(arguments='{"city":"Lyon"}'),
        [(Severity.TEXT, "tool_arguments", 'get_weather({"city": "Paris"})', 'get_weather({"city": "Lyon"})', None)],
    ),
    "a refusal": (
        chat("Sure."),
        chat(None, choices__0__message__refusal="I can't help with that."),
        [
            (Severity.BEHAVIOUR, "refusal", "-", "refused", ""),
            (Severity.BEHAVIOUR, "content_blocks", "text", "refusal", ""),
            (Severity.TEXT, "text", "Sure.", "", None),
        ],
    ),
    "two choices instead of one": (
        chat(),
        whole(
            {
                **json.loads(json.dumps(fake_upstream.openai_chat(CHAT, "a"))),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "a"},
                        "finish_reason": "stop",
                        "logprobs": None,
                    },
                    {
                        "index": 1,
                        "message": {"role": "assistant", "content": "b"},
                        "finish_reason": "stop",
                        "logprobs": None,
                    },
                ],
            }
        ),
        [
            (Severity.BEHAVIOUR, "choices", "1", "2", ""),
            (Severity.BEHAVIOUR, "content_blocks", "text", "text, text", ""),
            (Severity.TEXT, "text", "echo: hi", "ab", None),
        ],
    ),
    "a changed text": (
        chat("Paris is the capital of France."),
        chat("The capital of France is Paris."),
        [(Severity.TEXT, "text", "Paris is the capital of France.", "The capital of France is Paris.", None)],
    ),
    "a new block type is behaviour, not shape": (
        anthropic([{"type": "text", "text": "Paris."}]),
        anthropic([{"type": "thinking", "thinking": "Hmm.", "signature": "s"}, {"type": "text", "text": "Paris."}]),
        [(Severity.BEHAVIOUR, "content_blocks", "text", "thinking, text", "")],
    ),
    "a stream chunked otherwise, assembled the same": (
        anthropic_stream("echo: hi there"),
        anthropic_stream("echo: hi there", lambda p: p),
        [],
    ),
    "a stream whose events lost a field": (
        anthropic_stream("echo: hi there"),
        anthropic_stream("echo: hi there", _without_index),
        [(Severity.SHAPE, "removed", "number", "", "content_block_delta:index")],
    ),
    "a stream whose events gained a field": (
        openai_stream("echo: hi"),
        openai_stream("echo: hi", {"obfuscation": "x1"}),
        [(Severity.SHAPE, "added", "", "string", "chat.completion.chunk:obfuscation")],
    ),
    "a stream that now answers whole": (
        openai_stream("echo: hi"),
        chat(),
        [(Severity.SHAPE, "streamed", "events", "whole", "content-type text/event-stream → application/json")],
    ),
    "another error message for the same status": (
        whole({"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}, 400),
        whole({"error": {"message": "max_tokens: at most 8192", "type": "invalid_request_error"}}, 400),
        [(Severity.TEXT, "error_message", "max_tokens is too large", "max_tokens: at most 8192", None)],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_compare(case):
    old, new, expected = CASES[case]
    found = [(f.severity, f.field, f.old, f.new, f.detail) for f in compare(old, new)]
    # A detail of None in the table: not pinned here (the text's similarity and word diff have their own test).
    assert [
        got if want[4] is not None else (*got[:4], None) for got, want in zip(found, expected, strict=False)
    ] == expected
    assert len(found) == len(expected)


def test_findings_come_worst_first():
    new = chat("other words", service_tier="default", choices__0__finish_reason="length")
    assert [f.severity for f in compare(chat(), new)] == [Severity.SHAPE, Severity.BEHAVIOUR, Severity.TEXT]


def test_a_text_change_says_how_similar_and_what_changed():
    [finding] = compare(chat("The cat sat on the mat."), chat("The dog sat on the mat."))
    assert finding.detail == "similarity 0.83: -[cat] +[dog]"


def test_word_diff_is_cut_and_similarity_is_bounded():
    assert similarity("a b c", "a b c") == 1.0 and similarity("a b", "c d") == 0.0
    assert word_diff(" ".join(f"w{i}" for i in range(100)), "x") == "-[w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 …] +[x]"
    words = [f"a{i}" for i in range(50)]
    diff = word_diff(" ".join(words), " ".join(w if i % 2 else w.upper() for i, w in enumerate(words)), limit=60)
    assert len(diff) == 60 and diff.startswith("-[a0] +[A0] -[a2] +[A2]") and diff.endswith("…")


def test_a_tool_call_appearing_is_behaviour_not_shape():
    severities = {f.severity for f in compare(chat(), tool_call())}
    assert Severity.SHAPE not in severities and Severity.BEHAVIOUR in severities


def test_severity_names_parse_and_order():
    assert parse_severity("Behaviour") is Severity.BEHAVIOUR
    assert Severity.STATUS > Severity.SHAPE > Severity.BEHAVIOUR > Severity.TEXT
    with pytest.raises(ValueError, match="'style' is not a drift severity: use one of status, shape"):
        parse_severity("style")
