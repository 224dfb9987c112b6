"""AWS event-stream framing (`application/vnd.amazon.eventstream`): Bedrock's ConverseStream and
InvokeModelWithResponseStream answers.

A stream is a sequence of binary frames:

    total length (u32) | headers length (u32) | prelude CRC (u32, of the first 8 bytes)
    headers (name length u8, name, type u8, value) | payload | message CRC (u32, of everything before it)

Clients check both CRCs, so a replay must send valid frames. A frame is stored
readable when that is exact: its headers (all strings, in order) and its
payload (JSON, re-serialised compactly as AWS sends it) re-encode to the very
bytes received (the base64 `bytes` of an InvokeModelWithResponseStream chunk,
the model's own event, decoded in place); a payload whose JSON text would not
come back byte for byte is kept as text; anything else (other header types, a payload that is not UTF-8, a
truncated frame) is stored as the frame's bytes in base64. Either way the replayed bytes are what was received, or, after
redaction changed a readable payload, a well-formed frame carrying the redacted
payload with fresh CRCs. No mitmproxy import here.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"

PRELUDE = 12
"""Total length, headers length and the prelude's CRC."""
MAX_FRAME = 16 * 1024 * 1024
"""AWS caps a message at 16 MiB; a bigger length means the bytes are not a frame (and must not stall the split)."""
_STRING = 7
_FINAL_EVENT_TYPES = frozenset({"metadata"})
"""ConverseStream's last event; InvokeModelWithResponseStream has none (its stream ends with the response)."""


_WITH_BYTES = frozenset({"ms", "headers", "payload", "payload_bytes"})


class FrameError(ValueError):
    """Bytes that are not a valid event-stream frame."""


def split_frames(buffer: bytes, final: bool = False) -> tuple[list[bytes], bytes]:
    """The complete frames at the start of `buffer` and the bytes left over (with `final`, one last piece)."""
    frames: list[bytes] = []
    start = 0
    while len(buffer) - start >= PRELUDE:
        (total,) = struct.unpack_from("!I", buffer, start)
        if total < PRELUDE + 4 or total > MAX_FRAME:
            break  # not a frame: kept whole below, so the copy stays byte-faithful
        if len(buffer) - start < total:
            break
        frames.append(buffer[start : start + total])
        start += total
    rest = buffer[start:]
    if final and rest:
        return [*frames, rest], b""
    return frames, rest


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers, in the given order, and both CRCs computed."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        encoded += struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", _STRING, len(raw_value)) + raw_value
    total = PRELUDE + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    head = prelude + struct.pack("!I", zlib.crc32(prelude))
    body = head + encoded + payload
    return body + struct.pack("!I", zlib.crc32(body))


def decode_frame(frame: bytes) -> tuple[dict[str, str], bytes]:
    """A frame's string headers and payload; FrameError if it is not a frame with valid CRCs and string headers."""
    if len(frame) < PRELUDE + 4:
        raise FrameError(f"{len(frame)} bytes: shorter than a frame's prelude and CRC")
    total, headers_length, prelude_crc = struct.unpack_from("!III", frame)
    if total != len(frame) or PRELUDE + headers_length + 4 > total:
        raise FrameError(f"lengths {total}/{headers_length} do not fit a {len(frame)}-byte frame")
    if zlib.crc32(frame[:8]) != prelude_crc or zlib.crc32(frame[:-4]) != struct.unpack_from("!I", frame, total - 4)[0]:
        raise FrameError("CRC mismatch")
    headers: dict[str, str] = {}
    at, end = PRELUDE, PRELUDE + headers_length
    try:
        while at < end:
            size = frame[at]
            name = frame[at + 1 : at + 1 + size].decode("utf-8")
            kind = frame[at + 1 + size]
            if kind != _STRING or name in headers:
                raise FrameError(f"header {name!r}: type {kind} or repeated; only distinct strings are stored readable")
            (length,) = struct.unpack_from("!H", frame, at + 2 + size)
            headers[name] = frame[at + 4 + size : at + 4 + size + length].decode("utf-8")
            at += 4 + size + length
    except (IndexError, struct.error, UnicodeDecodeError) as e:
        raise FrameError(f"headers do not parse: {e}") from None
    if at != end:
        raise FrameError("headers overrun their length")
    return headers, frame[end:-4]


