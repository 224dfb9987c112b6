"""Replaying a session: which recorded client message a live one must equal, and what the server says next.

A live client message is compared with the next recorded client message as
the key compares request bodies: JSON parsed, numbers canonical, the
`cassette_ignore` paths and value patterns applied, plus the session's own
ignore paths (`cassette_session_ignore`, by default the client-made
`event_id` of OpenAI Realtime). When they are equal, the server messages
recorded after it (up to the next client message) are what the client gets
next. The first difference, or a message beyond the recorded ones, is a miss,
told to the client in the API's own error shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from ..errors import error_body
from ..files.session_file import Frame, Session
from ..keys.body import parse_ignore_paths
from ..keys.key import canonical_body, key_of
from ..keys.volatile import ValuePattern
from ..reading.diff import differences, shown

DEFAULT_SESSION_IGNORE = ("event_id",)
"""OpenAI Realtime's client events carry an `event_id` the client library makes up on every run."""

MISS_CLOSE_CODE = 4409
"""The close code after a miss: private use (4000-4999), 409 as the HTTP miss answers."""
ERROR_CLOSE_CODE = 4500
"""The close code after a failure of ours while playing a session."""

OPENAI = "openai-realtime"
GEMINI = "gemini-live"
RESPONSES = "openai-responses"
"""The Responses API's WebSocket mode (core/sessions/session_turns.py)."""


@dataclass(frozen=True)
class MatchSettings:
    """What matching leaves out: the run's ignore paths and value patterns, and the session's own paths."""

    paths: tuple[tuple[str, ...], ...] = ()
    patterns: tuple[ValuePattern, ...] = ()
    session_ignore: tuple[str, ...] = DEFAULT_SESSION_IGNORE

    @property
    def all_paths(self) -> tuple[tuple[str, ...], ...]:
        return (*self.paths, *parse_ignore_paths(self.session_ignore))

    @property
    def fingerprint(self) -> str:
        """Names these settings in a session (`digest_settings`): a digest made under others cannot be compared."""
        return key_of(
            {"paths": [list(p) for p in self.all_paths], "patterns": [p.regex.pattern for p in self.patterns]}
        )


def message_identity(payload: bytes, settings: MatchSettings) -> Any:
    """A client message as matching sees it: parsed JSON less the ignored fields, else its text, else a digest."""
    identity = canonical_body(payload, "", settings.all_paths, settings.patterns)
    if identity is not None and "sha256" in identity:
        try:
            return {"text": payload.decode("utf-8")}
        except UnicodeDecodeError:
            return {**identity, "bytes": len(payload)}
    return identity


def message_digest(payload: bytes, settings: MatchSettings) -> str:
    """The digest a redacted client message is matched by (`match_digest`): the same as its identity's."""
    return key_of({"message": message_identity(payload, settings)})


def identity_differences(recorded: Any, live: Any) -> list[str]:
    """recorded → live, field by field for JSON, else as a whole."""
    if isinstance(recorded, dict) and isinstance(live, dict) and "json" in recorded and "json" in live:
        return differences(recorded["json"], live["json"])
    return [f"message: {_described(recorded)} → {_described(live)}"]


def _described(identity: Any) -> str:
    if identity is None:
        return "empty"
    if "json" in identity:
        return "JSON " + shown(identity["json"])
    if "text" in identity:
        return "text " + shown(identity["text"])
    return f"{identity.get('bytes', '?')} bytes with sha256 {identity['sha256'][:12]}…"


def _whole(identity: Any) -> str:
    return json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Miss:
    """A live client message the recording does not have: its number (from 1) and what differs."""

    number: int
    differences: list[str]
    recorded_count: int
    likeness: float = 0.0
    """How alike the recorded and the live message are (0 to 1): which of several recordings is the nearest."""

    def message(self, cassette: str, hint: str = "", among: int = 1) -> str:
        """What the client and the log are told: `cassette` the nearest recording, of `among` at this URL."""
        nearest = f" (the nearest of the {among} sessions recorded for this URL)" if among > 1 else ""
        if self.number > self.recorded_count:
            what = f"the session {cassette}{nearest} recorded only {self.recorded_count} client messages"
        else:
            changed = "; ".join(self.differences[:3]) + (
                f" (+{len(self.differences) - 3} more)" if len(self.differences) > 3 else ""
            )
            what = f"it differs from the recording in {cassette}{nearest}: {changed}"
        text = f"cassette_miss: client message {self.number} of this WebSocket session has no recording: {what}."
        return f"{text} {hint}" if hint else text


