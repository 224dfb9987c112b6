"""The cassette file format: what one file holds, how a body is stored, and how a file is read and checked.

One pretty-printed JSON object per interaction (where it lives is
location.py; how it is written, atomic_write.py). Reading is validation:
cassettes arrive in pull requests, so nothing here trusts a file's content.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..fast_json import encoder, indented
from ..keys.body import parse_json_body
from ..keys.key import CREDENTIAL_HEADERS, SIGV4_HEADERS
from . import aws_eventstream
from .json_depth import MAX_DEPTH, TooDeep, check_depth
from .safe_read import DEFAULT_MAX_SIZE, CassetteError, read_limited
from .session_file import check_session, parse_json

FORMAT_VERSION = 2
"""2 adds `keyed_with` (the settings the key was computed under) and a multipart request's `content_type`."""
READABLE_VERSIONS = (1, 2, 3)
"""A format-1 cassette replays as before: its key was computed by recipe 1, and `cassette rekey` carries it over.
3 is a WebSocket session (session_file.py), the only kind written as 3, so that a proxy that predates sessions
refuses one instead of answering its 101 with nothing behind it."""

DROPPED_HEADERS = (
    CREDENTIAL_HEADERS
    | SIGV4_HEADERS
    | frozenset(
        {
            # account identifiers, and cookies set
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
)
"""Response headers never written to a cassette (the request's credential and SigV4 headers too: no echo of them
is ever stored)."""


def body_fields(body: bytes, content_type: str) -> dict[str, Any]:
    """{"body_format", "body"} for storage: parsed JSON when the type says JSON, else text, else base64.

    JSON is stored parsed so that a review diff shows fields, not one long line;
    other types are stored exactly, since their bytes may matter to the client.
    """
    if "json" in content_type.lower() and "ndjson" not in content_type.lower():
        is_json, value = parse_json_body(body)
        if is_json:
            return {"body_format": "json", "body": value}
    return text_fields(body)


def text_fields(body: bytes) -> dict[str, Any]:
    """{"body_format", "body"} keeping the exact bytes: text when they are UTF-8, else base64."""
    try:
        return {"body_format": "text", "body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body_format": "base64", "body": base64.b64encode(body).decode("ascii")}


def decode_body(body_format: str, body: Any) -> bytes:
    """The bytes a stored body stands for; a streamed body (`events`) is its events' texts joined."""
    if body_format == "json":
        return _json_bytes(body)
    if body_format == "text":
        text: str = body
        return text.encode("utf-8")
    if body_format == "base64":
        return base64.b64decode(body)
    if body_format == "events":
        return "".join(event["text"] for event in body).encode("utf-8")
    if body_format == "eventstream":
        return b"".join(aws_eventstream.frame_bytes(frame) for frame in body)
    raise ValueError(f"unknown body_format {body_format!r}")


LARGE_JSON_BYTES = 1024 * 1024
"""A JSON response body above this is stored as text, its exact replay bytes (see `large_json_as_text`)."""


def large_json_as_text(cassette: dict[str, Any], limit: int = LARGE_JSON_BYTES) -> dict[str, Any]:
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


def new_cassette(
    key: str,
    request: dict[str, Any],
    response: dict[str, Any],
    recorded_with: dict[str, Any],
    keyed_with: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "cassette_format": FORMAT_VERSION,
        "key": key,
        **({"keyed_with": keyed_with} if keyed_with is not None else {}),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "recorded_with": recorded_with,
        "request": request,
        "response": response,
    }


_compact_utf8 = encoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)`, built once (every first-sight hit encodes)."""


def _json_bytes(value: Any, indent: int | None = None) -> bytes:
    """UTF-8 JSON; with escapes instead when a string holds a lone surrogate (`"\\ud800"` parses to one)."""
    try:
        if indent is None:
            return _compact_utf8(value).encode("utf-8")
        if indent == 2:
            return indented(value).encode("utf-8")  # json.dumps(indent=2) in half the time: every cassette written
        return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent).encode("ascii")


def dumps(cassette: dict[str, Any]) -> bytes:
    return _json_bytes(cassette, indent=2) + b"\n"


BODY_FORMATS = frozenset({"json", "text", "base64", "events", "eventstream"})


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP field name (RFC 9110 `token`)."""

_FORBIDDEN_IN_FIELDS = re.compile(r"[\r\n\x00]")

_REQUIRED = {
    "key": str,
    "request": dict,
    "response": dict,
}


def load(path: Path | str, root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE) -> dict[str, Any]:
    """Read and validate a cassette; raises CassetteError naming the problem, FileNotFoundError if absent.

    `root`: the cassette folder the file must resolve inside (symlinks within it are fine).
    """
    return parse(path, read_limited(path, root, max_size))


def parse(path: Path | str, raw: bytes) -> dict[str, Any]:
    """Validate the bytes of the cassette file at `path` (named in errors) and return the cassette."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CassetteError(path, f"not UTF-8 text (byte {e.start})") from None
    try:
        # Perhaps a session: its frames counted while it is parsed. A `\u` escape could spell the key otherwise;
        # files of ours hold one only for a control character, so other cassettes keep the plain parse.
        session = '"session"' in text or "\\u" in text
        cassette = parse_json(path, text) if session else json.loads(text)
        check_depth(raw, cassette)
    except RecursionError:  # the parser's own stack: about 1,000 levels
        raise CassetteError(path, f"JSON nested deeper than {MAX_DEPTH} levels: not a recording") from None
    except TooDeep as e:
        raise CassetteError(path, f"{e}: not a recording") from None
    except ValueError as e:
        raise CassetteError(path, f"invalid JSON: {e}") from None
    if not isinstance(cassette, dict):
        raise CassetteError(path, "not a JSON object")
    version = cassette.get("cassette_format")
    if version not in READABLE_VERSIONS:
        raise CassetteError(
            path, f"cassette_format is {version!r}, this version reads {' and '.join(map(str, READABLE_VERSIONS))}"
        )
    if "keyed_with" in cassette and not isinstance(cassette["keyed_with"], dict):
        raise CassetteError(path, "keyed_with must be an object")
    for field, kind in _REQUIRED.items():
        if not isinstance(cassette.get(field), kind):
            raise CassetteError(path, f"missing or invalid field {field!r}")
    response = cassette["response"]
    status = response.get("status")
    if not isinstance(status, int) or isinstance(status, bool):
        raise CassetteError(path, f"response.status must be an integer from 100 to 599, not {_shown(status)}")
    if not 100 <= status <= 599:
        raise CassetteError(path, f"response.status {_shown(status)} is not an HTTP status (100 to 599)")
    for side in ("request", "response"):
        _check_headers(path, side, cassette[side].get("headers", {}))
        _check_body(path, side, cassette[side])
    if version == 3 or status == 101 or "session" in cassette:
        if "session" not in cassette:
            problem = f"response.status {status} or cassette_format 3 without a recorded session: nothing to replay"
            raise CassetteError(path, f"{problem}; delete the file and record the session again")
        check_session(path, cassette)
    return cassette


def _shown(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _check_headers(path: Path | str, side: str, headers: Any) -> None:
    """Names that are HTTP tokens, values without CR, LF or NUL: a stored `\r\n` would inject headers on the wire."""
    if not isinstance(headers, dict):
        raise CassetteError(path, f"{side}.headers must be an object of strings")
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise CassetteError(path, f"{side}.headers: {_shown(name)} is not an HTTP header name")
        if not isinstance(value, str):
            raise CassetteError(path, f"{side}.headers.{name} must be a string, not {_shown(value)}")
        if _FORBIDDEN_IN_FIELDS.search(value):
            raise CassetteError(path, f"{side}.headers.{name} holds a CR, LF or NUL character: {_shown(value)}")


def _check_body(path: Path | str, side: str, stored: dict[str, Any]) -> None:
    """The body has the type its `body_format` declares (a missing body is empty text)."""
    body_format = stored.get("body_format", "text")
    if body_format not in BODY_FORMATS:
        known = ", ".join(sorted(BODY_FORMATS))
        raise CassetteError(path, f"unknown {side}.body_format {_shown(body_format)}; use one of {known}")
    if "body" not in stored:
        return
    body = stored["body"]
    if body_format in ("text", "base64") and not isinstance(body, str):
        problem = f"{side}.body does not match its body_format {body_format}"
        raise CassetteError(path, f"{problem}: a string is needed, not {_shown(body)}")
    if body_format == "base64":
        try:
            base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            problem = f"{side}.body does not match its body_format base64"
            raise CassetteError(path, f"{problem}: {_shown(body)} is not base64") from None
    if body_format == "events" and not _valid_events(body):
        raise CassetteError(path, f'{side}.body must be a list of {{"ms": <int ≥ 0>, "text": <str>}} events')
    if body_format == "eventstream" and not aws_eventstream.valid_frames(body):
        raise CassetteError(
            path,
            f'{side}.body must be a list of AWS event-stream frames: {{"ms": <int ≥ 0>, "headers": {{<str>: <str>}}, '
            '"payload": <JSON>} or {"ms": <int ≥ 0>, "frame_base64": <base64>}',
        )


def events_fields(events: list[dict[str, Any]], body_format: str = "events") -> dict[str, Any]:
    """{"body_format", "body"} for a streamed body: one {"ms", "text"} entry per SSE event or NDJSON line
    (`events`), or one entry per AWS event-stream frame (`eventstream`, see aws_eventstream.py)."""
    return {"body_format": body_format, "body": events}


def _valid_events(body: Any) -> bool:
    return isinstance(body, list) and all(
        isinstance(e, dict)
        and isinstance(e.get("text"), str)
        and isinstance(e.get("ms"), int)
        and not isinstance(e.get("ms"), bool)
        and e["ms"] >= 0
        for e in body
    )
