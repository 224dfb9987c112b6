"""A burst of connections: a suite's workers opening hundreds at once all get answers.

mitmproxy listens with asyncio's backlog of 100; the addon raises it once the
proxy listens (proxy/listening/listen_backlog.py). `ss` shows a listening socket's
backlog as its Send-Q.
"""

from __future__ import annotations

import asyncio
import subprocess

BURST = 500


def listen_backlog(port: int) -> int:
    lines = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    [line] = lines
    return int(line.split()[2])  # State Recv-Q Send-Q ...: Send-Q is the backlog of a listening socket


def test_the_proxy_listens_with_a_deep_backlog(start_proxy):
    proxy = start_proxy(cassette_mode="replay")
    assert listen_backlog(proxy.port()) >= 1024


async def one_request(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        # Outside cassette_hosts and not loopback: replay mode answers 403 cassette_offline itself.
        writer.write(b"GET http://burst.invalid/ HTTP/1.1\r\nhost: burst.invalid\r\nconnection: close\r\n\r\n")
        return await reader.read()
    finally:
        writer.close()


async def burst(port: int) -> list:
    return await asyncio.gather(*(one_request(port) for _ in range(BURST)), return_exceptions=True)


def test_500_simultaneous_connections_are_all_answered(start_proxy):
    proxy = start_proxy(cassette_mode="replay")
    answers = asyncio.run(burst(proxy.port()))
    failed = [a for a in answers if not isinstance(a, bytes) or not a.startswith(b"HTTP/1.1 403")]
    assert failed == []
    assert all(b"cassette_offline" in a for a in answers)