class SessionScript:
    """A recorded session cut at its client messages: what to send on connect, then after each match.

    Server messages recorded before the first client message (`session.created`,
    Gemini's nothing-until-setup) go on connect; those recorded after client
    message n go once live message n has matched. The recording's order is the
    client's own causality: a client that waits for an event before sending
    waited for it while recording too.
    """

    def __init__(self, session: Session, settings: MatchSettings) -> None:
        self.session = session
        self.settings = settings
        self.opening: list[Frame] = []
        self.turns: list[tuple[int, Frame, list[Frame]]] = []
        """(frame index, client message, the server messages recorded after it)."""
        for index, frame in enumerate(session.frames):
            if frame.from_client:
                self.turns.append((index, frame, []))
            elif self.turns:
                self.turns[-1][2].append(frame)
            else:
                self.opening.append(frame)
        self.matched = 0
        self.same_settings = session.digest_settings == settings.fingerprint

    @property
    def finished(self) -> bool:
        """Every recorded client message has been matched."""
        return self.matched >= len(self.turns)

    def answer(self, payload: bytes) -> tuple[Frame, list[Frame]] | Miss:
        """The recorded client message this live one matched and the server messages to send, or the miss."""
        number = self.matched + 1
        if self.finished:
            return Miss(
                number, [f"an extra message: {_described(message_identity(payload, self.settings))}"], len(self.turns)
            )
        index, recorded, replies = self.turns[self.matched]
        live = message_identity(payload, self.settings)
        digest = self.session.digests.get(index)
        if digest is not None and self.same_settings and message_digest(payload, self.settings) == digest:
            self.matched += 1
            return recorded, replies
        stored = message_identity(recorded.payload, self.settings)
        if digest is None and stored == live:
            self.matched += 1
            return recorded, replies
        diff = identity_differences(stored, live)
        if digest is not None:
            diff.append("(the recorded message was redacted when stored: the diff shows the redacted text)")
        likeness = SequenceMatcher(None, _whole(stored), _whole(live), autojunk=False).ratio()
        return Miss(number, diff or ["the message differs from the recording"], len(self.turns), likeness)


class SessionChoice:
    """The sessions recorded for one upgrade key, narrowed by each live client message to those it matches.

    Several conversations may share a URL (two tests to one model): each connection is played from all of
    them; a session drops out at the first client message it does not have. The server messages are those
    of the first session (in the order given) still matching; the session server holds them while several
    match (proxy/websocket/session_server.py), so a conversation told apart at its second message gets its own
    recording whole. When none is left, the miss is told with the diff of the nearest, as for one recording.

    A client answered from one recording that goes on in another's conversation sends back the ids the first
    one's server made up (`previous_response_id`, an `item_id`): each is read as the id the other recording
    has at the same place of the same turn (`made_up_ids`) before its message is compared.
    """

    def __init__(self, candidates: Sequence[tuple[str, SessionScript]]) -> None:
        if not candidates:
            raise ValueError("a choice needs at least one recorded session")
        self.candidates = len(candidates)
        self.survivors = list(candidates)
        """(cassette name, its script): the sessions every client message so far matched, the leader first."""
        self.played: dict[int, SessionScript] = {}
        """Turn number -> the session whose server messages the client got for it."""
        self._ids: dict[tuple[int, int, int], dict[str, str]] = {}

    @property
    def cassette(self) -> str:
        """The session being played (after a miss: the nearest one)."""
        return self.survivors[0][0]

    @property
    def session(self) -> Session:
        return self.survivors[0][1].session

    @property
    def opening(self) -> list[Frame]:
        return self.survivors[0][1].opening

    @property
    def finished(self) -> bool:
        """No session still matching has a later client message: the recorded server close may follow."""
        return all(script.finished for _, script in self.survivors)

    @property
    def matched(self) -> int:
        """Client messages matched so far (the same for every session still matching)."""
        return self.survivors[0][1].matched

    @property
    def chosen(self) -> bool:
        """One session is left: what it recorded is what the client gets."""
        return len(self.survivors) == 1

    def lead_with_an_answer(self) -> None:
        """The client is waiting: lead with the first session whose recording answered it here. A recording where
        the client sent its next message before any answer cannot be the one a waiting client is in."""
        number = self.matched
        self.survivors.sort(key=lambda entry: not (entry[1].turns[number - 1][2] if number else entry[1].opening))

    def turn(self, number: int) -> tuple[int, list[Frame]]:
        """The leader's turn `number`: (the recorded client message's ms, the server messages sent after it);
        turn 0 is the opening, sent on connect."""
        script = self.survivors[0][1]
        self.played[number] = script
        if number == 0:
            return 0, script.opening
        _, recorded, replies = script.turns[number - 1]
        return recorded.ms, replies

    def answer(self, payload: bytes) -> tuple[Frame, list[Frame]] | Miss:
        """The leader's recorded message and replies, once the sessions that do not match this one are dropped;
        when none matches, the miss of the nearest: the fewest differences, then the most alike message."""
        answered = [(name, script, script.answer(self._as_in(script, payload))) for name, script in self.survivors]
        matched = [(name, script, result) for name, script, result in answered if not isinstance(result, Miss)]
        if matched:
            self.survivors = [(name, script) for name, script, _ in matched]
            result = matched[0][2]
            assert not isinstance(result, Miss), "matched results are answers"
            return result
        misses = [(name, script, result) for name, script, result in answered if isinstance(result, Miss)]
        name, script, miss = min(misses, key=lambda entry: (len(entry[2].differences), -entry[2].likeness))
        self.survivors = [(name, script)]
        return miss

    def _as_in(self, script: SessionScript, payload: bytes) -> bytes:
        """The live message with the ids other recordings' server messages gave the client read as `script`'s."""
        ids: dict[str, str] = {}
        for number, played in self.played.items():
            if played is not script:
                pair = (number, id(played), id(script))  # each turn's frames read once, however many messages follow
                if pair not in self._ids:
                    self._ids[pair] = made_up_ids(_turn_frames(played, number), _turn_frames(script, number))
                ids.update(self._ids[pair])
        if not ids:
            return payload
        try:
            message = json.loads(payload)
        except (ValueError, RecursionError):
            return payload
        return json.dumps(_replaced(message, ids), ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _turn_frames(script: SessionScript, number: int) -> list[Frame]:
    if number == 0:
        return script.opening
    return script.turns[number - 1][2] if number <= len(script.turns) else []


_ID = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])[A-Za-z0-9_-]{6,200}")
"""What a made-up id looks like (`resp_…`, `item_…`, `call_…`): letters and digits, no spaces: never a word."""


