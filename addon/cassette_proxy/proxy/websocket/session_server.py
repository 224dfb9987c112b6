"""The loopback WebSocket server that plays recorded sessions: the handshake, the server's messages, the close.

mitmproxy cannot finish a WebSocket session without a server: an addon can
answer the upgrade with a 101 and inject messages, but when either side
closes, mitmproxy closes a server connection it never opened (it logs a
crash, and the client sees 1006, never a close frame), and an addon has no
way to send a close code. So, as for timed streams (timed_replay.py), the
addon routes a replayed upgrade to this server inside the proxy process
(127.0.0.1, a free port), which the seal lets through and nothing else
listens on. mitmproxy relays its frames to the client as it would an
upstream's, and each client message reaches it to be matched
(core/sessions/session_match.py). Each registered play is served once, under an
unguessable path. A play holds every session recorded for the URL; while
several still match, what the server would send waits for the client's next
message (HOLD_SECONDS), which may tell them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from ...core.files.session_file import Frame
from ...core.output import logger
from ...core.sessions.session_match import (
    ERROR_CLOSE_CODE,
    MISS_CLOSE_CODE,
    Miss,
    SessionChoice,
    close_reason,
    miss_event,
)
from ..loopback_server import LoopbackServer

log = logger(__name__)

HOLD_SECONDS = 0.2
"""While several recorded sessions still match, what the server would send waits this long for the client's
next message, which may tell them apart (an SDK sends its first messages back to back); a client that waits
for an answer gets the first matching session's once it is quiet this long."""


@dataclass
class SessionPlay:
    """The sessions recorded for one upgrade, registered to be played to the next connection on its path."""

    choice: SessionChoice
    """The recorded sessions, by their names relative to the cassette folder; each client message narrows them."""
    shape: str
    """Whose error shape a miss is told in (session_match.OPENAI or GEMINI)."""
    headers: list[tuple[bytes, bytes]]
    """The recorded 101's headers, less the handshake's own."""
    subprotocol: str | None
    speed: float | None
    """cassette_replay_timing: None sends every message at once, else the speed factor of the recorded gaps."""
    on_end: Callable[[SessionPlay, str, dict | None], None]
    """Called once: (the play, "hit" | "miss" | "error", the miss or error's details)."""
    hint: str = ""
    """What a miss tells the client to type to record the session (core/hints.py)."""
    ended: bool = field(default=False)

    @property
    def cassette(self) -> str:
        """The session being played (after a miss: the nearest recording), for messages and the report."""
        return self.choice.cassette

    def end(self, outcome: str, details: dict | None = None) -> None:
        if not self.ended:
            self.ended = True
            self.on_end(self, outcome, details)


@dataclass
class _Batch:
    """Server messages sent in order, paced from `at` (loop time) when recorded offsets are kept."""

    at: float
    base_ms: int
    frames: list[Frame]
    notice: str | None = None
    """A text message sent after the frames (a miss's error event)."""
    close: tuple[int | None, str] | None = None


class SessionServer(LoopbackServer[SessionPlay]):
    PREFIX = "/__cassette_session__/"

    def __init__(self) -> None:
        super().__init__()
        self._connections: set[_Connection] = set()

    def stop(self) -> None:
        """Count what is still open (the proxy stops while a client is connected) and what never connected."""
        for connection in list(self._connections):
            connection.finish()
        for play in self.items.values():
            play.end("error", {"message": "the proxy stopped before mitmproxy connected the client to its session"})
        self.items.clear()
        self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(self, reader, writer)
        self._connections.add(connection)
        try:
            await connection.run()
        finally:
            self._connections.discard(connection)


