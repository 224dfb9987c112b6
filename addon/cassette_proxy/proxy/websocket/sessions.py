"""WebSocket sessions in the addon: a recorded session replayed, a live one recorded, both counted.

The cassette addon keys a WebSocket upgrade like any request and calls this
module from its hooks:
- `replay` (request hook): the sessions recorded for the upgrade's key
  (`<key>.json` and `<key>.*.json`: several conversations may share a URL)
  are played by the loopback SessionServer, each client message narrowing
  them to those it matches; the flow is routed there, never upstream. Counted
  when the session ends: a hit, or a miss with the field diff of the nearest
  recording. In record mode a session runs live instead: whether it is a new
  conversation is known only at the message where it differs, too late to go
  live exactly.
  A Responses WebSocket connection (`/responses`) with no whole-session
  recording is played turn by turn instead: each `response.create` from its
  own turn's cassette (core/sessions/session_turns.py).
- `upgraded` (response hook): a forwarded upgrade answered 101 becomes a
  recording; a 101 is never saved as a plain HTTP cassette.
- `message` (websocket_message hook): record mode on a Responses WebSocket
  connection answers each `response.create` that has a recording from it (the
  message dropped, the recorded events injected to the client, a hit) and lets
  the others go live; a live turn continuing a replayed response is a miss,
  never sent.
- `ended` (websocket_end hook): a recording whose session closed with a close
  frame is saved beside the conversations already recorded for its key (the
  one with the same client messages is kept in record mode, replaced in
  update mode); one cut off (no close frame, a server failure code, the proxy
  stopping) is not, and the report says why. A Responses WebSocket
  connection is saved turn by turn: each complete turn without a recording.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mitmproxy import ctx, http

from ...core import hints
from ...core.files.cassette_file import load, stored_headers
from ...core.files.location import repeat_path
from ...core.files.safe_read import DEFAULT_MAX_SIZE, CassetteError
from ...core.files.session_file import (
    SESSION_FORMAT,
    Close,
    Frame,
    Session,
    is_session,
    read_session,
    redact_frames,
    session_files,
    session_object,
    sidecar_name,
    sidecar_of,
    stored_frames,
)
from ...core.keys.recipe import Recipe
from ...core.output import logger
from ...core.reading.miss import closest, miss_body
from ...core.report import ErrorEntry, ErrorKind, Miss, Report
from ...core.secrets import redact
from ...core.sessions.session_match import (
    DEFAULT_SESSION_IGNORE,
    RESPONSES,
    MatchSettings,
    SessionChoice,
    SessionScript,
    message_digest,
    miss_event,
    same_conversation,
    shape_of,
)
from ...core.sessions.session_turns import (
    TurnChoice,
    Turns,
    create_body,
    is_responses_socket,
    keyed_body,
    response_id_of,
    split_turns,
    turn_frames,
    turn_key,
    twin_request,
)
from ..answers import own_error_text
from ..control_channel import RequestRules
from ..record import RecordTarget
from ..state import FlowState, Outcome
from ..writer import Writer
from . import ws_drop
from .session_server import SessionPlay, SessionServer

log = logger(__name__)

HANDSHAKE_HEADERS = frozenset({"sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-protocol"})
"""Made anew by the session server for each client: the accept from the client's key, no extensions (frames
are stored decoded), the subprotocol only if the client offers it."""

MAX_SESSIONS_PER_URL = 10_000
"""Session files one upgrade key may number (`<key>.<n>.json`): far above a suite's conversations to one URL."""

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
    request: dict = dataclasses.field(default_factory=dict)
    """The upgrade request as stored (its key headers, no credentials): a Responses WebSocket turn's twin has them."""


class Played(enum.Enum):
    """What `Sessions.replay` did with an upgrade."""

    PLAYED = "played"
    """Routed to the session server, which plays the recorded sessions."""
    LIVE = "live"
    """Sessions are recorded for it, and record mode runs it live: forwarded, and saved if it is new."""
    NONE = "none"
    """No session recorded for it (there may be a plain cassette, such as a recorded 404 to the upgrade)."""


