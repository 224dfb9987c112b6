"""WebSocket sessions in the addon: a recorded session replayed, a live one recorded, both counted.

The cassette addon keys a WebSocket upgrade like any request and calls this
module from its hooks:
- `replay` (request hook, replay and record modes): a session cassette at the
  request's path is played by the loopback SessionServer; the flow is routed
  there, never upstream. Counted when the session ends: a hit, or a miss with
  the field diff of the first client message the recording does not have.
- `upgraded` (response hook): a forwarded upgrade answered 101 becomes a
  recording; a 101 is never saved as a plain HTTP cassette.
- `ended` (websocket_end hook): a recording whose session closed with a close
  frame is saved; one cut off (no close frame, a server failure code, the
  proxy stopping) is not, and the report says why.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mitmproxy import http
from mitmproxy import version as mitmproxy_version

from .. import __version__
from ..core import redact
from ..core.atomic_write import write_atomic
from ..core.cassette_file import DEFAULT_MAX_SIZE, CassetteError, dumps, load, new_cassette, stored_headers
from ..core.printable import logger
from ..core.report import ErrorEntry, ErrorKind, Miss, Report
from ..core.session_file import (
    SESSION_FORMAT,
    Close,
    Frame,
    Session,
    is_session,
    read_session,
    redact_frames,
    session_object,
    sidecar_name,
    sidecar_of,
    stored_frames,
)
from ..core.session_match import DEFAULT_SESSION_IGNORE, MatchSettings, SessionScript, message_digest, shape_of
from .control_channel import RequestRules
from .record import RecordTarget
from .session_server import SessionPlay, SessionServer
from .state import FlowState

log = logger(__name__)

HANDSHAKE_HEADERS = frozenset({"sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-protocol"})
"""Made anew by the session server for each client: the accept from the client's key, no extensions (frames
are stored decoded), the subprotocol only if the client offers it."""

SERVER_FAILURE_CODES = frozenset({1011, 1012, 1013, 1014})
"""Close codes a server sends when it fails (internal error, restart, try again later, bad gateway): like a 5xx,
such a session is not kept."""


def is_upgrade(request: http.Request) -> bool:
    """A WebSocket opening handshake (RFC 6455): what a session cassette answers."""
    return request.method == "GET" and request.headers.get("upgrade", "").lower() == "websocket"


@dataclass(frozen=True)
class SessionTarget:
    """The session cassette an upgrade request is looked up at."""

    key: str
    path: str
    relative: str
    url: str
    """The request's URL as stored: no credentials."""


@dataclass
class Recording:
    target: RecordTarget
    started: float
    """When the 101 arrived: frames are timed from it."""
    headers: dict[str, str]
    settings: MatchSettings


