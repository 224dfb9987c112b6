"""The Responses API's WebSocket mode read as its HTTP twin: each `response.create` a request, its events the answer.

One `wss://…/v1/responses` connection carries all of an agent's turns
(openai-agents' websocket transport, Codex). Read turn by turn, a client
`response.create` message is the body a `POST /v1/responses` would send (the
message less its `type`), keyed with the run's recipe (`cassette_ignore`, the
value patterns, the framework presets such as openai-agents'
`prompt_cache_key`), and the server events after it, up to its
`response.completed` (or `response.failed`, `response.incomplete`, `error`), are
its streamed answer.

A turn's key is the HTTP twin's identity with `"over": "websocket"` added: the
body is compared exactly as the twin's would be, but an HTTP call never plays a
WebSocket turn's recording, nor a turn an HTTP call's (their answers are framed
differently: SSE there, one event per message here).

This module reads what a turn is, its request and key (a `previous_response_id`
the run's answers gave keyed as the turn it continues), and plays a connection
turn by turn (TurnChoice, for the session server); proxy/websocket/sessions.py finds and
saves the turns' cassettes (docs/realtime.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..files.cassette_file import body_fields
from ..files.session_file import Frame, Session
from ..keys.key import key_of
from ..keys.recipe import Recipe, stored_identity
from .session_match import Miss

CREATE = "response.create"
"""The client message that is a request."""

TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete", "response.error", "error"})
"""The server events that end a turn's answer."""

TWIN_SCHEMES = {"wss": "https", "ws": "http", "https": "https", "http": "http"}
"""The scheme of a connection's URL -> the scheme its turns' HTTP twin is keyed with."""

_REPEATED_SLASHES = re.compile(r"/{2,}")


def is_responses_socket(url: str) -> bool:
    """A connection to the Responses API's WebSocket mode: a path ending in `/responses`."""
    path = _REPEATED_SLASHES.sub("/", urlsplit(url).path)
    return path.rstrip("/").endswith("/responses")


def parsed_message(payload: bytes) -> dict[str, Any] | None:
    """A client or server message as a JSON object, else None."""
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def create_body(payload: bytes) -> dict[str, Any] | None:
    """The `POST /v1/responses` body a `response.create` message stands for (the message less `type`); None for any
    other message."""
    message = parsed_message(payload)
    if message is None or message.get("type") != CREATE:
        return None
    return {name: value for name, value in message.items() if name != "type"}


def twin_request(upgrade: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """The stored request (as a cassette holds it) of the `POST` a turn stands for: the connection's URL with an
    HTTP scheme and its query, its stored key headers, `body` as JSON. `upgrade` is the stored upgrade request."""
    parts = urlsplit(str(upgrade.get("url", "")))
    scheme = TWIN_SCHEMES.get(parts.scheme, parts.scheme)
    url = urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))
    headers = upgrade.get("headers", {})
    raw = json.dumps(body, ensure_ascii=False).encode("utf-8")
    return {
        "method": "POST",
        "url": url,
        "headers": dict(headers) if isinstance(headers, dict) else {},
        **body_fields(raw, "application/json"),
    }


def turn_identity(request: dict[str, Any], recipe: Recipe) -> dict[str, Any]:
    """What a turn's key is hashed from: its twin's identity under `recipe`, in the WebSocket turns' own key space.
    ValueError for a request that holds no URL."""
    return {**stored_identity(request, recipe), "over": "websocket"}


def turn_key(request: dict[str, Any], recipe: Recipe) -> str:
    return key_of(turn_identity(request, recipe))


TURN_REFERENCE = "cassette-turn:"
"""A `previous_response_id` naming a response a turn of this run was answered with is keyed as that turn's key
after this prefix: ids are made up anew on every live run, the turn they continue is not."""


def keyed_body(body: dict[str, Any], given: dict[str, str]) -> dict[str, Any]:
    """`body` as a turn's key reads it: a `previous_response_id` the run's answers gave (`given`: response id ->
    the key of the turn whose answer it was) replaced by that turn's reference."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous in given:
        return {**body, "previous_response_id": TURN_REFERENCE + given[previous]}
    return body


@dataclass
class Turn:
    """One `response.create` of a connection and the server events that answered it."""

    number: int
    """1 for the connection's first `response.create`."""
    request: Frame
    body: dict[str, Any]
    answer: list[Frame] = field(default_factory=list)
    complete: bool = False
    """Its answer ended with a terminal event: only such a turn is a recording."""

    @property
    def response_id(self) -> str | None:
        """The id the server gave this turn's response (`response.created`, else its terminal event)."""
        return response_id_of(self.answer)

    @property
    def previous_response_id(self) -> str | None:
        value = self.body.get("previous_response_id")
        return value if isinstance(value, str) else None


@dataclass
class Turns:
    """A connection read as its turns."""

    opening: list[Frame]
    """Server messages before the first client message."""
    turns: list[Turn]


