"""Recorded WebSocket sessions for the tests that need one on disk without a proxy: the formats' own writer builds them."""

from __future__ import annotations

import json
from pathlib import Path

from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.files.session_file import (
    SESSION_FORMAT,
    Close,
    Frame,
    session_object,
    sidecar_name,
    stored_frames,
)
from cassette_proxy.core.keys.key import RequestFacts, request_key
from cassette_proxy.core.keys.recipe import make_recipe, stored_request
from cassette_proxy.core.sessions.session_match import DEFAULT_SESSION_IGNORE

REALTIME_URL = ("wss", "api.openai.com", 443, "/v1/realtime", [("model", "gpt-realtime")])


def client(ms: int, message: dict) -> Frame:
    return Frame(True, ms, True, json.dumps(message, separators=(",", ":")).encode())


def server(ms: int, message: dict, binary: bool = False) -> Frame:
    return Frame(False, ms, not binary, json.dumps(message, separators=(",", ":")).encode())


def realtime_frames(text: str = "Say hello", answer: str = "Hello there") -> list[Frame]:
    """An OpenAI Realtime conversation: session events, a user text, a streamed text answer."""
    return [
        server(3, {"type": "session.created", "event_id": "event_1", "session": {"id": "sess_1", "model": "gpt-realtime"}}),
        client(10, {"type": "session.update", "event_id": "evt_a", "session": {"instructions": "Be brief."}}),
        server(14, {"type": "session.updated", "event_id": "event_2", "session": {"instructions": "Be brief."}}),
        client(20, {"type": "conversation.item.create", "event_id": "evt_b", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}}),
        server(25, {"type": "conversation.item.created", "event_id": "event_3", "item": {"id": "item_1"}}),
        client(30, {"type": "response.create", "event_id": "evt_c"}),
        server(120, {"type": "response.created", "event_id": "event_4", "response": {"id": "resp_1"}}),
        *(
            server(150 + 40 * i, {"type": "response.output_text.delta", "event_id": f"event_d{i}", "delta": word + " "})
            for i, word in enumerate(answer.split())
        ),
        server(400, {"type": "response.done", "event_id": "event_5", "response": {"id": "resp_1", "status": "completed"}}),
    ]  # fmt: skip


def session_cassette(frames: list[Frame], close: Close | None = None, url=REALTIME_URL) -> tuple[dict, bytes, str]:
    """(the cassette, its sidecar's bytes, its path relative to the cassette folder), as the recorder writes them."""
    scheme, host, port, path, query = url
    facts = RequestFacts("GET", "https" if scheme == "wss" else "http", host, port, path, query, {}, b"")
    key = request_key(facts, make_recipe().key_headers)
    relative = relative_name(facts.scheme, host, port, path, key)
    stored, sidecar = stored_frames(frames)
    name = sidecar_name(Path(relative).name, sidecar) if sidecar else ""
    session = session_object(stored, close or Close("client", 1000, ""), DEFAULT_SESSION_IGNORE, sidecar, name)
    recorded_with = {"cassette_proxy": "test"}
    cassette = new_cassette(
        key, stored_request(facts, ()), {"status": 101, "headers": {}}, recorded_with, make_recipe().to_json()
    )
    return {**cassette, "cassette_format": SESSION_FORMAT, "session": session}, sidecar, relative


def write_session(root: Path, frames: list[Frame], close: Close | None = None, url=REALTIME_URL) -> Path:
    cassette, sidecar, relative = session_cassette(frames, close, url)
    path = root / relative
    if sidecar:
        write_atomic(path.parent / cassette["session"]["sidecar"]["file"], sidecar)
    write_atomic(path, dumps(cassette))
    return path
