"""AWS event-stream frames: split, stored readable or as bytes, re-encoded exactly, validated; Bedrock paths keyed decoded."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest
from botocore.eventstream import EventStreamBuffer
from cassette_proxy.core.files import aws_eventstream
from cassette_proxy.core.files.cassette_file import decode_body, events_fields, load
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.files.stream_events import EVENTSTREAM, split_events, stream_kind
from cassette_proxy.core.keys.key import RequestFacts, request_key
from cassette_proxy.core.keys.url import canonical_path
from cassette_proxy.core.secrets import redact
from cassette_proxy.proxy.stream_recorder import StreamRecorder

HEADERS = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}


def frame(payload: bytes, headers: dict[str, str] = HEADERS) -> bytes:
    return aws_eventstream.encode_frame(headers, payload)


def parsed(data: bytes) -> list[tuple[dict, bytes]]:
    """What botocore (which checks both CRCs) reads from the bytes."""
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(message.headers, message.payload) for message in buffer]


def test_encoded_frames_are_what_botocore_reads():
    data = frame(b'{"delta":{"text":"hi"}}') + frame(b"{}", {":event-type": "metadata"})
    assert parsed(data) == [(HEADERS, b'{"delta":{"text":"hi"}}'), ({":event-type": "metadata"}, b"{}")]


@pytest.mark.parametrize("cut", [0, 5, 12, 30])
def test_split_keeps_a_partial_frame_for_later(cut):
    first, second = frame(b'{"a":1}'), frame(b'{"b":2}')
    data = first + second[:cut]
    assert split_events(data, EVENTSTREAM) == ([first], second[:cut])
    assert split_events(data, EVENTSTREAM, final=True) == ([first, second[:cut]] if cut else [first], b"")


def test_split_stops_at_a_length_that_cannot_be_a_frame():
    """A bogus length must neither stall the split nor lose the bytes: they become one last piece."""
    junk = struct.pack("!I", 2**31) + b"x" * 20
    assert split_events(frame(b"{}") + junk, EVENTSTREAM) == ([frame(b"{}")], junk)
    assert split_events(junk, EVENTSTREAM, final=True) == ([junk], b"")


def test_a_compact_json_frame_is_stored_readable_and_re_encoded_byte_for_byte():
    raw = frame(b'{"contentBlockIndex":0,"delta":{"text":"caf\xc3\xa9"},"p":"abcd"}')
    stored = aws_eventstream.stored_frame(7, raw)
    assert stored == {
        "ms": 7,
        "headers": HEADERS,
        "payload": {"contentBlockIndex": 0, "delta": {"text": "café"}, "p": "abcd"},
    }
    assert aws_eventstream.frame_bytes(json.loads(json.dumps(stored))) == raw


@pytest.mark.parametrize("payload", ['{"a": 1}', '{"a":"\\u00e9"}', "not json", ""])
def test_a_payload_whose_json_would_not_come_back_exactly_is_stored_as_text(payload):
    raw = frame(payload.encode())
    stored = aws_eventstream.stored_frame(3, raw)
    assert stored == {"ms": 3, "headers": HEADERS, "payload_text": payload}
    assert aws_eventstream.frame_bytes(stored) == raw


@pytest.mark.parametrize(
    "raw",
    [
        frame(b"\xff\xfe binary"),
        frame(b"{}")[:-1] + b"\x00",  # bad message CRC
        struct.pack("!B", 4) + b"abcd",  # truncated
    ],
)
def test_anything_else_is_stored_as_its_bytes(raw):
    stored = aws_eventstream.stored_frame(0, raw)
    assert stored == {"ms": 0, "frame_base64": base64.b64encode(raw).decode()}
    assert aws_eventstream.frame_bytes(stored) == raw


def chunk(inner: bytes) -> bytes:
    """An InvokeModelWithResponseStream frame: the model's event, base64, in `bytes`."""
    payload = json.dumps({"bytes": base64.b64encode(inner).decode(), "p": "abc"}, separators=(",", ":"))
    return frame(payload.encode(), {":event-type": "chunk", ":content-type": "application/json"})


@pytest.mark.parametrize(
    ("inner", "how", "stored"),
    [
        (b'{"type":"content_block_delta","delta":{"text":"hi"}}', "json",
         {"type": "content_block_delta", "delta": {"text": "hi"}}),
        (b'{"type": "message_stop"}', "text", '{"type": "message_stop"}'),
    ],
)  # fmt: skip
def test_a_chunks_base64_bytes_are_stored_decoded_and_encoded_back_exactly(inner, how, stored):
    raw = chunk(inner)
    entry = aws_eventstream.stored_frame(0, raw)
    assert entry["payload"] == {"bytes": stored, "p": "abc"} and entry["payload_bytes"] == how
    assert aws_eventstream.frame_bytes(json.loads(json.dumps(entry))) == raw
    assert aws_eventstream.valid_frames([entry])


def test_bytes_that_are_not_utf8_stay_base64():
    raw = chunk(b"\xff\x00")
    entry = aws_eventstream.stored_frame(0, raw)
    assert "payload_bytes" not in entry and entry["payload"]["bytes"] == base64.b64encode(b"\xff\x00").decode()
    assert aws_eventstream.frame_bytes(entry) == raw


def test_non_string_headers_are_stored_as_bytes():
    header = b"\x05:flag\x00"  # a bool header (type 0)
    prelude = struct.pack("!II", 12 + len(header) + 2 + 4, len(header))
    body = prelude + struct.pack("!I", zlib.crc32(prelude)) + header + b"{}"
    raw = body + struct.pack("!I", zlib.crc32(body))
    assert parsed(raw) == [({":flag": True}, b"{}")]
    assert "frame_base64" in aws_eventstream.stored_frame(0, raw)


