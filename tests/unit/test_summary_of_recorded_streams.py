"""A stream recorded live (`body_format: events`) summarises like the same stream stored whole.

`cassette show` and `cassette diff` read the summary: without this, a
re-recorded stream would show no model, finish reason or content, and a
changed answer would pass review as "same behaviour".
"""

from __future__ import annotations

import fake_upstream
from cassette_proxy.cli.diff import compare
from cassette_proxy.core.files.cassette_file import events_fields
from cassette_proxy.core.reading.summary import summarize_response


def recorded(events: list[str]) -> dict:
    timed = [{"ms": 10 * i, "text": text} for i, text in enumerate(events)]
    return {"status": 200, "headers": {"content-type": "text/event-stream"}, **events_fields(timed)}


def test_a_live_recorded_anthropic_stream_has_its_model_finish_and_text():
    body = {"model": "claude-test-model", "messages": [{"role": "user", "content": "hi"}]}
    events = fake_upstream.anthropic_stream(body, "echo: hi there", error=False)
    summary = summarize_response(recorded(events))
    whole = summarize_response({"status": 200, "body_format": "text", "body": "".join(events)})
    assert (summary.model, summary.finish_reason, summary.content) == (
        "claude-test-model",
        "end_turn",
        "echo: hi there",
    )
    assert summary == whole


def test_diff_sees_a_changed_answer_in_a_re_recorded_stream():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    before = recorded(fake_upstream.openai_chat_stream(body, "the old answer", error=False))
    after = recorded(fake_upstream.openai_chat_stream(body, "the new answer", error=False))
    changes, _ = compare({"response": before}, {"response": after})
    assert changes == [("content", "the old answer", "the new answer")]
