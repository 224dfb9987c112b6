"""The live recorder of a streamed response: passes every chunk through, keeps a copy cut into timed events.

mitmproxy buffers a response whole unless `flow.response.stream` is set, which
would hand a client its answer only once the model has finished. The recorder
is that `stream` callable: it passes every chunk through untouched and keeps a
copy cut into events (by core/files/stream_events.py, the one parser), each with its offset
from the start of the response, so the cassette shows one entry per event and
replay can reproduce the gaps. No mitmproxy import: testable on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..core.files import aws_eventstream
from ..core.files.stream_events import EVENTSTREAM, ends_protocol, split_events
from ..core.sessions.mcp import answered_ids


@dataclass
class StreamRecorder:
    """The `flow.response.stream` callable: passes chunks through unchanged and keeps them as timed events.

    `on_complete` is called as soon as the stream is known complete: at its
    protocol's last event (or an MCP answer's JSON-RPC response), before that event is forwarded (so a client that
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
    awaiting: set[str] | None = None
    """An MCP answer's JSON-RPC request ids (`mcp.id_key`) still without a response: the stream is complete once
    each has one, since the clients stop reading there (core/sessions/mcp.py). None: not an MCP answer."""
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
        if self.awaiting:
            for raw in complete:
                self.awaiting.difference_update(answered_ids(raw.decode("utf-8", "replace")))

    @property
    def complete(self) -> bool:
        """Ended by the upstream, or its protocol's last event has arrived (nothing after it but blank bytes), or
        every MCP request it answers has its response."""
        if self.ended:
            return True
        if self.kind == EVENTSTREAM:
            return not self._pending and bool(self._timed) and aws_eventstream.ends_stream(self._timed[-1][1])
        if self._pending.strip():
            return False
        if self.awaiting is not None and not self.awaiting:
            return True
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
        AWS frames: aws_eventstream.stored_frame's form."""
        if self.kind == EVENTSTREAM:
            return [aws_eventstream.stored_frame(ms, raw) for ms, raw in self._timed]
        return [{"ms": ms, "text": raw.decode("utf-8")} for ms, raw in self._timed]
