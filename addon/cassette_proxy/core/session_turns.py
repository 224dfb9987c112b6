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

This module only reads: what a turn is, its request and key, which response ids
a connection was given, and the error event a missed turn answers. Nothing in
the proxy plays or records by turn yet (see docs/frameworks.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .cassette_file import body_fields
from .key import key_of
from .recipe import Recipe, stored_identity
from .session_file import Frame

CREATE = "response.create"
"""The client message that is a request."""

TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
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
        for frame in self.answer:
            message = parsed_message(frame.payload)
            response = message.get("response") if message else None
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                return response["id"]
        return None

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


def unknown_continuation(body: dict[str, Any], live_ids: Sequence[str] | set[str]) -> str | None:
    """The `previous_response_id` of a turn about to go live when it names a response the provider never made (one
    a recording answered), else None. Such a turn is refused: sent live, the provider would fail it or, worse,
    continue a conversation the client never had with it."""
    previous = body.get("previous_response_id")
    if isinstance(previous, str) and previous and previous not in live_ids:
        return previous
    return None


def turn_miss_event(message: str, details: dict[str, Any]) -> dict[str, Any]:
    """The Responses-style `error` event a missed turn is answered with (the WebSocket mode's own error shape, which
    openai-agents raises with its message): `message` is the HTTP miss's (core/miss.py `miss_body`), `details` the
    cassette, the turn's number and the nearest recording's differences."""
    return {
        "type": "error",
        "status": 409,
        "error": {"type": "cassette_miss", "code": "cassette_miss", "param": None, "message": message, **details},
    }
