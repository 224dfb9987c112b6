"""The cassette file format: what one file holds, how a body is stored, and how a file is read and checked.

One pretty-printed JSON object per interaction (where it lives is
location.py; how it is written, atomic_write.py). Reading is validation:
cassettes arrive in pull requests, so nothing here trusts a file's content.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .key import parse_json_body

FORMAT_VERSION = 1

DROPPED_HEADERS = frozenset(
    {
        # credentials and account identifiers
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "cookie",
        "set-cookie",
        "openai-organization",
        "openai-project",
        "anthropic-organization-id",
        # hop-by-hop, or recomputed on replay because the body is stored decoded
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "content-encoding",
        # volatile: differs on every recording and only adds noise to reviews
        "date",
        "age",
        "alt-svc",
    }
)
"""Response headers never written to a cassette."""


class CassetteError(Exception):
    """A cassette file exists but cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def body_fields(body: bytes, content_type: str) -> dict:
    """{"body_format", "body"} for storage: parsed JSON when the type says JSON, else text, else base64.

    JSON is stored parsed so that a review diff shows fields, not one long line;
    other types are stored exactly, since their bytes may matter to the client.
    """
    if "json" in content_type.lower() and "ndjson" not in content_type.lower():
        is_json, value = parse_json_body(body)
        if is_json:
            return {"body_format": "json", "body": value}
    try:
        return {"body_format": "text", "body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_format": "base64", "body": base64.b64encode(body).decode("ascii")}


def decode_body(body_format: str, body: Any) -> bytes:
    """The bytes a stored body stands for; a streamed body (`events`) is its events' texts joined."""
    if body_format == "json":
        return _json_bytes(body)
    if body_format == "text":
        return body.encode("utf-8")
    if body_format == "base64":
        return base64.b64decode(body)
    if body_format == "events":
        return "".join(event["text"] for event in body).encode("utf-8")
    raise ValueError(f"unknown body_format {body_format!r}")


LARGE_JSON_BYTES = 1024 * 1024
"""A JSON response body above this is stored as text, its exact replay bytes (see `large_json_as_text`)."""


def large_json_as_text(cassette: dict, limit: int = LARGE_JSON_BYTES) -> dict:
    """The cassette with a JSON response body above `limit` bytes stored as text instead.

    Replaying a JSON body means parsing the file and encoding the body again:
    for a 20 MB body that took seconds and six times its size in memory. The
    text is exactly what that encoding gives, so a replay sends the same bytes
    either way; no one reviews a diff of megabytes field by field. Called on
    the redacted cassette, so redaction rules still see the fields.
    """
    response = cassette.get("response", {})
    if response.get("body_format") != "json":
        return cassette
    encoded = _json_bytes(response["body"])
    if len(encoded) <= limit:
        return cassette
    return {**cassette, "response": {**response, "body_format": "text", "body": encoded.decode("utf-8")}}


def stored_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Response headers worth keeping, lower-cased; repeated ones joined with ", " as HTTP allows."""
    kept: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        if name not in DROPPED_HEADERS:
            kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept


def new_cassette(key: str, request: dict, response: dict, recorded_with: dict) -> dict:
    return {
        "cassette_format": FORMAT_VERSION,
        "key": key,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "recorded_with": recorded_with,
        "request": request,
        "response": response,
    }


_COMPACT_UTF8 = json.JSONEncoder(ensure_ascii=False)
"""What `json.dumps(value, ensure_ascii=False)` builds on every call; built once (every first-sight hit encodes)."""


def _json_bytes(value: Any, indent: int | None = None) -> bytes:
    """UTF-8 JSON; with escapes instead when a string holds a lone surrogate (`"\\ud800"` parses to one)."""
    try:
        if indent is None:
            return _COMPACT_UTF8.encode(value).encode("utf-8")
        return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent).encode("ascii")


def dumps(cassette: dict) -> bytes:
    return _json_bytes(cassette, indent=2) + b"\n"


BODY_FORMATS = frozenset({"json", "text", "base64", "events"})

_REQUIRED = {
    "key": str,
    "request": dict,
    "response": dict,
}


def load(path: Path) -> dict:
    """Read and validate a cassette; raises CassetteError naming the problem, FileNotFoundError if absent."""
    return parse(path, path.read_bytes())


def parse(path: Path | str, raw: bytes) -> dict:
    """Validate the bytes of the cassette file at `path` (named in errors) and return the cassette."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CassetteError(path, f"not UTF-8 text (byte {e.start})") from None
    try:
        cassette = json.loads(text)
    except ValueError as e:
        raise CassetteError(path, f"invalid JSON: {e}") from None
    if not isinstance(cassette, dict):
        raise CassetteError(path, "not a JSON object")
    version = cassette.get("cassette_format")
    if version != FORMAT_VERSION:
        raise CassetteError(path, f"cassette_format is {version!r}, this version reads {FORMAT_VERSION}")
    for field, kind in _REQUIRED.items():
        if not isinstance(cassette.get(field), kind):
            raise CassetteError(path, f"missing or invalid field {field!r}")
    response = cassette["response"]
    if not isinstance(response.get("status"), int):
        raise CassetteError(path, "missing or invalid field 'response.status'")
    headers = response.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise CassetteError(path, "response.headers must be an object of strings")
    if response.get("body_format", "text") not in BODY_FORMATS:
        raise CassetteError(path, f"unknown response.body_format {response.get('body_format')!r}")
    if response.get("body_format") == "events" and not _valid_events(response.get("body")):
        raise CassetteError(path, 'response.body must be a list of {"ms": <int ≥ 0>, "text": <str>} events')
    return cassette


def events_fields(events: list[dict]) -> dict:
    """{"body_format", "body"} for a streamed body: one {"ms", "text"} entry per SSE event or NDJSON line."""
    return {"body_format": "events", "body": events}


def _valid_events(body: Any) -> bool:
    return isinstance(body, list) and all(
        isinstance(e, dict)
        and isinstance(e.get("text"), str)
        and isinstance(e.get("ms"), int)
        and not isinstance(e.get("ms"), bool)
        and e["ms"] >= 0
        for e in body
    )
