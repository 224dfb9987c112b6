"""A small HTTP/1.1 load client: keep-alive connections, one request in flight on each.

Raw asyncio streams rather than an HTTP library, so that the client costs as
little as possible; case (d) of the benchmark (the fake upstream, no proxy)
shows what it still costs.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    requests: int
    seconds: float
    latencies_ms: tuple[float, ...]
    cpu_ms: float | None = None
    """CPU time the system under test spent per request, when the caller measured it."""

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p99(self) -> float:
        return self.percentile(99)


class BadResponse(Exception):
    """The system under test answered something else than a 200: the figures would mean nothing."""


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = next((int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), None)
    if length is None:
        raise BadResponse(f"response without content-length: {lines[0]}")
    return status, await reader.readexactly(length)


async def _connection(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    requests: Sequence[bytes],
    start: int,
    count: int,
    latencies: list,
) -> None:
    reader, writer = connection
    try:
        for i in range(start, start + count):
            sent = time.perf_counter()
            writer.write(requests[i % len(requests)])
            status, body = await read_response(reader)
            latencies.append((time.perf_counter() - sent) * 1000)
            if status != 200:
                raise BadResponse(f"status {status}: {body[:300]!r}")
    finally:
        writer.close()


async def _run(host: str, port: int, requests: Sequence[bytes], total: int, concurrency: int) -> Measurement:
    latencies: list[float] = []
    share = total // concurrency
    # Connect first: connection set-up is not what is measured (and a small listen backlog would add SYN retries).
    connections = [await asyncio.open_connection(host, port) for _ in range(concurrency)]
    began = time.perf_counter()
    await asyncio.gather(
        *(_connection(connection, requests, c * share, share, latencies) for c, connection in enumerate(connections))
    )
    return Measurement(share * concurrency, time.perf_counter() - began, tuple(latencies))


def measure(host: str, port: int, requests: Sequence[bytes], total: int, concurrency: int = 1) -> Measurement:
    """Send `total` requests (cycling through `requests`) over `concurrency` keep-alive connections."""
    return asyncio.run(_run(host, port, requests, total, concurrency))


def answer(host: str, port: int, request: bytes) -> tuple[int, bytes]:
    """One request on a fresh connection: the probe used to tell when a process is ready."""

    async def once() -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(request)
            return await read_response(reader)
        finally:
            writer.close()

    return asyncio.run(once())