@dataclass
class Recording:
    target: RecordTarget
    started: float
    """When the 101 arrived: frames are timed from it."""
    headers: dict[str, str]
    settings: MatchSettings
    replaces: bool
    """Update mode: a recorded session with the same client messages is replaced; record mode keeps it."""
    rules: RequestRules | None = None
    """The rules the upgrade was keyed under: a Responses WebSocket connection's turns are keyed with them."""
    turns: LiveTurns | None = None
    """Record mode on a Responses WebSocket connection: its turns, each replayed or sent live (`message`)."""


@dataclass
class LiveTurns:
    """A Responses WebSocket connection in record mode, turn by turn: a `response.create` with a recording is
    answered from it (the client's message dropped, the recorded events injected), one without goes live."""

    count: int = 0
    """The connection's `response.create` messages so far."""
    live: list[int] = dataclasses.field(default_factory=list)
    """The numbers of the turns sent live, in order: the ones saved at the close."""
    replayed: int = 0
    missed: int | None = None
    """The turn that missed: nothing of the connection is sent live after it."""
    other: bool = False
    """A client message that is not a `response.create` went live."""
    pending: str | None = None
    """The key of the last turn sent live, until its answer names its response id."""


class Sessions:
    """Driven by the cassette addon from its request, response, websocket_end and done hooks."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        """The one writer (writer.py), shared with HTTP recordings: a run's end waits for sessions' writes too."""
        self.report: Report = writer.report
        self.server = SessionServer()
        self.recordings: dict[str, Recording] = {}
        """Forwarded sessions being recorded, by flow id."""
        self.session_ignore: tuple[str, ...] = DEFAULT_SESSION_IGNORE
        self.root: Path | None = None
        self.max_size = DEFAULT_MAX_SIZE
        self.started_by = hints.DEFAULT_STARTER
        self._placing = threading.Lock()
        """Held from choosing a session's file to writing it: two sessions of one URL ending together get two."""
        self.recipe: Recipe | None = None
        self.given: dict[str, str] = {}
        """Responses WebSocket turns: the response ids this run's answers gave (live or replayed) -> their turn's
        key, so a turn continuing one (`previous_response_id`) is keyed by the turn it continues."""
        self.replayed: set[str] = set()
        """The response ids record mode answered from recordings: ids the provider never made on this run, which a
        live turn must not continue."""

    def configure(
        self,
        root: Path,
        max_size: int,
        session_ignore: tuple[str, ...],
        started_by: str = hints.DEFAULT_STARTER,
        recipe: Recipe | None = None,
    ) -> None:
        """The run's options, as options.py parsed them (the writer has the redaction rules and `keyed_with`)."""
        self.root, self.max_size, self.session_ignore = root, max_size, session_ignore
        self.recipe = recipe
        self.started_by = started_by

    @property
    def redact_rules(self) -> tuple[redact.Rule, ...]:
        """The run's redaction rules: the writer's, one set for every recording."""
        return self.writer.redact_rules

    def settings(self, rules: RequestRules) -> MatchSettings:
        return rules.recipe.match_settings(self.session_ignore)

    # -- replay ------------------------------------------------------------------------------------------------

    async def replay(
        self,
        flow: http.HTTPFlow,
        state: FlowState,
        target: SessionTarget,
        rules: RequestRules,
        speed: float | None,
        live: bool = False,
    ) -> Played:
        """Play the sessions recorded for `target` (at `target.path` and beside it) to this flow; with `live`
        (record mode) leave a flow that has some to be forwarded. CassetteError or OSError for a file that
        cannot be used: a broken recording is refused, never skipped."""
        found = await asyncio.to_thread(self._read_all, Path(target.path), target.relative)
        if not found and is_responses_socket(target.url):
            if live or await asyncio.to_thread(os.path.exists, target.path):
                return Played.NONE  # record mode: forwarded, each new turn saved (`ended`); or a plain answer
            return await self._replay_turns(flow, state, target, rules, speed)
        if not found:
            return Played.NONE
        if live:
            return Played.LIVE
        settings = self.settings(rules)
        choice = SessionChoice([(relative, SessionScript(session, settings)) for relative, _, session in found])
        _, cassette, session = found[0]
        response = cassette["response"]
        headers = response.get("headers", {})
        subprotocol = headers.get("sec-websocket-protocol")
        play = SessionPlay(
            choice=choice,
            shape=shape_of(cassette["request"].get("url", ""), session.frames),
            headers=[
                (n.encode(), v.encode("utf-8", "surrogateescape"))
                for n, v in headers.items()
                if n not in HANDSHAKE_HEADERS
            ],
            subprotocol=subprotocol.split(",")[0].strip() if subprotocol else None,
            speed=speed,
            on_end=lambda play, outcome, details: self._count(target, play.cassette, rules, outcome, details),
            hint=hints.record_session(self.started_by),
        )
        return await self._route_to_server(flow, state, play)

    async def _route_to_server(self, flow: http.HTTPFlow, state: FlowState, play: SessionPlay) -> Played:
        """The upgrade goes to the session server, which plays `play` to it once, under a path of its own."""
        await self.server.start()
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", self.server.port
        request.path = self.server.register(play)
        state.outcome = Outcome.SESSION
        return Played.PLAYED

    async def _replay_turns(
        self, flow: http.HTTPFlow, state: FlowState, target: SessionTarget, rules: RequestRules, speed: float | None
    ) -> Played:
        """A Responses WebSocket connection with no whole-session recording: each `response.create` answered from
        its turn's recording (core/sessions/session_turns.py), wherever it was recorded."""
        folder = Path(target.path).parent
        prefix = target.relative.rpartition("/")[0]
        relative_of = lambda name: f"{prefix}/{name}" if prefix else name  # noqa: E731
        missed_turn: dict = {}

        def lookup(key: str) -> tuple[str, Session] | None:
            return self._turn(folder, target.relative, key)

        def missed(key: str, request: dict, number: int) -> tuple[str, str, list[str]]:
            stored = {**request, "body": redact.redacted(request["body"], ("request", "body"), self.redact_rules)}
            nearest = closest(folder, self.root, stored, self.recipe) if self.root and self.recipe else []
            relative = relative_of(f"{key}.json")
            url = redact.loggable_url(request["url"])
            body = miss_body(key, "POST", url, relative, rules.mode, nearest, rules.scope, rules.test, self.started_by)
            text = f"cassette_miss: turn {number} (response.create) of this Responses WebSocket connection: " + body[
                "error"
            ]["message"].removeprefix("cassette miss: ")
            missed_turn.update(key=key, url=url, relative=relative, closest=nearest, body=stored["body"])
            cassette = nearest[0]["cassette"] if nearest else relative
            return cassette, text, list(nearest[0]["differences"]) if nearest else []

        choice = TurnChoice(target.request or {"url": target.url}, rules.recipe, lookup, missed, self.given)
        play = SessionPlay(
            choice=choice,  # type: ignore[arg-type]  # the same interface, turn by turn
            shape=RESPONSES,
            headers=[],
            subprotocol=None,
            speed=speed,
            on_end=lambda play, outcome, details: self._count_turns(choice, missed_turn, rules, outcome, details),
            hint=hints.record(self.started_by),
        )
        return await self._route_to_server(flow, state, play)

    def _count_turns(
        self, choice: TurnChoice, missed_turn: dict, rules: RequestRules, outcome: str, details: dict | None
    ) -> None:
        """Each turn answered is a hit of its recording; a missed turn a miss with the nearest turn's diff."""
        for relative in choice.played:
            self.report.hit(rules.test, relative)
        if outcome == "miss" and missed_turn:
            assert details is not None, "a miss names its message"
            log.warning(f"cassette miss: Responses WebSocket turn {missed_turn['url']}: {details['message']}")
            self.report.missed(
                Miss(
                    key=missed_turn["key"],
                    method="POST",
                    url=missed_turn["url"],
                    cassette=missed_turn["relative"],
                    closest=missed_turn["closest"],
                    test=rules.test,
                    scope=rules.scope,
                    body=missed_turn["body"],
                    session=details,
                )
            )
        elif outcome == "miss":
            assert details is not None, "a miss names its message"
            log.warning(f"cassette miss: Responses WebSocket connection: {details['message']}")
            self.report.missed(
                Miss(
                    key="",
                    method="GET",
                    url="",
                    cassette="",
                    closest=[],
                    test=rules.test,
                    scope=rules.scope,
                    session=details,
                )
            )
        elif outcome != "hit":
            message = str((details or {}).get("message", "the connection could not be played"))
            self.report.error(ErrorEntry(ErrorKind.OWN_ERROR, message, cassette=choice.cassette or None))
            log.error(f"cassette: Responses WebSocket connection: {message}")

    def _turn(self, folder: Path, relative: str, key: str) -> tuple[str, Session] | None:
        """The recording of the Responses WebSocket turn keyed `key` in `folder` (the upgrade's, whose cassette is
        at `relative`): (its name relative to the cassette folder, its session), or None. It reads the file: called
        in a worker thread. CassetteError for a file there that is no turn's recording."""
        file = folder / f"{key}.json"
        try:
            cassette = load(file, self.root, self.max_size)
        except FileNotFoundError:
            return None
        if not is_session(cassette) or "turn" not in cassette:
            raise CassetteError(file, "it is not the recording of a Responses WebSocket turn")
        prefix = relative.rpartition("/")[0]
        return f"{prefix}/{file.name}" if prefix else file.name, read_session(file, cassette, self.root, self.max_size)

    @property
    def address(self) -> tuple[str, int]:
        """The session server's address, which the seal lets a replayed flow reach."""
        return ("127.0.0.1", self.server.port)

    def _read_all(self, path: Path, relative: str) -> list[tuple[str, dict, Session]]:
        """(name relative to the cassette folder, cassette, session) of every session recorded for the upgrade
        whose cassette is `path`; plain cassettes beside them are left to the HTTP replay."""
        folder = relative.rpartition("/")[0]
        found = []
        for file in session_files(path):
            try:
                cassette = load(file, self.root, self.max_size)
            except FileNotFoundError:  # removed since the folder was listed
                continue
            if is_session(cassette):
                name = f"{folder}/{file.name}" if folder else file.name
                found.append((name, cassette, read_session(file, cassette, self.root, self.max_size)))
        return found

    def _count(
        self, target: SessionTarget, relative: str, rules: RequestRules, outcome: str, details: dict | None
    ) -> None:
        """A played session's end, in the report: a hit, a miss (with its diff) or an error of ours, for the
        recording that was played (after a miss: the nearest)."""
        url = redact.loggable_url(target.url)
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
        replaces = rules.mode == "update"
        turns = LiveTurns() if rules.mode == "record" and is_responses_socket(target.request["url"]) else None
        self.recordings[flow.id] = Recording(target, started, headers, self.settings(rules), replaces, rules, turns)

    def inject(self, flow: http.HTTPFlow, payload: bytes, is_text: bool) -> None:
        """Send `payload` to the client of the forwarded session `flow` as if its upstream had (mitmproxy 11 and 12:
        the message is queued behind the one whose hook is running)."""
        ctx.master.commands.call("inject.websocket", flow, True, payload, is_text)

    async def message(self, flow: http.HTTPFlow) -> None:
        """A message of a forwarded session (websocket_message hook). Record mode on a Responses WebSocket
        connection: a `response.create` whose turn is recorded is answered from its recording and never reaches
        the upstream (a hit); one that is not goes live, to be saved at the close; one continuing a response a
        recording answered (`previous_response_id`) is a miss, never sent: the provider never made that id."""
        recording = self.recordings.get(flow.id)
        if recording is None or recording.turns is None or flow.websocket is None:
            return
        live, message = recording.turns, flow.websocket.messages[-1]
        if message.injected:
            return
        if not message.from_client:
            pending = live.pending if b"response.created" in message.content else None
            if pending is not None and (response_id := response_id_of([Frame(False, 0, True, message.content)])):
                self.given[response_id], live.pending = pending, None  # a later turn continuing it is keyed by it
            return
        if live.missed is not None:  # the connection missed: the rest of it is neither sent nor answered
            message.drop()
            text = (
                f"cassette_miss: this Responses WebSocket connection missed at turn {live.missed}: nothing after it "
                "is sent live or replayed."
            )
            self._tell(flow, text, {"message_number": live.missed})
            return
        body = create_body(message.content)
        if body is None:
            live.other = True
            return
        live.count += 1
        number = live.count
        target, rules = recording.target, recording.rules
        assert rules is not None, "a recording of turns keeps the upgrade's rules"
        previous = body.get("previous_response_id")
        request = twin_request(target.request, keyed_body(body, self.given))
        key = turn_key(request, rules.recipe)
        if isinstance(previous, str) and previous in self.replayed:
            message.drop()
            self._continuation_missed(flow, recording, key, request, number, previous)
            return
        try:
            found = await asyncio.to_thread(self._turn, target.path.parent, target.relative, key)
        except (OSError, CassetteError) as e:
            message.drop()
            live.missed = number
            problem = str(e) if not isinstance(e, OSError) or not e.strerror else f"{e.filename}: {e.strerror}"
            text = f"cassette unusable: {problem}. Fix or delete the file, then run again."
            self.report.error(ErrorEntry(ErrorKind.INVALID, problem, cassette=f"{target.path.parent}/{key}.json"))
            log.error(text)
            self._tell(flow, text, {"message_number": number})
            return
        if found is None:
            live.live.append(number)
            live.pending = key
            return
        message.drop()
        relative, session = found
        answer = [frame for frame in session.frames[1:] if not frame.from_client]
        if (response_id := response_id_of(answer)) is not None:
            self.given[response_id] = key
            self.replayed.add(response_id)
        for frame in answer:
            self.inject(flow, frame.payload, frame.is_text)
        live.replayed += 1
        self.report.hit(target.test, relative)
        log.info(f"cassette hit: Responses WebSocket turn {number} of {redact.loggable_url(target.request['url'])} "
                 f"({relative}), not sent upstream")  # fmt: skip

    def _tell(self, flow: http.HTTPFlow, text: str, details: dict) -> None:
        """The client is told `text` in the Responses WebSocket mode's error event, as replay's miss tells it."""
        event = miss_event(RESPONSES, text, {"cassette": "", "differences": [], **details})
        self.inject(flow, json.dumps(event, ensure_ascii=False).encode("utf-8"), True)

    def _continuation_missed(
        self, flow: http.HTTPFlow, recording: Recording, key: str, request: dict, number: int, previous: str
    ) -> None:
        """A turn continuing a response a recording answered: a miss, told to the client and counted."""
        assert recording.turns is not None and recording.rules is not None, "a recording of turns"
        recording.turns.missed = number
        target, rules = recording.target, recording.rules
        turn = self.given.get(previous, "")
        prefix = target.relative.rpartition("/")[0]
        relative = f"{prefix}/{key}.json" if prefix else f"{key}.json"
        continued = f"{prefix}/{turn}.json" if prefix and turn else f"{turn}.json" if turn else "a recording"
        url = redact.loggable_url(target.request["url"])
        text = (
            f"cassette_miss: turn {number} (response.create) of this Responses WebSocket connection has no recording "
            f"and continues response {previous}, which was replayed from {continued}: sent live, it would ask the "
            "provider to continue a response it never made, so it was not sent. "
            + hints.update_session(self.started_by)
        )
        details = {"cassette": relative, "message_number": number, "differences": [], "message": text}
        body = redact.redacted(request["body"], ("request", "body"), self.redact_rules)
        log.warning(f"cassette miss: Responses WebSocket turn {url}: {text}")
        self.report.missed(
            Miss(key=key, method="POST", url=url, cassette=relative, closest=[], test=rules.test, scope=rules.scope,
                 body=body, session=details)
        )  # fmt: skip
        self._tell(flow, text, {"cassette": relative, "message_number": number})

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
        live = recording.turns
        if live is not None and not live.live and not live.other and (live.replayed or live.missed is not None):
            return  # every turn answered from its recording (or missed): nothing went live, nothing to save
        by = "client" if websocket.closed_by_client else "server"
        code = websocket.close_code
        if code in (None, 1006) or flow.error:
            # ws_drop.py relays the drop as a drop; without it mitmproxy closes the other side with 1000 (1006
            # cannot be sent) before any hook runs: the message says what that side was told.
            other = "client" if by == "server" else "upstream"
            told = (
                f"the {other}'s connection was dropped too, without a close frame"
                if ws_drop.installed()
                else f"the {other} was closed with code 1000 by mitmproxy, which does not mean it was recorded"
            )
            self._not_saved(
                target,
                ErrorKind.SESSION_INCOMPLETE,
                f"cassette not saved: the WebSocket session {url} was cut off before its close frame (close code "
                f"{code}: the {'upstream' if by == 'server' else 'client'} dropped the connection; {told})",
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
            if not m.dropped and not m.injected  # what the upstream sent and was sent: replayed turns are not
        ]
        close = Close(by, code, websocket.close_reason or "")
        turns = split_turns(frames) if is_responses_socket(target.request["url"]) else None
        if live is not None and (live.replayed or live.missed is not None):
            if turns is None or turns.opening or live.other:
                self._not_saved(
                    target,
                    ErrorKind.SESSION_INCOMPLETE,
                    f"cassette not saved: the Responses WebSocket connection {url} had turns replayed and sent "
                    "messages that are not a response.create live: its live part is no whole session",
                )
                return
            for turn, number in zip(turns.turns, live.live, strict=False):
                turn.number = number
        if turns is not None and turns.turns and not turns.opening:
            await self.writer.submit(lambda: self._write_turns(recording, turns))
            return
        await self.writer.submit(lambda: self._write(recording, frames, close))

    def _write_turns(self, recording: Recording, turns: Turns) -> None:
        """A Responses WebSocket connection saved turn by turn: each complete turn without a recording gets one
        (record mode keeps a recorded turn, update mode replaces it), at its key in the upgrade's folder."""
        target = recording.target
        recipe = recording.rules.recipe if recording.rules is not None else (self.recipe or Recipe())
        url = redact.loggable_url(target.request["url"])
        for turn in turns.turns:
            request = twin_request(target.request, keyed_body(turn.body, self.given))
            key = turn_key(request, recipe)
            if not turn.complete:
                self._not_saved(
                    target,
                    ErrorKind.SESSION_INCOMPLETE,
                    f"cassette not saved: turn {turn.number} of the Responses WebSocket connection {url} ended "
                    "before its response.completed (or response.failed, error)",
                )
                continue
            if (response_id := response_id_of(turn.answer)) is not None:
                self.given[response_id] = key
            path = target.path.parent / f"{key}.json"
            turn_target = _retarget(dataclasses.replace(target, key=key, request=request), path, path.exists())
            if turn_target.existed and not recording.replaces:
                self.report.used_by(target.test, turn_target.relative)
                log.info(f"cassette kept: Responses WebSocket turn {turn.number} of {url} ({turn_target.relative})")
                continue
            try:
                self._save_turn(recording, turn_target, turn.number, list(turn_frames(turn)))
            except OSError as e:
                self.writer.write_failed(turn_target.path, turn_target.relative, e)
                continue
            self.report.recorded_cassette(target.test, turn_target.relative, turn_target.existed)
            log.info(f"cassette recorded: Responses WebSocket turn {turn.number} of {url} ({turn_target.relative})")

    def _save_turn(self, recording: Recording, target: RecordTarget, number: int, frames: list[Frame]) -> None:
        data, sidecar, sidecar_file = self._cassette(recording, target, frames, None, turn=number)
        replaced = _sidecar_in_use(target.path) if target.existed else None
        if sidecar:
            self.writer.write(target.path.parent / sidecar_file, sidecar)
        self.writer.write(target.path, data)
        if replaced is not None and replaced.name != sidecar_file:
            replaced.unlink(missing_ok=True)

    def _write(self, recording: Recording, frames: list[Frame], close: Close) -> None:
        target = recording.target
        kept = False
        try:
            with self._placing:
                target, exclusive, kept = self._place(recording, frames)
                if not kept:
                    target = self._save(recording, target, exclusive, frames, close)
        except OSError as e:
            self.writer.write_failed(target.path, target.relative, e)
            return
        url = redact.loggable_url(target.request["url"])
        if kept:
            self.report.used_by(target.test, target.relative)
            log.info(f"cassette kept: WebSocket session {url} has the client messages of {target.relative}")
        else:
            self.report.recorded_cassette(target.test, target.relative, target.existed)
            log.info(f"cassette recorded: WebSocket session {url} ({target.relative}, {len(frames)} messages)")

    def _place(self, recording: Recording, frames: list[Frame]) -> tuple[RecordTarget, bool, bool]:
        """Where the session is saved among those recorded for its URL: (the target; True when the name must be
        free, a later number taken if another proxy sharing the folder takes it first; True when record mode keeps
        a session recorded with the same client messages, which the target then names)."""
        target = recording.target
        messages = [frame.payload for frame in frames if frame.from_client]
        files = session_files(target.path)
        first_plain = False
        for file in files:
            try:
                cassette = load(file, self.root, self.max_size)
                if not is_session(cassette):
                    first_plain = first_plain or file == target.path
                    continue
                session = read_session(file, cassette, self.root, self.max_size)
            except (OSError, CassetteError):
                continue  # a broken file is left for its owner to see: replay refuses it
            if same_conversation(session, messages, recording.settings):
                return _retarget(target, file, existed=True), False, not recording.replaces
        if first_plain:  # a plain answer to the upgrade (a 401) at `<key>.json`: this session replaces it
            return dataclasses.replace(target, existed=True), False, False
        if target.path not in files:
            return target, True, False
        after = max(_number(file) for file in files) + 1
        return _retarget(target, _numbered(target.path, after), existed=False), True, False

    def _save(
        self, recording: Recording, target: RecordTarget, exclusive: bool, frames: list[Frame], close: Close
    ) -> RecordTarget:
        """Write the session at `target` (with `exclusive`, at the first free number from it); the target written."""
        for _ in range(MAX_SESSIONS_PER_URL):
            data, sidecar, sidecar_file = self._cassette(recording, target, frames, close)
            replaced = None if exclusive else _sidecar_in_use(target.path)
            if sidecar:
                self.writer.write(target.path.parent / sidecar_file, sidecar)
            if not self.writer.write(target.path, data, exclusive):  # another proxy sharing the folder took the name
                if sidecar:
                    (target.path.parent / sidecar_file).unlink(missing_ok=True)
                target = _retarget(target, _numbered(target.path, _number(target.path) + 1), existed=False)
                continue
            if replaced is not None and replaced.name != sidecar_file:
                replaced.unlink(missing_ok=True)
            return target
        raise OSError(f"{MAX_SESSIONS_PER_URL} sessions are recorded for this URL already")

    def _cassette(
        self, recording: Recording, target: RecordTarget, frames: list[Frame], close: Close | None, turn: int = 0
    ) -> tuple[bytes, bytes, str]:
        """(the session cassette's bytes, its sidecar's bytes, the sidecar's file name) for `target`."""
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
        keyed_with = recording.rules.recipe.to_json() if recording.rules is not None else None
        cassette = self.writer.cassette(
            target.key, target.request, {"status": 101, "headers": recording.headers}, keyed_with
        )
        extra: dict = {"cassette_format": SESSION_FORMAT, "session": session}
        if turn:  # a Responses WebSocket turn: its request is the POST twin, its connection's URL is kept here
            extra["turn"] = {"over": "websocket", "url": recording.target.request["url"], "number": turn}
        return self.writer.stored(cassette, **extra), sidecar, sidecar_file

    def failed(self, flow: http.HTTPFlow, error: Exception, hook: str = "websocket_end") -> None:
        """A bug of ours while recording a session: nothing saved, and the report and the log say so."""
        recording = self.recordings.pop(flow.id, None)
        message = f"cassette_error: the cassette addon failed in its {hook} hook ({own_error_text(flow, error)})"
        log.error(message, exc_info=True)
        cassette = recording.target.relative if recording else None
        self.report.error(ErrorEntry(ErrorKind.OWN_ERROR, message, cassette, hook=hook))

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


def _number(path: Path) -> int:
    """1 for `<key>.json`, n for `<key>.<n>.json`."""
    parts = path.name.split(".")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 1


def _numbered(path: Path, n: int) -> Path:
    """The n-th session file of the URL whose first is `path`: `<key>.json`, `<key>.2.json`, …"""
    return path.parent / repeat_path(f"{path.name.split('.')[0]}.json", n)


def _retarget(target: RecordTarget, path: Path, existed: bool) -> RecordTarget:
    """`target` saved at `path`, a file beside its own."""
    folder = target.relative.rpartition("/")[0]
    return dataclasses.replace(
        target, path=path, relative=f"{folder}/{path.name}" if folder else path.name, existed=existed
    )


def _sidecar_in_use(path: Path) -> Path | None:
    """The sidecar the session cassette at `path` names now: a re-recording leaves it unused."""
    try:
        return sidecar_of(path, load(path))
    except (OSError, CassetteError):
        return None
