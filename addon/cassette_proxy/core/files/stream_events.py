"""The event format of streamed responses (SSE and NDJSON): the one parser every reader uses.

The recorder cuts a live stream into events with it, the file stores them as
`{"ms", "text"}` entries (`body_format: "events"`), and `show`, `ls`, `diff`,
`scan` and timed replay read them back through it. A second parser of the
same bytes drifted once (review commands saw streams as "no text"): there is
only this one.
"""

from __future__ import annotations

import re
from typing import Any

from . import aws_eventstream, json_depth

SSE = "sse"
NDJSON = "ndjson"

EVENTSTREAM = "eventstream"
"""AWS event-stream binary frames (Bedrock): split and stored by aws_eventstream.py."""

_STREAM_TYPES = {
    "text/event-stream": SSE,
    "application/x-ndjson": NDJSON,
    "application/jsonl": NDJSON,
    aws_eventstream.CONTENT_TYPE: EVENTSTREAM,
}

_LINE_END = rb"(?:\r\n|\r(?!\n)|\n)"
_SSE_EVENT_END = re.compile(_LINE_END + _LINE_END)
"""A blank line ends an SSE event; the spec allows CRLF, LF and CR line ends, mixed."""

SSE_FINAL_EVENTS = frozenset({"message_stop", "response.completed", "response.failed", "response.incomplete", "error"})
"""SSE `event:` names after which a stream is over (Anthropic, OpenAI Responses API, either's error)."""


def stream_kind(content_type: str) -> str | None:
    """SSE or NDJSON for a response that streams events, else None."""
    return _STREAM_TYPES.get(content_type.split(";", 1)[0].strip().lower())


def split_events(buffer: bytes, kind: str, final: bool = False) -> tuple[list[bytes], bytes]:
    """The complete events at the start of `buffer` (each with its terminator) and the bytes left over.

    With `final`, the left-over bytes become one last event too: a stream cut
    mid-event is stored as it was sent, byte for byte.
    """
    if kind == EVENTSTREAM:
        return aws_eventstream.split_frames(buffer, final)
    events: list[bytes] = []
    start = 0
    while True:
        if kind == NDJSON:
            end = buffer.find(b"\n", start) + 1
        else:
            match = _SSE_EVENT_END.search(buffer, start)
            end = match.end() if match else 0
            if end == len(buffer) and buffer.endswith(b"\r") and not final:
                end = 0  # a lone CR may be the first half of a CRLF still on the wire
        if end <= 0:
            break
        events.append(buffer[start:end])
        start = end
    rest = buffer[start:]
    if final and rest:
        return [*events, rest], b""
    return events, rest


def sse_fields(event: str) -> tuple[str | None, str]:
    """The `event:` name and the joined `data:` lines of one SSE event."""
    name, data = None, []
    for line in event.splitlines():
        field_name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field_name == "event":
            name = value
        elif field_name == "data":
            data.append(value)
    return name, "\n".join(data)


def ends_protocol(kind: str, last_event: str) -> bool:
    """Whether this event is its protocol's last one, so a stream closed right after it is complete.

    OpenAI chat ends with `data: [DONE]` (and the Python SDK closes the
    connection as soon as it reads it), Anthropic with `message_stop`, the
    Responses API with `response.completed` (or failed/incomplete), Ollama
    with a line holding `"done": true` or an `error`.
    """
    if kind == NDJSON:
        try:
            line = json_depth.loads(last_event)
        except ValueError:
            return False
        return isinstance(line, dict) and (line.get("done") is True or "error" in line)
    name, data = sse_fields(last_event)
    return name in SSE_FINAL_EVENTS or data.strip() == "[DONE]"


def guess_kind(text: str) -> str:
    """SSE when any line is an SSE field the APIs send (`data:`, `event:`), else NDJSON."""
    return SSE if re.search(r"(?m)^(?:data|event):", text) else NDJSON


def split_text(text: str, kind: str | None = None) -> list[str]:
    """A whole stream body, as text, cut into its events (the recorder's cut: `split_events`)."""
    kind = kind or guess_kind(text)
    events, _ = split_events(text.encode("utf-8", "surrogatepass"), kind, final=True)
    return [event.decode("utf-8", "surrogatepass") for event in events]


NOT_JSON = object()
"""`payload()` of an event that carries no JSON: a comment, `[DONE]`, a blank line."""


def payload(event: str) -> Any:
    """The JSON an event carries: an SSE event's joined `data:` lines, or an NDJSON line; else NOT_JSON."""
    name, data = sse_fields(event)
    if name is None and not data:
        data = event if not re.match(r"\s*(?::|id:|retry:)", event) else ""
    data = data.strip()
    if not data or data == "[DONE]":
        return NOT_JSON
    try:
        return json_depth.loads(data)
    except ValueError:  # TooDeep too: a hostile event is not JSON
        return NOT_JSON


def payloads(events: list[str]) -> list[Any]:
    """The JSON payloads of a stream's events, in order (events without JSON left out)."""
    return [p for p in map(payload, events) if p is not NOT_JSON]


def payload_lines(text: str) -> list[tuple[int, Any]] | None:
    """The JSON payloads of a text holding an SSE or NDJSON stream, each with the line number where its event's
    data starts; None when the text is not such a stream (some event holds neither JSON nor SSE framing)."""
    found = []
    line = 1
    for event in split_text(text):
        value = payload(event)
        if value is not NOT_JSON:
            lines = event.splitlines()
            offset = next((i for i, raw in enumerate(lines) if raw.startswith("data:")), 0)
            found.append((line + offset, value))
        elif event.strip() and not _framing_only(event):
            return None
        line += len(re.findall(r"\r\n|\r|\n", event))
    return found or None


def _framing_only(event: str) -> bool:
    """An event with no JSON that is still stream framing: comments, `[DONE]`, `event:`/`id:`/`retry:` lines."""
    return all(
        not line or line.startswith((":", "event:", "id:", "retry:")) or line.strip() == "data: [DONE]"
        for line in event.splitlines()
    )
