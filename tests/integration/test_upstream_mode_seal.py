"""The seal through an upstream proxy (`--mode upstream:`), with a real mitmdump: a local listener stands in for the
upstream proxy and records every connection and every byte it gets. In replay, a raw CONNECT to a cassette host (on
its own port or another, with bytes that are not TLS) or to a host outside the scope never reaches it; an allowed
host does, so the listener would have seen a leak. And mitmdump refuses to start replay in a mode it cannot seal."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest
from harness import ADDON, Proxy, mitmdump_path

OPAQUE = b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02"


class Listener:
    """A TCP server on 127.0.0.1 that answers nothing and keeps what each connection sent."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.settimeout(2)
            data = b""
            try:
                while b"\r\n\r\n" not in data and (chunk := conn.recv(4096)):
                    data += chunk
            except OSError:
                pass
            self.received.append(data)
            conn.close()

    def close(self) -> None:
        self.server.close()


def tunnel(port: int, target: str, payload: bytes) -> bytes:
    """CONNECT `target` through the proxy, then send `payload` into the tunnel; what came back, all of it."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        answer = s.recv(4096)
        if b" 200 " in answer.split(b"\r\n", 1)[0]:
            s.sendall(payload)
            try:
                while chunk := s.recv(4096):
                    answer += chunk
            except OSError:
                pass
    return answer


@pytest.fixture
def listener():
    fake = Listener()
    yield fake
    fake.close()


def test_through_an_upstream_proxy_only_allowed_targets_reach_it(tmp_path, cassette_dir, listener):
    proxy = Proxy(
        tmp_path / "proxy", cassette_dir, modes=[f"upstream:http://127.0.0.1:{listener.port}"],
        cassette_mode="replay", cassette_allow_hosts="allowed.example", connection_strategy="lazy",
    ).start()  # fmt: skip
    try:
        port = next(iter(proxy.listen.values()))
        # Bytes that are neither TLS nor HTTP: mitmproxy passes them through as TCP, which no hook of the addon sees.
        for target in ("api.openai.com:22", "api.openai.com:443", "evil.example:443"):
            started = time.monotonic()
            tunnel(port, target, OPAQUE)
            assert time.monotonic() - started < 10  # refused at once, not left hanging
        assert listener.received == []  # not even a connection
        tunnel(port, "allowed.example:443", OPAQUE)
    finally:
        proxy.stop()
    assert [data.split(b"\r\n", 1)[0] for data in listener.received] == [b"CONNECT allowed.example:443 HTTP/1.1"]
    log = proxy.log.read_text()
    for refused in (
        "api.openai.com:22, a cassette host",
        "api.openai.com:443, a cassette host",
        "evil.example:443, outside",
    ):
        assert f"refused an upstream connection to {refused}" in log
    assert "through the upstream proxy 127.0.0.1:" in log


@pytest.mark.parametrize("mode", ["dns", "wireguard"])
def test_replay_does_not_start_in_a_mode_it_cannot_seal(tmp_path, mode):
    args = [mitmdump_path(), "--listen-host", "127.0.0.1", "--mode", f"{mode}@0", "--set", f"confdir={tmp_path}",
            "-s", str(ADDON), "--set", "cassette_mode=replay"]  # fmt: skip
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert f"cassette_mode=replay cannot run in mitmproxy's mode '{mode}@0'" in result.stdout + result.stderr
