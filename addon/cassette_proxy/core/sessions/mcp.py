"""MCP (the Model Context Protocol) over streamable HTTP: what the proxy must know of its JSON-RPC messages.

An MCP client POSTs JSON-RPC messages to one URL and reads each request's answer as JSON or as an SSE stream
that carries the response among other messages; a GET opens a stream of server messages that stays open for
the whole session; `Mcp-Session-Id` (set by the answer to `initialize`) ties the requests of a session
together. Three facts follow, all read from the protocol, none from a particular SDK:

- an SSE answer to a POST is complete once every request it carries has its response (the clients stop
  reading there), not when the server closes it;
- the GET stream has no end of its own: the client leaving it at session end is its end;
- a session id is the server's: a request carrying one the server never issued (a replayed `initialize`'s)
  answers 404, and must never be sent live or saved.

Pure (no mitmproxy import): the addon and the unit tests share it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..files.stream_events import NOT_JSON, payload

SESSION_HEADER = "mcp-session-id"
PROTOCOL_HEADER = "mcp-protocol-version"
INITIALIZE = "initialize"
DISCOVER = "server/discover"
"""The stateless protocol's first request (no session): like `initialize`, it carries no MCP header yet."""

MISS_CODE = -32001
"""The JSON-RPC error code of a cassette miss: in JSON-RPC's implementation-defined server range, apart from
the codes MCP itself gives meaning (-32002 resource not found, -32042 URL elicitation)."""

SESSION_GONE_STATUS = 404
"""What a server answers a request whose `Mcp-Session-Id` it does not know (the specification's "session
not found"): an answer about this run's session ids, never a recording."""


@dataclass(frozen=True, slots=True)
class McpRequest:
    """What the proxy needs of one MCP request."""

    method: str
    """The HTTP method: POST carries messages, GET opens the server's stream, DELETE ends the session."""
    ids: tuple[Any, ...] = ()
    """The ids of the JSON-RPC requests a POST carries (notifications and responses have none to answer)."""
    initialize: bool = False
    """The POST is the session's `initialize`."""
    session: str | None = None
    """The `Mcp-Session-Id` it carries."""
    batch: bool = False
    """The POST carried a JSON array of messages (JSON-RPC batch)."""

    @property
    def keeps_session(self) -> bool:
        """It opens, feeds or ends the server's session rather than asking for an answer: `initialize`,
        notifications, responses to the server's own requests, the GET stream, DELETE. In record mode these go to
        the server even when recorded, so that the session the server holds is the one the client speaks in:
        its new requests go live with a session id the server issued, never a replayed one."""
        return self.initialize or not self.ids

    @property
    def server_stream(self) -> bool:
        """The GET stream of server messages: open until the client leaves it."""
        return self.method == "GET"


def rpc_messages(body: bytes) -> tuple[list[dict[str, Any]], bool] | None:
    """The JSON-RPC messages of a POST body and whether it was a batch; None when it is not JSON-RPC 2.0."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    batch = isinstance(value, list)
    messages = value if batch else [value]
    if not messages or not all(isinstance(m, dict) and m.get("jsonrpc") == "2.0" for m in messages):
        return None
    return messages, batch


MAX_FIRST_REQUEST_BYTES = 65536
"""A first request (`initialize`, `server/discover`) is a few KB; a bigger body without MCP's headers is no MCP,
and is not searched (a model request of megabytes would pay for it on every hit)."""

_MARKS = (SESSION_HEADER.encode(), PROTOCOL_HEADER.encode())


def mcp_request(method: str, body: bytes, fields: Iterable[tuple[bytes, bytes]]) -> McpRequest | None:
    """The MCP facts of a request (its raw header fields as mitmproxy holds them), or None when it is not MCP.

    MCP is recognised by its own marks: the `Mcp-Session-Id` or `MCP-Protocol-Version` header every request
    after the first carries, or a JSON-RPC `initialize` (the first, which carries neither). One pass over the
    raw header fields: a `Headers` lookup decodes and compares every field, twice the cost of this."""
    session: str | None = None
    marked = False
    for raw_name, raw_value in fields:
        name = raw_name.lower()
        if name in _MARKS:
            marked = True
            if name == _MARKS[0]:
                session = raw_value.decode("utf-8", "surrogateescape")
    if method != "POST":
        return McpRequest(method, session=session) if marked else None
    if not marked and (
        len(body) > MAX_FIRST_REQUEST_BYTES
        or b'"jsonrpc"' not in body
        or (b'"initialize"' not in body and b'"server/discover"' not in body)
    ):
        return None  # the cheap tests first: most requests are no MCP
    parsed = rpc_messages(body)
    if parsed is None:
        return None
    messages, batch = parsed
    ids = tuple(m["id"] for m in messages if "method" in m and m.get("id") is not None)
    initialize = any(m.get("method") == INITIALIZE for m in messages)
    if not marked and not initialize and not any(m.get("method") == DISCOVER for m in messages):
        return None
    return McpRequest(method, ids, initialize, session, batch)


def id_key(value: Any) -> str:
    """A JSON-RPC id as a set member: 1 and "1" are different ids."""
    return json.dumps(value)


def answered_ids(event: str) -> list[str]:
    """The ids (as `id_key`) of the JSON-RPC responses (results or errors) one SSE event carries."""
    value = payload(event)
    if value is NOT_JSON:
        return []
    found = []
    for message in value if isinstance(value, list) else [value]:
        if isinstance(message, dict) and "id" in message and ("result" in message or "error" in message):
            found.append(id_key(message["id"]))
    return found


def miss_answer(request: McpRequest, message: str, details: Mapping[str, Any]) -> Any:
    """A miss as the JSON-RPC error of each request the POST carries: the SDKs hand its message to the caller
    (the `mcp` Python client reads it at any status, the TypeScript SDK shows the body of a non-2xx answer)."""
    errors = [
        {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": MISS_CODE, "message": message, "data": dict(details)}}
        for rpc_id in request.ids
    ]
    return errors if request.batch else errors[0]
