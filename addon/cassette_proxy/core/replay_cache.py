"""Cassettes ready to answer with: parsed, validated, their body encoded and headers as wire bytes, cached."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from .cassette_file import DEFAULT_MAX_SIZE, CassetteError, decode_body, load


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

    def __init__(self, size: int = 512, root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE) -> None:
        self.size = size
        self.root = root
        """The cassette folder every cassette must resolve inside."""
        self.max_size = max_size
        self._entries: dict[str, tuple[tuple[int, int, int, int], Replay]] = {}

    def load(self, path: str) -> Replay:
        """The same errors as `load`. Callers must not mutate the cassette.

        The checks of `load` (inside the folder, a regular file, the size) run
        when the file is read; a cached entry is reused only while `path`
        still leads to the same file (device, inode, size, mtime), so a
        symlink pointed elsewhere is read, and checked, again.
        """
        status = os.stat(path)
        stamp = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
        entry = self._entries.get(path)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        replay = replay_of(Path(path), load(Path(path), self.root, self.max_size))
        if len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]
        self._entries[path] = (stamp, replay)
        return replay