class Sessions:
    """Driven by the cassette addon from its request, response, websocket_end and done hooks."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.server = SessionServer()
        self.recordings: dict[str, Recording] = {}
        """Forwarded sessions being recorded, by flow id."""
        self.session_ignore: tuple[str, ...] = DEFAULT_SESSION_IGNORE
        self.redact_rules: tuple[redact.Rule, ...] = ()
        self.keyed_with: dict = {}
        self.root: Path | None = None
        self.max_size = DEFAULT_MAX_SIZE
        self.writing = 0
        self._written = threading.Condition()

    def configure(
        self,
        root: Path,
        max_size: int,
        session_ignore: tuple[str, ...],
        keyed_with: dict,
        redact_rules: tuple[redact.Rule, ...],
    ) -> None:
        """The run's options, as options.py parsed them."""
        self.root, self.max_size, self.session_ignore = root, max_size, session_ignore
        self.keyed_with, self.redact_rules = keyed_with, redact_rules

    def settings(self, rules: RequestRules) -> MatchSettings:
        return MatchSettings(tuple(rules.keys.ignore), tuple(rules.keys.values), self.session_ignore)

    # -- replay ------------------------------------------------------------------------------------------------

    async def replay(
        self, flow: http.HTTPFlow, state: FlowState, target: SessionTarget, rules: RequestRules, speed: float | None
    ) -> bool:
        """Play the session recorded at `target.path` to this flow; False when there is none (no file, or a plain
        cassette, such as a recorded 404 to the upgrade, which the HTTP replay answers).
        CassetteError or OSError for a file that cannot be used."""
        found = await asyncio.to_thread(self._read, Path(target.path))
        if found is None:
            return False
        cassette, session = found
        settings = self.settings(rules)
        response = cassette["response"]
        headers = response.get("headers", {})
        subprotocol = headers.get("sec-websocket-protocol")
        play = SessionPlay(
            script=SessionScript(session, settings),
            cassette=target.relative,
            shape=shape_of(cassette["request"].get("url", ""), session.frames),
            headers=[
                (n.encode(), v.encode("utf-8", "surrogateescape"))
                for n, v in headers.items()
                if n not in HANDSHAKE_HEADERS
            ],
            subprotocol=subprotocol.split(",")[0].strip() if subprotocol else None,
            close=session.close,
            speed=speed,
            on_end=lambda play, outcome, details: self._count(target, rules, outcome, details),
        )
        await self.server.start()
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", self.server.port
        request.path = self.server.register(play)
        state.outcome = "session"
        state.session_replay = True
        return True

    @property
    def address(self) -> tuple[str, int]:
        """The session server's address, which the seal lets a replayed flow reach."""
        return ("127.0.0.1", self.server.port)

    def _read(self, path: Path) -> tuple[dict, Session] | None:
        try:
            cassette = load(path, self.root, self.max_size)
        except FileNotFoundError:
            return None
        if not is_session(cassette):
            return None
        return cassette, read_session(path, cassette, self.root, self.max_size)

    def _count(self, target: SessionTarget, rules: RequestRules, outcome: str, details: dict | None) -> None:
        """A played session's end, in the report: a hit, a miss (with its diff) or an error of ours."""
        url, relative = redact.loggable_url(target.url), target.relative
        if outcome == "hit":
            self.report.hit(rules.test, relative)
        elif outcome == "miss":
            assert details is not None, "a miss names its message"
            # The session is its own closest recording: `cassette view --report` shows the message's diff.
            number = details["message_number"]
            closest = [
                {"cassette": relative, "differences": [f"client message {number}: {d}" for d in details["differences"]]}
            ]
            self.report.used_by(rules.test, relative)
            in_test = f" in test {rules.test}" if rules.test else ""
            log.warning(f"cassette miss: WebSocket session {url} ({relative}){in_test}: {details['message']}")
            self.report.missed(
                Miss(
                    key=target.key,
                    method="GET",
                    url=url,
                    cassette=relative,
                    closest=closest,
                    test=rules.test,
                    scope=rules.scope,
                    session=details,
                )
            )
        else:
            self.report.used_by(rules.test, relative)
            rest = dict(details or {})
            message = str(rest.pop("message", "the session could not be played"))
            rest.pop("cassette", None)
            self.report.error(ErrorEntry(ErrorKind.OWN_ERROR, message, cassette=relative, details=rest))
            log.error(f"cassette: WebSocket session {relative}: {message}")

    # -- record ------------------------------------------------------------------------------------------------

    def upgraded(self, flow: http.HTTPFlow, response: http.Response, target: RecordTarget, rules: RequestRules) -> None:
        """A forwarded upgrade answered 101 (`response`): record the session that follows, never the 101 alone."""
        url = redact.loggable_url(target.request["url"])
        if flow.websocket is None:
            message = (
                f"cassette not saved: upstream answered 101 for GET {url}, and mitmproxy does not relay it as a "
                "WebSocket session (is the `websocket` option off?); a 101 alone would replay as nothing"
            )
            self._not_saved(target, ErrorKind.NOT_A_WEBSOCKET, message)
            return
        headers = stored_headers(list(response.headers.items(multi=True)))
        headers = {
            name: value for name, value in headers.items() if name not in HANDSHAKE_HEADERS - {"sec-websocket-protocol"}
        }
        started = response.timestamp_end or time.time()
        self.recordings[flow.id] = Recording(target, started, headers, self.settings(rules))

    async def ended(self, flow: http.HTTPFlow) -> None:
        """The session's close: saved when it closed with a close frame and not by a server failure."""
        recording = self.recordings.pop(flow.id, None)
        if recording is None:
            return
        websocket = flow.websocket
        target = recording.target
        if websocket is None:  # a 101 mitmproxy relayed as a session has its WebSocket data
            return
        url = redact.loggable_url(target.request["url"])
        by = "client" if websocket.closed_by_client else "server"
        code = websocket.close_code
        if code in (None, 1006) or flow.error:
            self._not_saved(
                target,
                ErrorKind.SESSION_INCOMPLETE,
                f"cassette not saved: the WebSocket session {url} was cut off before its close frame (close code {code})",
            )
            return
        if by == "server" and code in SERVER_FAILURE_CODES:
            self._not_saved(
                target,
                ErrorKind.SESSION_INCOMPLETE,
                f"cassette not saved: the upstream ended the WebSocket session {url} with close code {code} (a server failure), like a 5xx",
            )
            return
        frames = [
            Frame(m.from_client, max(0, round((m.timestamp - recording.started) * 1000)), m.is_text, m.content)
            for m in websocket.messages
            if not m.dropped
        ]
        close = Close(by, code, websocket.close_reason or "")
        with self._written:
            self.writing += 1
        await asyncio.get_running_loop().run_in_executor(None, self._write, recording, frames, close)

    def _write(self, recording: Recording, frames: list[Frame], close: Close) -> None:
        target = recording.target
        try:
            stored, sidecar = stored_frames(frames)
            rules = self.redact_rules
            settings = recording.settings
            digested = redact_frames(
                stored,
                [f.payload for f in frames],
                lambda value, where: redact.redacted(value, where, rules),
                lambda payload: message_digest(payload, settings),
            )
            sidecar_file = sidecar_name(target.path.name, sidecar) if sidecar else ""
            session = session_object(
                stored,
                close,
                settings.session_ignore,
                sidecar,
                sidecar_file,
                settings.fingerprint if digested else None,
            )
            response = {"status": 101, "headers": recording.headers}
            recorded_with = {"cassette_proxy": __version__, "mitmproxy": mitmproxy_version.VERSION}
            cassette = new_cassette(target.key, target.request, response, recorded_with, self.keyed_with)
            cassette = {**redact.redact(cassette, rules), "cassette_format": SESSION_FORMAT, "session": session}
            replaced = _sidecar_in_use(target.path)
            if sidecar:
                write_atomic(target.path.parent / sidecar_file, sidecar)
            write_atomic(target.path, dumps(cassette))
            if replaced is not None and replaced.name != sidecar_file:
                replaced.unlink(missing_ok=True)
        except OSError as e:
            message = f"cassette not saved to {target.path}: {e.strerror or e}"
            log.error(message)
            self.report.error(ErrorEntry(ErrorKind.WRITE_FAILED, message, cassette=target.relative))
        else:
            self.report.recorded_cassette(target.test, target.relative, target.existed)
            log.info(
                f"cassette recorded: WebSocket session {redact.loggable_url(target.request['url'])} ({target.relative}, {len(frames)} messages)"
            )
        finally:
            with self._written:
                self.writing -= 1
                self._written.notify_all()

    def failed(self, flow: http.HTTPFlow, error: Exception) -> None:
        """A bug of ours while saving a session: nothing saved, and the report and the log say so."""
        recording = self.recordings.pop(flow.id, None)
        message = (
            f"cassette_error: the cassette addon failed in its websocket_end hook ({type(error).__name__}: {error})"
        )
        log.error(message, exc_info=True)
        cassette = recording.target.relative if recording else None
        self.report.error(ErrorEntry(ErrorKind.OWN_ERROR, message, cassette, hook="websocket_end"))

    def _not_saved(self, target: RecordTarget, kind: ErrorKind, message: str) -> None:
        url = redact.loggable_url(target.request["url"])
        self.report.error(ErrorEntry(kind, message, target.relative, url, reason=kind.value))
        log.warning(message)

    def done(self) -> None:
        """At shutdown: sessions still being recorded are cut off; sessions still playing are counted."""
        for flow_id in list(self.recordings):
            recording = self.recordings.pop(flow_id)
            url = redact.loggable_url(recording.target.request["url"])
            self._not_saved(
                recording.target,
                ErrorKind.SESSION_INCOMPLETE,
                f"cassette not saved: the proxy stopped while the WebSocket session {url} was open",
            )
        self.server.stop()
        with self._written:
            self._written.wait_for(lambda: self.writing == 0, timeout=30)


def _sidecar_in_use(path: Path) -> Path | None:
    """The sidecar the session cassette at `path` names now: a re-recording leaves it unused."""
    try:
        return sidecar_of(path, load(path))
    except (OSError, CassetteError):
        return None
