"""Streamed responses (SSE and NDJSON): split into events, recorded live, replayed with their timing.

mitmproxy buffers a response whole unless `flow.response.stream` is set, which
would hand a client its answer only once the model has finished. The recorder
below is that `stream` callable: it passes every chunk through untouched and
keeps a copy cut into events, each with its offset from the start of the
response, so the cassette shows one entry per event and replay can reproduce
the gaps. No mitmproxy import here: everything is testable on its own.
"""

from __future__ import annotations

import asyncio
import http
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from . import eventstream

SSE = "sse"
NDJSON = "ndjson"
EVENTSTREAM = "eventstream"
"""AWS event-stream binary frames (Bedrock): split and stored by eventstream.py."""

_STREAM_TYPES = {
    "text/event-stream": SSE,
    "application/x-ndjson": NDJSON,
    "application/jsonl": NDJSON,
    eventstream.CONTENT_TYPE: EVENTSTREAM,
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
        return eventstream.split_frames(buffer, final)
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
            line = json.loads(last_event)
        except ValueError:
            return False
        return isinstance(line, dict) and (line.get("done") is True or "error" in line)
    name, data = sse_fields(last_event)
    return name in SSE_FINAL_EVENTS or data.strip() == "[DONE]"


@dataclass
class StreamRecorder:
    """The `flow.response.stream` callable: passes chunks through unchanged and keeps them as timed events.

    `on_complete` is called as soon as the stream is known complete: at its
    protocol's last event, before that event is forwarded (so a client that
    closes right after it, then stops the proxy, cannot race the save), or at
    the upstream's end of message; and once more at the end if events came
    after the protocol's last one, so the copy stays byte-faithful.
    """

    kind: str
    started: float
    """When the response began (time.time()), the zero of every event's offset."""
    on_complete: Callable[[StreamRecorder, bool], None] = lambda recorder, first: None
    """Called with the recorder and whether this is the first call."""
    clock: Callable[[], float] = time.time
    ended: bool = False
    """The upstream finished the response (mitmproxy's final empty chunk)."""
    saved_events: int | None = None
    """How many events the last `on_complete` saw; None until the stream is complete."""
    _timed: list[tuple[int, bytes]] = field(default_factory=list)
    _pending: bytes = b""

    def __call__(self, chunk: bytes) -> bytes:
        if chunk:
            self._add(*split_events(self._pending + chunk, self.kind))
        else:
            self.ended = True
            self._add(*split_events(self._pending, self.kind, final=True))
        if self.complete and self.saved_events != len(self._timed):
            first = self.saved_events is None
            self.saved_events = len(self._timed)
            self.on_complete(self, first)
        return chunk

    def _add(self, complete: list[bytes], rest: bytes) -> None:
        ms = max(0, round((self.clock() - self.started) * 1000))
        self._timed.extend((ms, raw) for raw in complete)
        self._pending = rest

    @property
    def complete(self) -> bool:
        """Ended by the upstream, or its protocol's last event has arrived (nothing after it but blank bytes)."""
        if self.ended:
            return True
        if self.kind == EVENTSTREAM:
            return not self._pending and bool(self._timed) and eventstream.ends_stream(self._timed[-1][1])
        if self._pending.strip():
            return False
        last = next((raw for _, raw in reversed(self._timed) if raw.strip()), None)
        return last is not None and ends_protocol(self.kind, last.decode("utf-8", "replace"))

    @property
    def body(self) -> bytes:
        """Everything received, exactly."""
        return b"".join(raw for _, raw in self._timed) + self._pending

    @property
    def body_format(self) -> str:
        """The cassette's `body_format` for `events()`: `events` (text), or `eventstream` (AWS frames)."""
        return "eventstream" if self.kind == EVENTSTREAM else "events"

    def events(self) -> list[dict]:
        """The stored form: [{"ms": offset, "text": exact event text}]; raises UnicodeDecodeError on non-UTF-8.
        AWS frames: eventstream.stored_frame's form."""
        if self.kind == EVENTSTREAM:
            return [eventstream.stored_frame(ms, raw) for ms, raw in self._timed]
        return [{"ms": ms, "text": raw.decode("utf-8")} for ms, raw in self._timed]


def parse_replay_timing(value: str) -> float | None:
    """`none` -> None (as fast as possible), `recorded` -> 1.0, a number -> that speed factor (2 = twice as fast)."""
    value = value.strip().lower()
    if value == "none":
        return None
    if value == "recorded":
        return 1.0
    try:
        speed = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not none, recorded or a speed factor such as 2 or 0.5") from None
    if not 0 < speed < float("inf"):
        raise ValueError(f"{value!r}: a speed factor must be a positive number, such as 2 or 0.5")
    return speed


@dataclass
class TimedStream:
    status: int
    headers: dict[str, str]
    events: list[dict]
    speed: float


async def _read_request_body(reader: asyncio.StreamReader, head: bytes) -> None:
    """Read (and drop) the request body: closing a socket with unread bytes resets it, cutting off the answer."""
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if length:
        await reader.readexactly(int(length.group(1)))
    elif re.search(rb"(?im)^transfer-encoding:.*chunked", head):
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass  # trailers


class TimedReplayServer:
    """A loopback HTTP server inside the proxy that sends a recorded stream with its recorded gaps.

    mitmproxy sends a response that an addon makes in `request()` in one piece;
    only a response coming from a server can be streamed to the client over
    time. So a timed replay routes the flow here (the addon rewrites its
    destination), and this server plays the events back at their offsets.
    Each registered stream is served once, under a path that names it.
    """

    PREFIX = "/__cassette_replay__/"

    def __init__(self) -> None:
        self._streams: dict[str, TimedStream] = {}
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

    def register(self, stream: TimedStream) -> str:
        """The path under which this server will play `stream`."""
        path = f"{self.PREFIX}{next(self._ids)}"
        self._streams[path] = stream
        return path

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode("ascii", "replace")
            await _read_request_body(reader, head)
            stream = self._streams.pop(target, None)
            if stream is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            await self._play(stream, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError, ValueError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()

    async def _play(self, stream: TimedStream, writer: asyncio.StreamWriter) -> None:
        try:
            reason = http.HTTPStatus(stream.status).phrase
        except ValueError:
            reason = ""
        lines = [f"HTTP/1.1 {stream.status} {reason}"]
        lines += [f"{name}: {value}" for name, value in stream.headers.items()]
        lines += ["transfer-encoding: chunked", "connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
        await writer.drain()
        loop = asyncio.get_running_loop()
        start = loop.time()
        for event in stream.events:
            await asyncio.sleep(max(0.0, start + event["ms"] / 1000 / stream.speed - loop.time()))
            data = event["text"].encode("utf-8")
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