def _looks_made_up(value: str) -> bool:
    return _ID.fullmatch(value) is not None


def made_up_ids(sent: Sequence[Frame], recorded: Sequence[Frame]) -> dict[str, str]:
    """id the client got -> the id `recorded` has there instead: strings that look like ids and differ at the same
    place of the same server message, message by message; an id seen with two counterparts is left alone."""
    found: dict[str, str] = {}
    clashes: set[str] = set()
    for ours, theirs in zip(sent, recorded, strict=False):
        try:
            pairs = _differing_strings(json.loads(ours.payload), json.loads(theirs.payload))
        except (ValueError, RecursionError):
            continue
        for given, wanted in pairs:
            if _looks_made_up(given) and _looks_made_up(wanted) and found.setdefault(given, wanted) != wanted:
                clashes.add(given)
    return {given: wanted for given, wanted in found.items() if given not in clashes}


def _differing_strings(a: Any, b: Any) -> Iterator[tuple[str, str]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for name in a.keys() & b.keys():
            yield from _differing_strings(a[name], b[name])
    elif isinstance(a, list) and isinstance(b, list):
        for x, y in zip(a, b, strict=False):
            yield from _differing_strings(x, y)
    elif isinstance(a, str) and isinstance(b, str) and a != b:
        yield a, b


def _replaced(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {name: _replaced(item, ids) for name, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item, ids) for item in value]
    if isinstance(value, str):
        return ids.get(value, value)
    return value


def same_conversation(session: Session, client_messages: Sequence[bytes], settings: MatchSettings) -> bool:
    """The recorded session has exactly these client messages, each matching as a replay would match it."""
    script = SessionScript(session, settings)
    return all(not isinstance(script.answer(payload), Miss) for payload in client_messages) and script.finished


def shape_of(url: str, frames: Sequence[Frame]) -> str:
    """Which API's error shape the client reads: Gemini Live (a `setup` message first) or OpenAI Realtime."""
    if "BidiGenerateContent" in url:
        return GEMINI
    first = next((f for f in frames if f.from_client), None)
    if first is not None and first.payload.lstrip().startswith(b'{"setup"'):
        return GEMINI
    return OPENAI


def miss_event(shape: str, message: str, details: dict[str, Any], client_event_id: Any = None) -> dict[str, Any]:
    """The error message a client gets before the close: in its API's own shape.

    OpenAI Realtime: an `error` server event (the SDKs raise or emit it, `error.message` shown); the Responses
    API's WebSocket mode: its `error` event, with a `status`. Gemini Live:
    a Google API error object (`code`, `status`, `message`), which google-genai raises as its ClientError for
    a server message that is no LiveServerMessage; the close that follows says it in short.
    """
    if shape == GEMINI:
        return {"code": 409, "status": "ABORTED", "message": message, "details": [details]}
    if shape == RESPONSES:  # the WebSocket mode's error event: openai-agents raises it with its payload
        return {"type": "error", "status": 409, **error_body("cassette_miss", message, param=None, **details)}
    event = error_body("cassette_miss", message, param=None, event_id=client_event_id, **details)
    return {"event_id": "event_cassette_miss", **event}


def close_reason(text: str) -> str:
    """`text` cut to what a close frame carries (123 bytes of UTF-8), on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= 123:
        return text
    return data[:120].decode("utf-8", "ignore") + "…"
