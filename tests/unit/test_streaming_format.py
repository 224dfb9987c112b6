"""The streaming module on its own: event splitting, the live recorder, completeness, timing, the timed server."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import decode_body, dumps, events_fields, load, new_cassette
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.files.stream_events import NDJSON, SSE, ends_protocol, split_events, stream_kind
from cassette_proxy.proxy.stream_recorder import StreamRecorder
from cassette_proxy.proxy.timed_replay import TimedReplayServer, TimedStream, parse_replay_timing
from hypothesis import given
from hypothesis import strategies as st

OPENAI = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: {"choices":[]}\n\ndata: [DONE]\n\n'
ANTHROPIC_CRLF = (
    b'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\nevent: message_stop\r\ndata: {}\r\n\r\n'
)
OLLAMA = b'{"message":{"content":"Hi"},"done":false}\n{"done":true,"eval_count":1}\n'


@pytest.mark.parametrize(
    "content_type, kind",
    [
        ("text/event-stream", SSE),
        ("text/event-stream; charset=utf-8", SSE),
        ("Text/Event-Stream", SSE),
        ("application/x-ndjson", NDJSON),
        ("application/json", None),
        ("", None),
    ],
)
def test_stream_kind_from_content_type(content_type, kind):
    assert stream_kind(content_type) == kind


@pytest.mark.parametrize(
    "data, kind, events",
    [
        (
            OPENAI,
            SSE,
            [b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n', b'data: {"choices":[]}\n\n', b"data: [DONE]\n\n"],
        ),
        (
            ANTHROPIC_CRLF,
            SSE,
            [
                b'event: message_start\r\ndata: {"type":"message_start"}\r\n\r\n',
                b"event: message_stop\r\ndata: {}\r\n\r\n",
            ],
        ),
        (b"data: a\r\rdata: b\r\r", SSE, [b"data: a\r\r", b"data: b\r\r"]),
        (b": ping\n\nevent: x\ndata: 1\ndata: 2\n\n", SSE, [b": ping\n\n", b"event: x\ndata: 1\ndata: 2\n\n"]),
        (OLLAMA, NDJSON, [b'{"message":{"content":"Hi"},"done":false}\n', b'{"done":true,"eval_count":1}\n']),
        (b'{"a":1}\r\n{"b":2}\r\n', NDJSON, [b'{"a":1}\r\n', b'{"b":2}\r\n']),
    ],
    ids=["openai_lf", "anthropic_crlf", "cr_only", "comment_and_multiline_data", "ollama", "ndjson_crlf"],
)
def test_split_events_keeps_each_event_with_its_exact_terminator(data, kind, events):
    assert split_events(data, kind, final=True) == (events, b"")


def test_split_events_holds_back_an_unfinished_event_until_the_end():
    assert split_events(b"data: 1\n\ndata: 2\n", SSE) == ([b"data: 1\n\n"], b"data: 2\n")
    assert split_events(b"data: 1\n\ndata: 2\n", SSE, final=True) == ([b"data: 1\n\n", b"data: 2\n"], b"")


def test_a_trailing_cr_waits_for_a_possible_lf():
    """`\\r\\n\\r` then `\\n` in the next chunk is one CRLF CRLF terminator, not a CR CR one."""
    assert split_events(b"data: 1\r\n\r", SSE) == ([], b"data: 1\r\n\r")
    assert split_events(b"data: 1\r\n\r\n", SSE) == ([b"data: 1\r\n\r\n"], b"")


@given(
    stream=st.sampled_from([(OPENAI, SSE), (ANTHROPIC_CRLF, SSE), (OLLAMA, NDJSON), (b"data: cut mid-ev", SSE)]),
    cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=12),
)
def test_recorder_passes_every_chunk_through_and_splits_alike_however_the_stream_is_cut(stream, cuts):
    data, kind = stream
    recorder = StreamRecorder(kind, started=0.0, clock=lambda: 0.0)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert [recorder(chunk) for chunk in chunks] == chunks
    assert recorder(b"") == b""
    texts = [event["text"].encode() for event in recorder.events()]
    assert texts == split_events(data, kind, final=True)[0]
    assert b"".join(texts) == recorder.body == data
    assert recorder.complete


def test_recorder_stamps_each_event_with_its_offset_in_ms():
    now = [10.0]
    recorder = StreamRecorder(SSE, started=10.0, clock=lambda: now[0])
    now[0] = 10.05
    recorder(b"data: 1\n\ndata: ")
    now[0] = 10.3
    recorder(b"2\n\n")
    recorder(b"")
    assert recorder.events() == [{"ms": 50, "text": "data: 1\n\n"}, {"ms": 300, "text": "data: 2\n\n"}]


@pytest.mark.parametrize(
    "kind, received, complete",
    [
        (SSE, OPENAI, True),
        (SSE, OPENAI[: OPENAI.index(b"data: [DONE]")], False),
        (SSE, OPENAI + b"data: ext", False),
        (SSE, ANTHROPIC_CRLF, True),
        (SSE, b"event: message_start\ndata: {}\n\n", False),
        (SSE, b'event: error\ndata: {"type":"error"}\n\n', True),
        (SSE, b"event: response.output_text.delta\ndata: {}\n\nevent: response.completed\ndata: {}\n\n", True),
        (SSE, b"event: response.output_text.delta\ndata: {}\n\n", False),
        (NDJSON, OLLAMA, True),
        (NDJSON, OLLAMA.split(b"\n")[0] + b"\n", False),
        (NDJSON, b'{"error":"model runner stopped"}\n', True),
    ],
    ids=[
        "openai_done",
        "openai_without_done",
        "openai_done_then_partial",
        "anthropic_message_stop",
        "anthropic_started_only",
        "anthropic_error_event",
        "responses_completed",
        "responses_mid_way",
        "ollama_done",
        "ollama_mid_way",
        "ollama_error_line",
    ],
)
def test_a_stream_cut_off_counts_as_complete_only_after_its_protocols_last_event(kind, received, complete):
    recorder = StreamRecorder(kind, started=0.0)
    recorder(received)
    assert recorder.complete is complete


def test_a_stream_the_upstream_ended_is_complete_whatever_its_last_event():
    """An OpenAI stream ending without [DONE] is what the API sent: recorded as it was."""
    recorder = StreamRecorder(SSE, started=0.0)
    recorder(OPENAI[: OPENAI.index(b"data: [DONE]")])
    recorder(b"")
    assert recorder.complete


def test_ends_protocol_reads_data_after_the_optional_space():
    assert ends_protocol(SSE, "data:[DONE]\n\n")
    assert not ends_protocol(SSE, 'data: {"text": "[DONE]"}\n\n')
    assert not ends_protocol(NDJSON, "not json\n")


@pytest.mark.parametrize(
    "value, speed", [("none", None), ("recorded", 1.0), (" Recorded ", 1.0), ("2", 2.0), ("0.5", 0.5)]
)
def test_replay_timing_values(value, speed):
    assert parse_replay_timing(value) == speed


@pytest.mark.parametrize("value", ["fast", "0", "-1", "inf", "nan", ""])
def test_replay_timing_rejects_what_is_not_a_positive_speed(value):
    with pytest.raises(ValueError, match="speed factor"):
        parse_replay_timing(value)


def cassette_with(body_format: str, body) -> dict:
    return new_cassette(
        "0" * 32,
        {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {}},
        {"status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": body_format, "body": body},
        {},
    )


def test_events_body_round_trips_through_the_cassette_file(tmp_path):
    events = [{"ms": 0, "text": "event: a\r\ndata: é\r\n\r\n"}, {"ms": 120, "text": "data: [DONE]\n\n"}]
    path = tmp_path / "c.json"
    write_atomic(path, dumps(cassette_with(**events_fields(events))))
    response = load(path)["response"]
    assert response["body"] == events
    assert (
        decode_body(response["body_format"], response["body"]) == "event: a\r\ndata: é\r\n\r\ndata: [DONE]\n\n".encode()
    )


@pytest.mark.parametrize(
    "body",
    [
        "data: x\n\n",
        [{"text": "data: x\n\n"}],
        [{"ms": -1, "text": "data: x\n\n"}],
        [{"ms": 1.5, "text": "data: x\n\n"}],
        [{"ms": True, "text": "x"}],
        [{"ms": 0, "text": 7}],
    ],
    ids=["not_a_list", "no_ms", "negative_ms", "float_ms", "bool_ms", "text_not_str"],
)
def test_malformed_events_body_is_an_unusable_cassette(tmp_path, body):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cassette_with("events", body)))
    with pytest.raises(CassetteError, match=r"response\.body"):
        load(path)


REQUEST_FRAMINGS = {
    "content_length": b"content-length: 2\r\n\r\n{}",
    "chunked": b"transfer-encoding: chunked\r\n\r\n1\r\n{\r\n1;ext=1\r\n}\r\n0\r\nx-trailer: 1\r\n\r\n",
}


async def fetch(port: int, path: str, framing: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST {path} HTTP/1.1\r\nhost: x\r\n".encode() + REQUEST_FRAMINGS[framing])
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), timeout=10)  # a body left half-read would hang the server
    writer.close()
    return data


@pytest.mark.parametrize("framing", REQUEST_FRAMINGS)
def test_timed_replay_server_plays_a_stream_once_with_its_status_headers_and_chunks(framing):
    events = [{"ms": 0, "text": "data: 1\n\n"}, {"ms": 30, "text": "data: [DONE]\n\n"}]

    async def scenario() -> tuple[bytes, bytes]:
        server = TimedReplayServer()
        await server.start()
        path = server.register(TimedStream(200, {"content-type": "text/event-stream"}, events, speed=1.0))
        return await fetch(server.port, path, framing), await fetch(server.port, path, framing)

    first, second = asyncio.run(scenario())
    head, body = first.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-type: text/event-stream" in head
    assert b"transfer-encoding: chunked" in head
    assert body == b"9\r\ndata: 1\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
    assert second.startswith(b"HTTP/1.1 404")


def test_recorder_reports_completion_at_the_protocols_last_event_and_again_only_for_later_events():
    calls = []
    recorder = StreamRecorder(SSE, started=0.0, on_complete=lambda rec, first: calls.append((len(rec.events()), first)))
    recorder(OPENAI)
    assert calls == [(3, True)], "saved as [DONE] arrives, before the upstream ends the response"
    recorder(b": a comment after [DONE]\n\n")
    assert calls == [(3, True)]
    recorder(b"")
    assert calls == [(3, True), (4, False)], "saved again at the end, with what came after [DONE]"
    recorder(b"")
    assert len(calls) == 2
