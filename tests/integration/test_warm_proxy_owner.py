"""A warm proxy belongs to its user: another uid's connections are refused (the kernel names each loopback
client's owner, proxy/seal.py), requests and the control channel alike, in record and in replay; a registration
whose pid now belongs to another process is neither sent a run's control token nor signalled by `--stop`.

Tests run as root; the other user is `nobody`, a forked child (tests/support/second_user.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import samples
from cassette_command import cassette
from second_user import NOBODY, exchange_as

REQUEST = b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n"
CONTROL = (
    b"POST http://cassette.control/v1/run/start HTTP/1.1\r\nHost: cassette.control\r\n"
    b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
)


@pytest.fixture
def user(tmp_path, monkeypatch) -> Path:
    """This test's user folder; every warm proxy started in it is stopped at the end."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    samples.write(tmp_path / "cassettes", samples.chat("one", "first"))
    yield tmp_path / f"cassette-proxy-{os.getuid()}"
    cassette("serve", "--stop", cwd=tmp_path)


def detach(cwd: Path, *flags: str) -> int:
    """`cassette serve --detach FLAGS`; the warm proxy's port."""
    started = cassette("serve", "--detach", *flags, cwd=cwd)
    assert started.returncode == 0, started.stderr
    url = next(line for line in started.stdout.splitlines() if line.startswith("export HTTPS_PROXY="))
    return int(urlsplit(url.split("=", 1)[1]).port)


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_another_user_is_refused_a_warm_proxy_and_its_control_channel(tmp_path, user, mode):
    port = detach(tmp_path, "--mode", mode)
    # The same bytes from the proxy's own user get an answer (mitmproxy's 502: nothing listens on port 9).
    assert exchange_as(os.getuid(), port, REQUEST).startswith(b"HTTP/1.1 502")
    assert exchange_as(NOBODY, port, REQUEST) == b""
    assert exchange_as(NOBODY, port, CONTROL) == b""
    # The owner's runs still use it, and nothing of the stranger's reached the cassettes.
    run = cassette("run", "--mode", mode, "--", sys.executable, "-c", "print('ok')", cwd=tmp_path)
    assert "cassette: using the warm proxy" in run.stderr, run.stderr
    assert sorted(p.name for p in (tmp_path / "cassettes").rglob("*.json")) == [
        Path(samples.cassette_path(samples.chat("one", "first"))).name
    ]


def test_a_registration_whose_pid_was_reused_is_not_trusted(tmp_path, user):
    detach(tmp_path)
    (registration,) = (user / "warm").glob("*.json")
    saved = json.loads(registration.read_text())
    assert cassette("serve", "--stop", cwd=tmp_path).returncode == 0
    assert not registration.exists()
    # The serving process's pid now belongs to an unrelated process, its port to an unrelated listener.
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    heard: list[bytes] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(30)

        def listen() -> None:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                heard.append(connection.recv(65536))

        threading.Thread(target=listen, daemon=True).start()
        try:
            stale = {**saved, "pid": stranger.pid, "mitmdump_pid": stranger.pid}
            stale["url"] = f"http://127.0.0.1:{listener.getsockname()[1]}"
            registration.write_text(json.dumps(stale))
            registration.with_suffix(".lock").touch()
            run = cassette("run", "--", sys.executable, "-c", "print('ok')", cwd=tmp_path)
            assert run.returncode == 0, run.stderr
            assert "using the warm proxy" not in run.stderr
            stopped = cassette("serve", "--stop", cwd=tmp_path)
            assert "no warm proxy is running" in stopped.stdout
            assert stranger.poll() is None, "serve --stop signalled a process that is not a cassette serve"
            assert heard == [], "the run sent its control channel to whatever listens on the old port"
            assert not registration.exists()
        finally:
            stranger.send_signal(signal.SIGKILL)
            stranger.wait()
