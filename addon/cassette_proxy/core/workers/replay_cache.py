"""Cassettes ready to answer with: parsed, validated, their body encoded and headers as wire bytes, cached."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from ..files.cassette_file import decode_body, parse
from ..files.safe_read import DEFAULT_MAX_SIZE, CassetteError, read_limited


class Replay(NamedTuple):
    """A cassette ready to answer with: parsed, its body encoded, its headers as wire fields."""

    cassette: dict[str, Any]
    """{"response": the cassette's response without its body (kept for a stream: timed replay plays its events)}.
    No more is kept: a run holds hundreds of these, and every parsed object kept is work for the GC."""
    body: bytes
    header_fields: tuple[tuple[bytes, bytes], ...]
    """The stored response headers plus `content-length`, as (name, value) bytes in mitmproxy's `Headers` form."""


def replay_of(path: Path | str, cassette: dict[str, Any]) -> Replay:
    if "session" in cassette:  # its 101 alone would be a hit that serves nothing
        raise CassetteError(
            path,
            "holds a recorded WebSocket session, and this request is not a WebSocket upgrade (no `upgrade: "
            "websocket` header): connect with a WebSocket client, or delete the file to record this request",
        )
    response = cassette["response"]
    try:
        body = decode_body(response.get("body_format", "text"), response.get("body", ""))
    except (ValueError, TypeError, AttributeError) as e:
        raise CassetteError(path, f"response.body does not match its body_format: {e}") from None
    kept = {
        name: value for name, value in response.items() if name != "body" or response.get("body_format") == "events"
    }
    return Replay({"response": kept}, body, wire_fields(path, response.get("headers", {}), len(body)))


def wire_fields(path: Path | str, headers: dict[str, str], body_length: int) -> tuple[tuple[bytes, bytes], ...]:
    try:
        fields = [(_wire(name), _wire(value)) for name, value in headers.items()]
    except UnicodeEncodeError as e:
        raise CassetteError(path, f"response.headers hold a character HTTP cannot carry: {e}") from None
    fields.append((b"content-length", str(body_length).encode()))
    return tuple(fields)


def _wire(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


Stamp = tuple[int, int, int, int]
"""(device, inode, size, mtime_ns): a cassette rewritten by another proxy (atomic rename: a new inode) differs,
and so does a symlink pointed at another file, which is then read, and checked, again."""


def stamp_of(status: os.stat_result) -> Stamp:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


class ReplayCache:
    """Cassettes already answered in this run, ready to answer with again (see `Replay`).

    A suite often sends the same request many times (a fixture per test); the
    cache saves re-parsing the file each time. An entry is used only while the
    file's inode, size and modification time are unchanged, so a cassette
    rewritten by another proxy (atomic rename: a new inode) is read again.
    Bounded in entries and in body bytes: a body above a quarter of `max_bytes`
    is not kept, so a few huge cassettes cannot pin gigabytes for the whole run.
    """

    def __init__(
        self,
        size: int = 512,
        max_bytes: int = 256 * 1024 * 1024,
        root: Path | None = None,
        max_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.root = root
        """The cassette folder every cassette must resolve inside (`load`'s checks run on every read)."""
        self.max_size = max_size
        self.bytes = 0
        self._entries: dict[str, tuple[Stamp, Replay]] = {}

    def configure(self, root: Path, max_size: int, size: int) -> None:
        """The run's folder and size limit; entries read under another folder or limit are dropped."""
        if (root, max_size) != (self.root, self.max_size):
            self._entries.clear()
            self.bytes = 0
        self.root, self.max_size, self.size = root, max_size, size

    def load(self, path: str, status: os.stat_result | None = None) -> Replay:
        """The same errors as `load`. Callers must not mutate the cassette. `status`: the file's, if just stat-ed."""
        stamp = stamp_of(status or os.stat(path))
        replay = self.lookup(path, stamp)
        if replay is None:
            # Inside the folder, a regular file, within the size limit: checked on the open file (cassette_file).
            raw = read_limited(path, self.root, self.max_size)
            # `path` as it came, a string: a `Path` per first sight cost more than the parse (pathlib is slow).
            replay = replay_of(path, parse(path, raw))
            self.store(path, stamp, replay)
        return replay

    def __contains__(self, path: str) -> bool:
        return path in self._entries

    def lookup(self, path: str, stamp: Stamp) -> Replay | None:
        entry = self._entries.get(path)
        return entry[1] if entry is not None and entry[0] == stamp else None

    def store(self, path: str, stamp: Stamp, replay: Replay) -> None:
        self._drop(path)
        if len(replay.body) > self.max_bytes // 4:
            return
        while self._entries and (len(self._entries) >= self.size or self.bytes + len(replay.body) > self.max_bytes):
            self._drop(next(iter(self._entries)))
        self._entries[path] = (stamp, replay)
        self.bytes += len(replay.body)

    def _drop(self, path: str) -> None:
        entry = self._entries.pop(path, None)
        if entry is not None:
            self.bytes -= len(entry[1].body)