@pytest.mark.parametrize(
    "body",
    [
        "frames",
        [{"ms": -1, "frame_base64": ""}],
        [{"ms": True, "frame_base64": ""}],
        [{"ms": 0, "frame_base64": "not base64!"}],
        [{"ms": 0, "frame_base64": "AAAA", "headers": {}}],
        [{"ms": 0, "headers": {":event-type": 5}, "payload": {}}],
        [{"ms": 0, "headers": {"": "x"}, "payload": {}}],
        [{"ms": 0, "headers": {}}],
        [{"ms": 0, "headers": {}, "payload_text": 5}],
        [{"ms": 0, "headers": {}, "payload": {}, "payload_text": ""}],
        [{"ms": 0, "headers": {}, "payload": {"bytes": "x"}, "payload_bytes": "xml"}],
        [{"ms": 0, "headers": {}, "payload": {}, "payload_bytes": "json"}],
        [{"ms": 0, "headers": {}, "payload": {"bytes": 5}, "payload_bytes": "text"}],
        [{"ms": 0, "text": "data: {}\n\n"}],
    ],
)
def test_a_cassette_with_malformed_frames_is_refused(tmp_path, body):
    path = tmp_path / "c.json"
    response = {"status": 200, "headers": {}, "body_format": "eventstream", "body": body}
    path.write_text(json.dumps({"cassette_format": 1, "key": "k", "request": {}, "response": response}))
    with pytest.raises(CassetteError, match="AWS event-stream frames"):
        load(path)


def test_recorder_stores_frames_and_completes_at_converse_streams_last_event():
    metadata = frame(b'{"usage":{}}', {":event-type": "metadata", ":message-type": "event"})
    delta = frame(b'{"delta":{"text":"hi"}}')
    recorder = StreamRecorder(EVENTSTREAM, started=100.0, clock=lambda: 100.25)
    assert stream_kind("application/vnd.amazon.eventstream") == EVENTSTREAM
    recorder(delta[:10])
    recorder(delta[10:] + metadata[:3])
    assert not recorder.complete
    recorder(metadata[3:])
    assert recorder.complete and recorder.body_format == "eventstream"
    stored = events_fields(recorder.events(), recorder.body_format)
    assert [f["headers"][":event-type"] for f in stored["body"]] == ["contentBlockDelta", "metadata"]
    assert stored["body"][0]["ms"] == 250
    assert decode_body(stored["body_format"], stored["body"]) == delta + metadata


def test_an_exception_frame_ends_the_stream():
    error = frame(b'{"message":"throttled"}', {":exception-type": "throttlingException", ":message-type": "exception"})
    recorder = StreamRecorder(EVENTSTREAM, started=0.0)
    recorder(error)
    assert recorder.complete


def test_redaction_changes_payloads_and_replay_still_sends_valid_frames():
    secret = "sk-fake-openai-DO-NOT-STORE-0123456789abcdef"
    readable = aws_eventstream.stored_frame(
        0, frame(json.dumps({"delta": {"text": secret}}, separators=(",", ":")).encode())
    )
    text = aws_eventstream.stored_frame(1, frame(b'{"x": "AKIAFAKEFAKEFAKEFAKE"}'))
    opaque = aws_eventstream.stored_frame(2, frame(b"\xff AKIAFAKEFAKEFAKEFAKE"))
    model_event = aws_eventstream.stored_frame(3, chunk(json.dumps({"text": secret}, separators=(",", ":")).encode()))
    body = [readable, text, opaque, model_event]
    response = {"status": 200, "headers": {}, "body_format": "eventstream", "body": body}
    cleaned = redact.redact({"response": response}, redact.parse_rules([]))["response"]
    assert cleaned["body"][2] == opaque  # bytes stay whole: a rule inside base64 would break the frame
    data = decode_body("eventstream", cleaned["body"])
    payloads = [payload for _, payload in parsed(data)]
    assert json.loads(payloads[0]) == {"delta": {"text": "[REDACTED:openai-key]"}}
    assert payloads[1] == b'{"x": "[REDACTED:aws-access-key-id]"}'
    assert json.loads(base64.b64decode(json.loads(payloads[3])["bytes"])) == {"text": "[REDACTED:openai-key]"}


@pytest.mark.parametrize(
    ("path", "canonical"),
    [
        ("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", "/model/anthropic.claude-3-haiku-20240307-v1:0/converse"),
        ("/model/anthropic.claude-3-haiku-20240307-v1%3a0/converse", "/model/anthropic.claude-3-haiku-20240307-v1:0/converse"),
        ("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2fus.x/converse",
         "/model/arn:aws:bedrock:us-east-1:1:inference-profile%2Fus.x/converse"),
        ("/v1/a%20b%25c%3F%23", "/v1/a%20b%25c%3F%23"),
        ("/v1/caf%c3%a9", "/v1/caf%C3%A9"),
        ("/v1/chat/completions", "/v1/chat/completions"),
    ],
)  # fmt: skip
def test_canonical_path_undoes_only_escapes_that_keep_the_meaning(path, canonical):
    assert canonical_path(path) == canonical
    assert canonical_path(canonical) == canonical


def test_an_encoded_and_a_plain_colon_are_the_same_request():
    def key(path: str) -> str:
        facts = RequestFacts("POST", "https", "bedrock-runtime.us-east-1.amazonaws.com", 443, canonical_path(path),
                             [], {}, b'{"messages":[]}', "application/json")  # fmt: skip
        return request_key(facts)

    assert key("/model/m-v1%3A0/converse") == key("/model/m-v1:0/converse") != key("/model/m-v1%2F0/converse")