def split_turns(frames: Iterable[Frame]) -> Turns | None:
    """The turns of a connection's frames; None when a client message is not a `response.create` (the connection
    is then not read as turns: it is played as a whole session). A server message after a turn's terminal event
    and before the next `response.create` still belongs to that turn."""
    opening: list[Frame] = []
    turns: list[Turn] = []
    for frame in frames:
        if frame.from_client:
            body = create_body(frame.payload)
            if body is None:
                return None
            turns.append(Turn(len(turns) + 1, frame, body))
            continue
        if not turns:
            opening.append(frame)
            continue
        turn = turns[-1]
        turn.answer.append(frame)
        message = parsed_message(frame.payload)
        if message is not None and message.get("type") in TERMINAL_EVENTS:
            turn.complete = True
    return Turns(opening, turns)


def response_id_of(answer: Iterable[Frame]) -> str | None:
    """The id of the response an answer's events describe (the first `response` object with an `id`)."""
    for frame in answer:
        message = parsed_message(frame.payload)
        response = message.get("response") if message else None
        if isinstance(response, dict) and isinstance(found := response.get("id"), str):
            return found
    return None


def turn_frames(turn: Turn) -> tuple[Frame, ...]:
    """A turn as its recording stores it: the `response.create`, then its answer, timed from the request."""
    start = turn.request.ms
    return tuple(Frame(f.from_client, max(0, f.ms - start), f.is_text, f.payload) for f in (turn.request, *turn.answer))


@dataclass(frozen=True)
class TurnMiss(Miss):
    """A `response.create` with no recording: its message is the HTTP miss's, naming the nearest turn's diff."""

    text: str = ""

    def message(self, cassette: str, hint: str = "", among: int = 1) -> str:
        return self.text


Lookup = Callable[[str], "tuple[str, Session] | None"]
"""A turn's key -> (its recording's name relative to the cassette folder, the recording), or None."""
Missed = Callable[[str, dict[str, Any], int], "tuple[str, str, list[str]]"]
"""(the turn's key, its twin request, its number) -> (the nearest recording or the file it would be, the miss's
message, the nearest recording's differences)."""


class TurnChoice:
    """A Responses WebSocket connection played turn by turn, in the interface of session_match.SessionChoice.

    Each `response.create` is answered from the recording of its own turn, wherever and whenever it was
    recorded (any connection, any order, any number of agents in one folder). The ids of the answers it gives
    are kept in `given` (shared by the run's connections), so a later turn continuing one is keyed by the turn
    it continues, as it was when recorded.
    """

    candidates = 1
    chosen = True
    finished = False
    reads_files = True
    """`answer` reads the turn's recording (and on a miss the folder, for the nearest): the session server calls it
    in a worker thread, never on the event loop."""

    def __init__(self, upgrade: dict[str, Any], keying: Recipe, lookup: Lookup, missed: Missed,
                 given: dict[str, str]) -> None:  # fmt: skip
        self.upgrade, self.keying, self.lookup, self.missed, self.given = upgrade, keying, lookup, missed, given
        self.answers: list[tuple[int, list[Frame]]] = []
        self.played: list[str] = []
        """The recordings answered from, in order: each is a hit."""
        self.cassette = ""
        self.session = Session((), None, ())
        self.opening: list[Frame] = []

    @property
    def matched(self) -> int:
        return len(self.answers)

    def lead_with_an_answer(self) -> None:
        """One recording per turn: nothing to choose."""

    def turn(self, number: int) -> tuple[int, list[Frame]]:
        if number == 0:
            return 0, []
        return self.answers[number - 1]

    def answer(self, payload: bytes) -> tuple[Frame, list[Frame]] | Miss:
        number = len(self.answers) + 1
        body = create_body(payload)
        if body is None:
            text = (
                f"cassette_miss: client message {number} of this Responses WebSocket connection is not a "
                "`response.create`: only turns are recorded and replayed on this URL."
            )
            return TurnMiss(number, ["a message that is not a response.create"], number - 1, text=text)
        request = twin_request(self.upgrade, keyed_body(body, self.given))
        key = turn_key(request, self.keying)
        found = self.lookup(key)
        if found is None:
            self.cassette, text, differences = self.missed(key, request, number)
            return TurnMiss(number, differences, number - 1, text=text)
        relative, session = found
        request_frame, answer = session.frames[0], [f for f in session.frames[1:] if not f.from_client]
        if (response_id := response_id_of(answer)) is not None:
            self.given[response_id] = key
        self.answers.append((request_frame.ms, answer))
        self.played.append(relative)
        self.cassette = relative
        return request_frame, answer


def unknown_continuation(body: dict[str, Any], live_ids: Sequence[str] | set[str]) -> str | None:
    """The `previous_response_id` of a turn about to go live when it names a response the provider never made (one
    a recording answered), else None. Such a turn is refused: sent live, the provider would fail it or, worse,
    continue a conversation the client never had with it."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous and previous not in live_ids:
        return previous
    return None