class _Connection:
    """One client's session: wsproto's server side, a reader loop and a sender that keeps the recorded order."""

    def __init__(self, server: SessionServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.server = server
        self.reader, self.writer = reader, writer
        self.ws = WSConnection(ConnectionType.SERVER)
        self.play: SessionPlay | None = None
        self.queue: asyncio.Queue[_Batch] = asyncio.Queue()
        self.sender: asyncio.Task | None = None
        self.parts: list[bytes] = []
        self.missed = False
        self.done = False
        self.sent = 0
        """Turns whose server messages are queued: 0 none yet, 1 the opening, n + 1 those after client message n."""
        self.arrived: list[float] = []
        """When each turn began (loop time): the handshake, then each matching client message."""
        self.hold: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        try:
            while not self.done:
                data = await self.reader.read(65536)
                self.ws.receive_data(data or None)
                for event in self.ws.events():
                    await self._handle(event)
                if not data:
                    break
        except (ConnectionError, RemoteProtocolError, LocalProtocolError):
            pass  # the client went away, or spoke no WebSocket: nothing more to play
        except Exception as e:  # a bug of ours: the client must see it, never a quiet end
            log.exception("cassette: error while playing a recorded WebSocket session")
            self._fail(f"cassette_error: the session replay failed ({type(e).__name__}: {e})")
        finally:
            self.finish()

    def finish(self) -> None:
        """The session is over for this client: count it (a hit unless it missed or failed), close the socket."""
        self.done = True
        if self.hold is not None:
            self.hold.cancel()
        if self.sender is not None:
            self.sender.cancel()
        if self.play is not None:
            self.play.end("hit")
        self.writer.close()

    def _send(self, event: Event) -> None:
        self.writer.write(self.ws.send(event))

    async def _handle(self, event: Event) -> None:
        if isinstance(event, Request):
            self._accept(event)
        elif isinstance(event, Message):
            self.parts.append(event.data.encode("utf-8") if isinstance(event, TextMessage) else event.data)
            if event.message_finished:
                payload, self.parts = b"".join(self.parts), []
                await self._client_message(payload)
        elif isinstance(event, Ping):
            self._send(event.response())
        elif isinstance(event, CloseConnection):
            if self.ws.state is ConnectionState.REMOTE_CLOSING:
                self._send(event.response())
            self.done = True

    def _accept(self, request: Request) -> None:
        play = self.server.take(request.target)
        if play is None:  # not a path this proxy registered: nothing is served
            self._send(RejectConnection(status_code=404, headers=[(b"content-length", b"0")], has_body=False))
            self.done = True
            return
        self.play = play
        chosen = play.subprotocol if play.subprotocol in request.subprotocols else None
        self._send(AcceptConnection(subprotocol=chosen, extra_headers=play.headers))
        self.sender = asyncio.get_running_loop().create_task(self._send_batches())
        self.arrived.append(asyncio.get_running_loop().time())
        self._release_or_hold()

    def _release_or_hold(self) -> None:
        """Send what the one session left recorded; while several match, wait for the next client message."""
        play = self.play
        assert play is not None, "turns begin once the handshake found the play"
        if self.hold is not None:
            self.hold.cancel()
            self.hold = None
        if play.choice.chosen:
            self._release()
        else:
            self.hold = asyncio.get_running_loop().call_later(HOLD_SECONDS, self._quiet)

    def _quiet(self) -> None:
        """The client sent nothing while several sessions matched: it waits for an answer."""
        if self.play is not None and not self.done:
            self.play.choice.lead_with_an_answer()
        self._release()

    def _release(self) -> None:
        """Queue every turn matched and not yet sent, as the leading session recorded it."""
        if self.hold is not None:
            self.hold.cancel()
            self.hold = None
        play = self.play
        if play is None or self.done:
            return
        choice = play.choice
        while self.sent <= choice.matched:
            ms, frames = choice.turn(self.sent)
            batch = _Batch(self.arrived[self.sent], ms, frames)
            self.sent += 1
            if self.sent > choice.matched:
                self._close_if_finished(batch)
            self.queue.put_nowait(batch)

    def _close_if_finished(self, batch: _Batch) -> None:
        """The recording ended with the server's close after its last messages: so does the replay."""
        play = self.play
        assert play is not None, "a batch is made once the handshake found the play"
        close = play.choice.session.close
        if play.choice.finished and close is not None and close.by == "server":
            batch.close = (close.code, close.reason)

    async def _client_message(self, payload: bytes) -> None:
        """A client message matched (the reader waits for it: messages are answered in their order)."""
        if self.play is None or self.missed:
            return  # after a miss the session is closing: later messages are not compared
        choice = self.play.choice
        if getattr(choice, "reads_files", False):  # a Responses WebSocket turn: its recording is read off the loop
            result = await asyncio.to_thread(choice.answer, payload)
            if self.done:
                return  # the proxy stopped, or the client left, meanwhile: the play is counted already
        else:
            result = choice.answer(payload)
        now = asyncio.get_running_loop().time()
        if isinstance(result, Miss):
            self._release()  # what the nearest session answered to the messages before
            self._miss(result, payload, now)
            return
        self.arrived.append(now)
        self._release_or_hold()

    def _miss(self, miss: Miss, payload: bytes, now: float) -> None:
        self.missed = True
        play = self.play
        assert play is not None, "a message is compared once the handshake found the play"
        message = miss.message(play.cassette, play.hint, play.choice.candidates)
        details = {"cassette": play.cassette, "message_number": miss.number, "differences": miss.differences}
        play.end("miss", {**details, "message": message})
        event = miss_event(play.shape, message, details, _event_id(payload))
        reason = close_reason(f"cassette_miss: client message {miss.number} has no recording in {play.cassette}")
        self.queue.put_nowait(_Batch(now, 0, [], json.dumps(event, ensure_ascii=False), (MISS_CLOSE_CODE, reason)))

    def _fail(self, message: str) -> None:
        if self.play is not None:
            self.play.end("error", {"cassette": self.play.cassette, "message": message})
        if self.ws.state is ConnectionState.OPEN:
            with contextlib.suppress(Exception):
                self._send(CloseConnection(ERROR_CLOSE_CODE, close_reason(message)))

    async def _send_batches(self) -> None:
        loop = asyncio.get_running_loop()
        speed = self.play.speed if self.play is not None else None
        try:
            while True:
                batch = await self.queue.get()
                for frame in batch.frames:
                    if speed is not None:
                        delay = batch.at + (frame.ms - batch.base_ms) / 1000 / speed - loop.time()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    if self.ws.state is not ConnectionState.OPEN:
                        return
                    message = (
                        TextMessage(frame.payload.decode("utf-8")) if frame.is_text else BytesMessage(frame.payload)
                    )
                    self._send(message)
                    await self.writer.drain()
                if batch.notice is not None and self.ws.state is ConnectionState.OPEN:
                    self._send(TextMessage(batch.notice))
                if batch.close is not None and self.ws.state is ConnectionState.OPEN:
                    code, reason = batch.close
                    if code is None or code == CloseReason.NO_STATUS_RCVD:
                        self._send(CloseConnection(CloseReason.NO_STATUS_RCVD))  # a close frame without a code
                    else:
                        self._send(CloseConnection(code, reason))
                    await self.writer.drain()
                    return
        except ConnectionError:
            return
        except Exception as e:  # a bug of ours: closed with 4500, counted, logged
            log.exception("cassette: error while sending a recorded WebSocket session")
            self._fail(f"cassette_error: the session replay failed ({type(e).__name__}: {e})")


def _event_id(payload: bytes) -> object:
    """The client event's own `event_id` (OpenAI Realtime), which its error event names."""
    with contextlib.suppress(ValueError, AttributeError, RecursionError):
        message = json.loads(payload)
        return message.get("event_id") if isinstance(message, dict) else None
    return None
