"""The cassette file: where it lives, what it holds, and how it is written safely.

One pretty-printed JSON file per interaction, at
`<cassette_dir>/<host>[_<port>]/<path segments>/<key>.json`, so that a pull
request shows which endpoint changed and a lookup is a single `open()`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from .key import DEFAULT_PORTS, parse_json_body

FORMAT_VERSION = 2
"""2 adds `keyed_with` (the settings the key was computed under) and a multipart request's `content_type`."""
READABLE_VERSIONS = (1, 2)
"""A format-1 cassette replays as before: its key was computed by recipe 1, and `cassette rekey` carries it over."""

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

_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9._-]+")
_KEY = re.compile(r"^[0-9a-f]{32}$")


class CassetteError(Exception):
    """A cassette file exists but cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def _segment(text: str) -> str:
    """A path segment safe on every file system; never `.` or `..`, so it cannot leave the folder."""
    safe = _SAFE_SEGMENT.sub("_", text).strip(".")
    return safe or "_"


def relative_path(scheme: str, host: str, port: int, path: str, key: str) -> PurePosixPath:
    """Where the cassette of a request lives, relative to the cassette folder."""
    return PurePosixPath(relative_name(scheme, host, port, path, key))


def relative_name(scheme: str, host: str, port: int, path: str, key: str) -> str:
    """`relative_path` as a `/`-separated string: the hit path builds one for every request, and a
    string join costs a fraction of a `pathlib` one."""
    if not _KEY.match(key):
        raise ValueError(f"not a cassette key: {key!r}")
    return f"{_endpoint_dir(scheme, host, port, path)}/{key}.json"


@functools.lru_cache(maxsize=1024)
def _endpoint_dir(scheme: str, host: str, port: int, path: str) -> str:
    """The folder of one endpoint's cassettes; cached, since a suite calls few endpoints many times."""
    host_dir = _segment(host.lower())
    if DEFAULT_PORTS.get(scheme) != port:
        host_dir += f"_{port}"
    segments = [_segment(s) for s in path.split("?", 1)[0].split("/") if s]
    return "/".join([host_dir, *segments])


def repeat_path(first: str, n: int) -> str:
    """The n-th recording of one request (`cassette_repeats=sequence`): `<key>.json`, then `<key>.2.json`, …"""
    return first if n == 1 else f"{first.removesuffix('.json')}.{n}.json"


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


def stored_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Response headers worth keeping, lower-cased; repeated ones joined with ", " as HTTP allows."""
    kept: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        if name not in DROPPED_HEADERS:
            kept[name] = f"{kept[name]}, {value}" if name in kept else value
    return kept


def new_cassette(key: str, request: dict, response: dict, recorded_with: dict, keyed_with: dict | None = None) -> dict:
    return {
        "cassette_format": FORMAT_VERSION,
        "key": key,
        **({"keyed_with": keyed_with} if keyed_with is not None else {}),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "recorded_with": recorded_with,
        "request": request,
        "response": response,
    }


def _json_bytes(value: Any, indent: int | None = None) -> bytes:
    """UTF-8 JSON; with escapes instead when a string holds a lone surrogate (`"\\ud800"` parses to one)."""
    try:
        return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, indent=indent).encode("ascii")


def dumps(cassette: dict) -> bytes:
    return _json_bytes(cassette, indent=2) + b"\n"


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temp file in the same folder and rename: readers see the old file or the new, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


STALE_TEMP_SECONDS = 60
"""A temp file older than this was left by a killed writer; younger ones may belong to a live proxy sharing the folder."""


def remove_stale_temp_files(root: Path, now: float | None = None) -> list[Path]:
    """Delete the `.<name>.*.tmp` files a killed writer left behind; lookups never read them anyway."""
    now = time.time() if now is None else now
    removed = []
    for tmp in root.rglob(".*.json.*.tmp") if root.is_dir() else ():
        try:
            if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed


BODY_FORMATS = frozenset({"json", "text", "base64", "events"})

_REQUIRED = {
    "key": str,
    "request": dict,
    "response": dict,
}


def load(path: Path) -> dict:
    """Read and validate a cassette; raises CassetteError naming the problem, FileNotFoundError if absent."""
    raw = path.read_bytes()
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


def default_dir() -> Path:
    """The cassette folder the `cassette` commands use unless told: the proxy's own default."""
    return Path(os.environ.get("CASSETTE_DIR", "cassettes"))


def cassette_files(root: Path) -> list[Path]:
    """The cassette files under a folder, sorted; temp files of an interrupted write (`.name.tmp`) are not cassettes."""
    return sorted(p for p in root.rglob("*.json") if p.is_file() and not p.name.startswith("."))


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


class Replay(NamedTuple):
    """A cassette ready to answer with: parsed, its body encoded, its headers as wire fields."""

    cassette: dict
    body: bytes
    header_fields: tuple[tuple[bytes, bytes], ...]
    """The stored response headers plus `content-length`, as (name, value) bytes in mitmproxy's `Headers` form."""


def replay_of(path: Path, cassette: dict) -> Replay:
    response = cassette["response"]
    try:
        body = decode_body(response.get("body_format", "text"), response.get("body", ""))
    except (ValueError, TypeError, AttributeError) as e:
        raise CassetteError(path, f"response.body does not match its body_format: {e}") from None
    try:
        fields = [(_wire(name), _wire(value)) for name, value in response.get("headers", {}).items()]
    except UnicodeEncodeError as e:
        raise CassetteError(path, f"response.headers hold a character HTTP cannot carry: {e}") from None
    fields.append((b"content-length", str(len(body)).encode()))
    return Replay(cassette, body, tuple(fields))


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class ReplayCache:
    """Cassettes already answered in this run, ready to answer with again (see `Replay`).

    A suite often sends the same request many times (a fixture per test); the
    cache saves re-parsing the file each time. An entry is used only while the
    file's inode, size and modification time are unchanged, so a cassette
    rewritten by another proxy (atomic rename: a new inode) is read again.
    """

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: dict[str, tuple[tuple[int, int, int], Replay]] = {}

    def load(self, path: str) -> Replay:
        """The same errors as `load`. Callers must not mutate the cassette."""
        status = os.stat(path)
        stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
        entry = self._entries.get(path)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        replay = replay_of(Path(path), load(Path(path)))
        if len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
        self._entries[path] = (stamp, replay)
        return replay
