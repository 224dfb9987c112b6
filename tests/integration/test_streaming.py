"""Streamed responses through a real mitmdump: recorded live, saved as events, replayed with the same text.

Clients are the real openai and anthropic SDKs and httpx (for Ollama's NDJSON);
the fake upstream streams like the real APIs, with a pause between events.
Timing claims are ratios measured within the same test.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY

GAP = 0.15
"""Seconds the fake upstream pauses between events."""

MESSAGES = [{"role": "user", "content": "stream me a short answer please"}]
EXPECTED_TEXT = "echo: stream me a short answer please"


def openai_client(**headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=FAKE_OPENAI_KEY, base_url="https://api.openai.com/v1", max_retries=0, default_headers=headers
    )


def anthropic_client(**headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=FAKE_ANTHROPIC_KEY, base_url="https://api.anthropic.com", max_retries=0, default_headers=headers
    )


def chat_stream(include_usage: bool = False, **headers: str) -> dict:
    extra = {"stream_options": {"include_usage": True}} if include_usage else {}
    stream = openai_client(**headers).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True, **extra
    )
    text, usage, finish = "", None, None
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
        usage = chunk.usage.model_dump() if chunk.usage else usage
    return {"text": text, "usage": usage, "finish": finish}


def responses_stream() -> dict:
    stream = openai_client().responses.create(model="gpt-4o-mini", input="stream me a short answer please", stream=True)
    text, usage = "", None
    for event in stream:
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.completed":
            usage = event.response.usage.model_dump()
    return {"text": text, "usage": usage}


def anthropic_stream(**headers: str) -> dict:
    with anthropic_client(**headers).messages.stream(
        model="claude-test-model", max_tokens=64, messages=MESSAGES
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {"text": text, "usage": final.usage.model_dump(), "stop_reason": final.stop_reason}


def ollama_stream(**headers: str) -> dict:
    lines = []
    body = {"model": "llama3.2", "messages": MESSAGES}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", "http://ollama.local:11434/api/chat", json=body, headers=headers) as response,
    ):
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.iter_lines() if line]
    last = lines[-1]
    text = "".join(line.get("message", {}).get("content", "") for line in lines)
    return {"text": text, "last": {k: v for k, v in last.items() if k != "message"}}


def raw_stream(url: str, body: dict, via_proxy: bool = True, **headers: str) -> tuple[bytes, list[float]]:
    """The exact bytes a client receives, and when (seconds since the request) each chunk arrived."""
    started, chunks, arrivals = time.monotonic(), [], []
    client = httpx.Client(timeout=30, trust_env=via_proxy)
    with client, client.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw():
            chunks.append(chunk)
            arrivals.append(time.monotonic() - started)
    return b"".join(chunks), arrivals


def cassettes(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.rglob("*.json"))]


def record_then_replay(start_proxy, upstream, client_env, run, **options) -> tuple:
    """Run `run` through a recording proxy, stop the upstream, run it again through a replaying one."""
    recorder = start_proxy(upstream, cassette_mode="record", **options)
    client_env(recorder)
    recorded = run()
    record_report = recorder.stop()
    upstream.stop()
    player = start_proxy(upstream, cassette_mode="replay", **options)
    client_env(player)
    replayed = run()
    return recorded, replayed, record_report, player.stop()


@pytest.mark.parametrize("include_usage", [False, True], ids=["plain", "include_usage"])
def test_openai_chat_stream_replays_same_text_and_usage(start_proxy, upstream, client_env, cassette_dir, include_usage):
    recorded, replayed, record_report, replay_report = record_then_replay(
        start_proxy, upstream, client_env, lambda: chat_stream(include_usage, **{"x-fake-event-gap": "0.02"})
    )
    assert recorded["text"] == EXPECTED_TEXT
    assert recorded["finish"] == "stop"
    assert (recorded["usage"] is not None) == include_usage
    assert replayed == recorded
    assert record_report["counts"]["recorded"] == 1
    assert replay_report["counts"] == {**replay_report["counts"], "hits": 1, "misses": 0, "upstream": 0}
    (cassette,) = cassettes(cassette_dir)
    assert cassette["response"]["body_format"] == "events"
    assert cassette["response"]["body"][-1]["text"] == "data: [DONE]\n\n"
    assert FAKE_OPENAI_KEY not in json.dumps(cassette)


def test_responses_api_stream_replays_same_text_and_usage(start_proxy, https_upstream, client_env, cassette_dir):
    recorded, replayed, _, replay_report = record_then_replay(start_proxy, https_upstream, client_env, responses_stream)
    assert recorded["text"] == EXPECTED_TEXT
    assert recorded["usage"]["output_tokens"] == len(EXPECTED_TEXT.split())
    assert replayed == recorded
    assert replay_report["counts"]["hits"] == 1
    (cassette,) = cassettes(cassette_dir)
    assert cassette["response"]["body"][-1]["text"].startswith("event: response.completed\ndata: {")


def test_anthropic_message_stream_replays_same_text_and_usage(start_proxy, upstream, client_env, cassette_dir):
    recorded, replayed, _, replay_report = record_then_replay(
        start_proxy, upstream, client_env, lambda: anthropic_stream(**{"x-fake-event-gap": "0.02"})
    )
    assert recorded["text"] == EXPECTED_TEXT
    assert recorded["stop_reason"] == "end_turn"
    assert recorded["usage"]["output_tokens"] == len(EXPECTED_TEXT.split())
    assert replayed == recorded
    assert replay_report["counts"]["hits"] == 1
    (cassette,) = cassettes(cassette_dir)
    names = [event["text"].split("\n", 1)[0] for event in cassette["response"]["body"]]
    assert names[0] == "event: message_start" and names[-1] == "event: message_stop"
    assert FAKE_ANTHROPIC_KEY not in json.dumps(cassette)


def test_ollama_ndjson_stream_replays_same_text_and_counts(start_proxy, upstream, client_env, cassette_dir):
    def run():
        return ollama_stream(**{"x-fake-event-gap": "0.02"})

    recorded, replayed, _, replay_report = record_then_replay(
        start_proxy, upstream, client_env, run, cassette_hosts="*"
    )
    assert recorded["text"] == EXPECTED_TEXT
    assert recorded["last"]["done"] is True and recorded["last"]["eval_count"] == len(EXPECTED_TEXT.split())
    assert replayed == recorded
    assert replay_report["counts"]["hits"] == 1
    (cassette,) = cassettes(cassette_dir)
    body = cassette["response"]["body"]
    assert all(event["text"].endswith("}\n") and event["text"].count("\n") == 1 for event in body)


@pytest.mark.parametrize("mode", ["record", "off"])
def test_first_chunk_arrives_long_before_the_upstream_finishes(start_proxy, https_upstream, client_env, mode):
    proxy = start_proxy(https_upstream, cassette_mode=mode)
    client_env(proxy)
    started = time.monotonic()
    stream = openai_client(**{"x-fake-event-gap": "0.25"}).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    )
    first_chunk_at = None
    for _ in stream:
        first_chunk_at = first_chunk_at or time.monotonic() - started
    total = time.monotonic() - started
    # 9 events 0.25 s apart: the upstream takes 2 s or more from the first to the last. Streamed, the first chunk
    # arrives that long before the end; buffered, with the rest at the very end. Measured from the first chunk,
    # not from the start: on a loaded machine the connection alone can take a second.
    assert total - first_chunk_at > 1.0, (first_chunk_at, total)
    counts = proxy.stop()["counts"]
    assert counts["recorded" if mode == "record" else "passthrough"] == 1


def test_openai_sdk_closing_right_after_done_still_saves_the_cassette(
    start_proxy, https_upstream, client_env, cassette_dir
):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    client_env(proxy)
    hold = 3.0
    started = time.monotonic()
    result = chat_stream(**{"x-fake-hold-open": str(hold)})
    elapsed = time.monotonic() - started
    assert elapsed < hold / 2, "the SDK should close the connection right after [DONE], not wait for the end"
    report = proxy.stop()
    assert result["text"] == EXPECTED_TEXT
    assert report["counts"]["recorded"] == 1 and report["errors"] == []
    (cassette,) = cassettes(cassette_dir)
    assert cassette["response"]["body"][-1]["text"] == "data: [DONE]\n\n"


def wait_for_log(proxy, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in proxy.log_text():
        assert time.monotonic() < deadline, f"{text!r} not in the proxy log:\n{proxy.log_text()}"
        time.sleep(0.05)


def test_client_abort_mid_stream_leaves_no_cassette_and_counts_an_error(
    start_proxy, https_upstream, client_env, cassette_dir
):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    client_env(proxy)
    stream = openai_client(**{"x-fake-event-gap": "0.2"}).chat.completions.create(
        model="gpt-4o-mini", messages=MESSAGES, stream=True
    )
    next(iter(stream))
    stream.close()
    wait_for_log(proxy, "cassette not saved")
    report = proxy.stop()
    assert cassettes(cassette_dir) == []
    assert report["counts"]["recorded"] == 0
    assert [error["type"] for error in report["errors"]] == ["stream_incomplete"]


def test_upstream_breaking_off_mid_stream_leaves_no_cassette(start_proxy, upstream, client_env, cassette_dir):
    proxy = start_proxy(upstream, cassette_mode="record")
    client_env(proxy)
    with pytest.raises(openai.APIConnectionError):
        chat_stream(**{"x-fake-break-after": "3"})
    wait_for_log(proxy, "cassette not saved")
    report = proxy.stop()
    assert cassettes(cassette_dir) == []
    assert [error["type"] for error in report["errors"]] == ["stream_incomplete"]


@pytest.mark.parametrize(
    "run, check",
    [
        (lambda: anthropic_stream(**{"x-fake-stream-error": "1"}), "overloaded_error"),
        (lambda: chat_stream(**{"x-fake-stream-error": "1"}), "no [DONE]"),
        (lambda: ollama_stream(**{"x-fake-stream-error": "1"}), "model runner stopped"),
    ],
    ids=["anthropic_error_event", "openai_without_done", "ollama_error_line"],
)
def test_errors_inside_streams_are_recorded_and_replayed_as_they_were(
    start_proxy, https_upstream, client_env, cassette_dir, run, check
):
    def outcome():
        try:
            return run()
        except anthropic.APIStatusError as e:
            return {"raised": type(e).__name__, "body": e.body}

    recorded, replayed, record_report, replay_report = record_then_replay(
        start_proxy, https_upstream, client_env, outcome, cassette_hosts="*"
    )
    assert replayed == recorded
    assert record_report["counts"]["recorded"] == 1 and record_report["errors"] == []
    assert replay_report["counts"]["hits"] == 1
    stored = "".join(event["text"] for event in cassettes(cassette_dir)[0]["response"]["body"])
    if check == "no [DONE]":
        assert "[DONE]" not in stored and recorded["finish"] is None
    else:
        assert check in stored and check in json.dumps(recorded)


def test_crlf_stream_replays_byte_for_byte(start_proxy, https_upstream, client_env, cassette_dir):
    body = {"model": "claude-test-model", "max_tokens": 64, "messages": MESSAGES, "stream": True}

    def run():
        return raw_stream("https://api.anthropic.com/v1/messages", body, **{"x-fake-crlf": "1"})[0]

    recorded, replayed, _, _ = record_then_replay(start_proxy, https_upstream, client_env, run)
    assert b"\r\n\r\n" in recorded and b"\n\n" not in recorded.replace(b"\r\n", b"")
    assert replayed == recorded
    events = cassettes(cassette_dir)[0]["response"]["body"]
    assert events[0]["text"].startswith("event: message_start\r\ndata: {") and events[0]["text"].endswith("}\r\n\r\n")


def test_gzip_asked_by_the_client_is_recorded_as_plain_text(start_proxy, https_upstream, client_env, cassette_dir):
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True}

    def run():
        return raw_stream("https://api.openai.com/v1/chat/completions", body, **{"accept-encoding": "gzip"})[0]

    recorded, replayed, _, _ = record_then_replay(start_proxy, https_upstream, client_env, run)
    assert recorded.startswith(b"data: {") and replayed == recorded
    assert cassettes(cassette_dir)[0]["response"]["body"][0]["text"].startswith("data: {")


def test_recorded_timing_reproduces_the_gaps_between_events(start_proxy, https_upstream, client_env):
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True}
    url = "https://api.openai.com/v1/chat/completions"
    recorder = start_proxy(https_upstream, cassette_mode="record")
    client_env(recorder)
    recorded, recorded_at = raw_stream(url, body, **{"x-fake-event-gap": "0.25"})
    recorder.stop()
    https_upstream.stop()

    def replay(timing: str) -> tuple[bytes, float]:
        player = start_proxy(https_upstream, cassette_mode="replay", cassette_replay_timing=timing)
        client_env(player)
        data, arrivals = raw_stream(url, body, **{"x-fake-event-gap": "0.25"})
        assert player.stop()["counts"]["hits"] == 1
        return data, arrivals[-1] - arrivals[0]

    recorded_span = recorded_at[-1] - recorded_at[0]
    timed, timed_span = replay("recorded")
    fast, fast_span = replay("none")
    double, double_span = replay("2")
    assert timed == fast == double == recorded
    assert 0.8 < timed_span / recorded_span < 1.3, (timed_span, recorded_span)
    assert 0.35 < double_span / recorded_span < 0.65, (double_span, recorded_span)
    assert fast_span / recorded_span < 0.1, (fast_span, recorded_span)


def test_stream_true_and_false_are_different_cassettes(start_proxy, https_upstream, client_env, cassette_dir):
    def run():
        client = openai_client()
        plain = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES).choices[0].message.content
        streamed = chat_stream()["text"]
        return plain, streamed

    recorded, replayed, record_report, replay_report = record_then_replay(start_proxy, https_upstream, client_env, run)
    assert recorded == replayed == (EXPECTED_TEXT, EXPECTED_TEXT)
    assert record_report["counts"]["recorded"] == 2
    assert replay_report["counts"]["hits"] == 2
    formats = sorted(cassette["response"]["body_format"] for cassette in cassettes(cassette_dir))
    assert formats == ["events", "json"]


def test_timed_replay_also_streams_in_reverse_mode(start_proxy, https_upstream, client_env):
    """Reverse mode routes by the request's destination too: the in-proxy timed server must still be reached."""
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, "stream": True}
    recorder = start_proxy(https_upstream, cassette_mode="record")
    client_env(recorder)
    recorded, recorded_at = raw_stream(
        "https://api.openai.com/v1/chat/completions", body, **{"x-fake-event-gap": "0.2"}
    )
    recorder.stop()
    https_upstream.stop()
    mode = "reverse:https://api.openai.com"
    player = start_proxy(https_upstream, modes=[mode], cassette_mode="replay", cassette_replay_timing="recorded")
    url = f"http://127.0.0.1:{player.port(mode)}/v1/chat/completions"
    replayed, replayed_at = raw_stream(url, body, via_proxy=False)
    assert replayed == recorded
    ratio = (replayed_at[-1] - replayed_at[0]) / (recorded_at[-1] - recorded_at[0])
    assert 0.8 < ratio < 1.3, ratio
    assert player.stop()["counts"]["hits"] == 1