def _compact_json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def stored_frame(ms: int, frame: bytes) -> dict[str, Any]:
    """The stored form of one frame: its headers and its payload as parsed JSON (`payload`) when compact JSON
    gives the same bytes back, else as text (`payload_text`); a frame that is not that is kept whole in base64."""
    try:
        headers, payload = decode_frame(frame)
    except FrameError:
        return {"ms": ms, "frame_base64": base64.b64encode(frame).decode("ascii")}
    try:
        value = json.loads(payload)
        if _compact_json(value) == payload:
            return {"ms": ms, "headers": headers, "payload": value, **_decoded_bytes(value)}
    except (ValueError, RecursionError):
        pass
    try:
        return {"ms": ms, "headers": headers, "payload_text": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"ms": ms, "frame_base64": base64.b64encode(frame).decode("ascii")}


def _decoded_bytes(value: Any) -> dict[str, Any]:
    """An InvokeModelWithResponseStream `chunk` carries the model's own event as base64 in `bytes`: decoded in
    place (parsed JSON when compact JSON gives its text back, else text) so reviews, redaction and `cassette scan`
    see it; the entry's `payload_bytes` says how to encode it back. Empty when it would not come back exactly."""
    if not isinstance(value, dict) or not isinstance(value.get("bytes"), str):
        return {}
    try:
        raw = base64.b64decode(value["bytes"], validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return {}
    if base64.b64encode(raw).decode("ascii") != value["bytes"]:
        return {}
    try:
        parsed = json.loads(text)
        if _compact_json(parsed) == raw:
            value["bytes"] = parsed
            return {"payload_bytes": "json"}
    except (ValueError, RecursionError):
        pass
    value["bytes"] = text
    return {"payload_bytes": "text"}


def frame_bytes(entry: dict[str, Any]) -> bytes:
    """The bytes a stored frame stands for (re-encoded, CRCs included, from its readable form)."""
    if "frame_base64" in entry:
        return base64.b64decode(entry["frame_base64"], validate=True)
    if "payload_text" in entry:
        return encode_frame(entry["headers"], entry["payload_text"].encode("utf-8"))
    payload = entry["payload"]
    if "payload_bytes" in entry:
        inner = payload["bytes"] if entry["payload_bytes"] == "text" else _compact_json(payload["bytes"]).decode()
        payload = {**payload, "bytes": base64.b64encode(inner.encode("utf-8")).decode("ascii")}
    return encode_frame(entry["headers"], _compact_json(payload))


def valid_frames(body: Any) -> bool:
    """Whether a cassette's `eventstream` body is a list of well-formed stored frames (cassettes are untrusted)."""
    if not isinstance(body, list):
        return False
    for entry in body:
        if not isinstance(entry, dict):
            return False
        ms = entry.get("ms")
        if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
            return False
        if "frame_base64" in entry:
            try:
                if not isinstance(entry["frame_base64"], str) or set(entry) != {"ms", "frame_base64"}:
                    return False
                base64.b64decode(entry["frame_base64"], validate=True)
            except (binascii.Error, ValueError):
                return False
        else:
            headers = entry.get("headers")
            if set(entry) not in ({"ms", "headers", "payload"}, {"ms", "headers", "payload_text"}, _WITH_BYTES):
                return False
            if "payload_bytes" in entry and not (
                entry["payload_bytes"] in ("json", "text")
                and isinstance(entry["payload"], dict)
                and "bytes" in entry["payload"]
                and (entry["payload_bytes"] == "json" or isinstance(entry["payload"]["bytes"], str))
            ):
                return False
            if not isinstance(headers, dict) or not isinstance(entry.get("payload_text", ""), str):
                return False
            if not all(
                isinstance(v, str) and 0 < len(k.encode()) < 256 and len(v.encode()) < 65536 for k, v in headers.items()
            ):
                return False
    return True


def ends_stream(frame: bytes) -> bool:
    """Whether this frame is its stream's last: ConverseStream's `metadata` event, or an exception."""
    try:
        headers, _ = decode_frame(frame)
    except FrameError:
        return False
    return headers.get(":message-type") == "exception" or headers.get(":event-type") in _FINAL_EVENT_TYPES
