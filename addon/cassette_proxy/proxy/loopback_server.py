"""A loopback server inside the proxy that a replayed flow is routed to, and the one-time paths it serves.

mitmproxy sends a response an addon makes in `request()` in one piece, and it
can finish a WebSocket handshake only with a server. So a stream replayed with
its timing (timed_replay.py) and a WebSocket session (session_server.py) are
played by a server of ours on 127.0.0.1: the addon rewrites the flow's
destination to it, under a path that names what to play. Paths are random, so
no other local process can take a play meant for a client, and each is served
once. The seal lets a replayed flow reach this port and no other.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Generic, TypeVar

Item = TypeVar("Item")


class LoopbackServer(Generic[Item]):
    """Subclasses name their `PREFIX` and serve a connection in `_serve`, taking what to play with `take`."""

    PREFIX = "/__cassette__/"

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        """What each registered path plays, until it is taken."""
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

    def register(self, item: Item) -> str:
        """The path under which this server plays `item`, once."""
        path = f"{self.PREFIX}{secrets.token_hex(16)}"
        self.items[path] = item
        return path

    def take(self, path: str) -> Item | None:
        return self.items.pop(path, None)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError
