"""MCP over stdio as cassettes: a server the client spawns, its newline-delimited JSON-RPC messages kept like requests.

`cassette mcp -- SERVER_COMMAND…` (cli/mcp.py, its relay launch/mcp_relay.py) sits between an MCP client and the server it spawns. Each
JSON-RPC request the client writes is a request, keyed like an HTTP body (the same recipe: `cassette_ignore`,
value patterns, framework presets) under the URL `stdio://<server name>/`; the server's lines up to its
response (notifications, progress, then the response) are its answer, stored as NDJSON events with their
timing, redacted by the same rules. Cassettes live under `<cassette_dir>/stdio/<server name>/<key>.json`.

Pure: no mitmproxy, no processes; the relay does the plumbing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ..files.cassette_file import events_fields, new_cassette
from ..files.location import endpoint_dir
from ..keys.key import RequestFacts
from .mcp import MISS_CODE

SCHEME = "stdio"
FOLDER = "stdio"
NAME_CHARS = re.compile(r"[^a-z0-9._-]+")
MAX_NAME = 80
STDIO_MEDIA_TYPE = "application/x-ndjson"
"""The stored answer's content type: the server's lines as NDJSON, what `show`, `view` and `scan` read."""


def server_name(command: Sequence[str]) -> str:
    """The default name of a server: its command's words without their folders (`python /abs/server.py --x` →
    `python-server.py-x`), so the same server keys alike on every machine and two servers apart."""
    words = [os.path.basename(word.rstrip("/")) or word for word in command]
    name = re.sub("-+", "-", NAME_CHARS.sub("-", "-".join(words).lower())).strip("-.")
    return name[:MAX_NAME] or "server"


def valid_name(name: str) -> str:
    """`--name` as given, checked: ValueError naming the rule for a name that would not be one folder."""
    if not name or NAME_CHARS.search(name) or name.strip(".") == "" or len(name) > MAX_NAME:
        raise ValueError(
            f"--name {name!r}: use lower-case letters, digits, '.', '_' and '-' (at most {MAX_NAME}), "
            "e.g. --name weather-server"
        )
    return name


def facts(name: str, line: bytes) -> RequestFacts:
    """A client's JSON-RPC request line as the facts the key is computed from."""
    return RequestFacts(
        method="POST",
        scheme=SCHEME,
        host=name,
        port=0,
        path="/",
        query=[],
        headers={"content-type": "application/json"},
        body=line.strip(),
        content_type="application/json",
    )


def relative_name(name: str, key: str) -> str:
    """Where a request's cassette lives, relative to the cassette folder."""
    return f"{FOLDER}/{endpoint_dir(SCHEME, name, 0, '/')}/{key}.json"


def message(line: bytes) -> dict[str, Any] | None:
    """One JSON-RPC message of a line, or None for a line that is not one (a server's stray output)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and value.get("jsonrpc") == "2.0" else None


def is_request(value: dict[str, Any]) -> bool:
    """A request waits for a response; a notification or a response to the other side does not."""
    return "method" in value and value.get("id") is not None


def is_response_to(value: dict[str, Any], rpc_id: Any) -> bool:
    return "method" not in value and ("result" in value or "error" in value) and _same_id(value.get("id"), rpc_id)


def _same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def cassette(
    key: str,
    request: dict[str, Any],
    answer: list[tuple[int, bytes]],
    recorded_with: dict[str, Any],
    keyed_with: dict[str, Any],
) -> dict[str, Any]:
    """The cassette of one request: the server's lines up to its response, each with its offset in ms."""
    events = [{"ms": ms, "text": line.decode("utf-8")} for ms, line in answer]
    response = {"status": 200, "headers": {"content-type": STDIO_MEDIA_TYPE}, **events_fields(events)}
    return new_cassette(key, request, response, recorded_with, keyed_with)


def answer_lines(cassette_data: dict[str, Any], rpc_id: Any) -> list[bytes]:
    """A recorded answer's lines to write to the client, the response carrying the id of the request it answers
    now (the recipe may have left ids out of the key); ValueError when the cassette holds no stdio answer."""
    body = cassette_data.get("response", {}).get("body")
    if cassette_data.get("response", {}).get("body_format") != "events" or not isinstance(body, list):
        raise ValueError("not a recorded stdio answer (no `events` body)")
    lines = []
    for event in body:
        text = event["text"]
        value = message(text.encode("utf-8"))
        if value is not None and "method" not in value and "id" in value:
            value["id"] = rpc_id
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n"
        lines.append(text.encode("utf-8") if text.endswith("\n") else text.encode("utf-8") + b"\n")
    return lines


def miss_line(rpc_id: Any, message_text: str, details: dict[str, Any]) -> bytes:
    """A miss as the JSON-RPC error of the request, on one line."""
    error = {"code": MISS_CODE, "message": message_text, "data": details}
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "error": error}, ensure_ascii=False).encode() + b"\n"
