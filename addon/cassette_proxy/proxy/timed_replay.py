"""Timed replay: a recorded stream (SSE, NDJSON) played back with the gaps it was recorded with."""

from __future__ import annotations

import asyncio
import http
import re
from dataclasses import dataclass

from ..core.option_table import replay_timing as parse_replay_timing  # noqa: F401 (tests read it here)
from .loopback_server import LoopbackServer


@dataclass
class TimedStream:
    status: int
    headers: dict[str, str]
    events: list[dict]
    speed: float


async def _read_request_body(reader: asyncio.StreamReader, head: bytes) -> None:
    """Read (and drop) the request body: closing a socket with unread bytes resets it, cutting off the answer."""
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    if length:
        await reader.readexactly(int(length.group(1)))
    elif re.search(rb"(?im)^transfer-encoding:.*chunked", head):
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass  # trailers


class TimedReplayServer(LoopbackServer[TimedStream]):
    """A loopback HTTP server inside the proxy that sends a recorded stream with its recorded gaps.

    mitmproxy sends a response that an addon makes in `request()` in one piece;
    only a response coming from a server can be streamed to the client over
    time. So a timed replay routes the flow here (the addon rewrites its
    destination), and this server plays the events back at their offsets.
    Each registered stream is served once, under a path that names it.
    """

    PREFIX = "/__cassette_replay__/"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode("ascii", "replace")
            await _read_request_body(reader, head)
            stream = self.take(target)
            if stream is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            await self._play(stream, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError, ValueError):
            pass  # the client went away: nothing to answer
        finally:
            writer.close()

    async def _play(self, stream: TimedStream, writer: asyncio.StreamWriter) -> None:
        try:
            reason = http.HTTPStatus(stream.status).phrase
        except ValueError:
            reason = ""
        lines = [f"HTTP/1.1 {stream.status} {reason}"]
        lines += [f"{name}: {value}" for name, value in stream.headers.items()]
        lines += ["transfer-encoding: chunked", "connection: close"]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8"))
        await writer.drain()
        loop = asyncio.get_running_loop()
        start = loop.time()
        for event in stream.events:
            await asyncio.sleep(max(0.0, start + event["ms"] / 1000 / stream.speed - loop.time()))
            data = event["text"].encode("utf-8")
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
