"""The proxy starts beside the command: the launcher binds the ports and hands them to mitmdump (proxy/listening/handover.py).

A gate holds mitmdump back (a wrapper that execs it once a file exists), so "before the proxy is ready" is a
fact in these tests, not a race: the command runs, connects and sends while no mitmdump process exists yet.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path

import pytest
import samples
from cassette_command import cassette
from cassette_proxy.launch import proxy_ca
from harness import FAKE_OPENAI_KEY, mitmdump_path

pytest_plugins = ["pytester"]

GATED_MITMDUMP = """#!{python}
# mitmdump once $CASSETTE_TEST_GATE exists: what a slow start looks like, made certain. A Python script, as
# mitmdump's own is, so the launcher finds the interpreter to make the proxy's CA with.
import os, sys, time
while not os.path.exists(os.environ["CASSETTE_TEST_GATE"]):
    time.sleep(0.02)
os.execv({python!r}, [{python!r}, {mitmdump!r}, *sys.argv[1:]])
"""

EARLY_CLIENT = """
import json, os, pathlib, socket, sys, threading
from urllib.parse import urlsplit
import openai

folder = pathlib.Path(os.environ["SSL_CERT_FILE"]).parent
gate = pathlib.Path(os.environ["CASSETTE_TEST_GATE"])
listener = urlsplit(os.environ["OPENAI_BASE_URL"])
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "early"}]}).encode()
request = (
    f"POST /v1/chat/completions HTTP/1.1\\r\\nhost: {listener.netloc}\\r\\ncontent-type: application/json\\r\\n"
    f"content-length: {len(body)}\\r\\nauthorization: Bearer {sys.argv[1]}\\r\\nconnection: close\\r\\n\\r\\n"
).encode() + body
raw = socket.create_connection((listener.hostname, listener.port))
raw.sendall(request)  # the whole request, to the reverse listener, while no mitmdump runs
forward = []
sdk = threading.Thread(target=lambda: forward.append(
    openai.OpenAI(api_key=sys.argv[1], base_url="https://api.openai.com/v1", max_retries=0)
    .chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "early"}])
    .choices[0].message.content))
sdk.start()  # through HTTPS_PROXY: its CONNECT waits for the proxy too
print("sent before mitmdump ran:", not (folder / "ready.json").exists() and not gate.exists(), flush=True)
gate.touch()
answer = b""
while chunk := raw.recv(65536):
    answer += chunk
head, _, content = answer.partition(b"\\r\\n\\r\\n")
print("reverse:", head.split(b"\\r\\n")[0].decode(), json.loads(content)["choices"][0]["message"]["content"])
sdk.join()
print("forward:", forward[0])
"""


@pytest.fixture
def gated(tmp_path, monkeypatch) -> Path:
    """A mitmdump that starts only once the returned path exists; no CA is kept yet (a fresh machine, a CI run)."""
    wrapper = tmp_path / "gated-mitmdump"
    python = proxy_ca.mitmdump_python(mitmdump_path())
    wrapper.write_text(GATED_MITMDUMP.format(python=python, mitmdump=mitmdump_path()))
    wrapper.chmod(0o755)
    gate = tmp_path / "gate"
    monkeypatch.setenv("CASSETTE_TEST_GATE", str(gate))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    return wrapper


def test_requests_sent_before_mitmdump_even_starts_are_held_and_answered(tmp_path, gated):
    """On a machine where no run made the proxy's CA yet, too."""
    samples.write(tmp_path / "cassettes", samples.chat("early", "from the cassette"))
    result = cassette(
        "run", "--mitmdump", str(gated), "--reverse", "openai=https://api.openai.com", "--",
        sys.executable, "-c", EARLY_CLIENT, FAKE_OPENAI_KEY, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "sent before mitmdump ran: True",
        "reverse: HTTP/1.1 200 OK from the cassette",
        "forward: from the cassette",
    ]
    assert "cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream" in result.stderr


PLUGIN_SUITE = """
import json, os, pathlib, socket, sys
from urllib.parse import urlsplit
import openai

# At import, during collection: the plugin has started the proxy (sessionstart) but not waited for it.
folder = pathlib.Path(os.environ["SSL_CERT_FILE"]).parent
gate = pathlib.Path(os.environ["CASSETTE_TEST_GATE"])
BEFORE = not (folder / "ready.json").exists() and not gate.exists()
client = openai.OpenAI(api_key="{key}", max_retries=0)
gate.touch()


def test_the_proxy_was_not_running_at_import():
    assert BEFORE


def test_a_call_answered_from_the_cassette():
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "early"}}])
    assert reply.choices[0].message.content == "from the cassette"
"""


def test_the_plugin_collects_while_mitmdump_starts(pytester, gated, monkeypatch):
    samples.write(pytester.path / "cassettes", samples.chat("early", "from the cassette"))
    pytester.makeini("[pytest]\ncassette = true\n")
    pytester.makepyfile(test_early=PLUGIN_SUITE.format(key=FAKE_OPENAI_KEY))
    monkeypatch.setenv("CASSETTE_MITMDUMP", str(gated))
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["cassette: replay: 1 hits, 0 misses*"])


WAITING_CLIENT = """
import os, socket, sys, time
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["HTTPS_PROXY"])
connection = socket.create_connection((proxy.hostname, proxy.port))
connection.sendall(b"CONNECT api.openai.com:443 HTTP/1.1\\r\\nhost: api.openai.com:443\\r\\n\\r\\n")
try:
    answer = connection.recv(1024)
except ConnectionResetError:
    answer = b"(reset)"
print("answered:", answer.split(b"\\r\\n")[0].decode() or "(closed)", flush=True)
time.sleep(600)  # only the launcher ends this
"""


def test_a_proxy_that_does_not_come_up_answers_nothing_and_stops_the_command(tmp_path, monkeypatch):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    # A bad value stops the addon in configure, after the command has started.
    bad = ["--mitmdump-arg=--set", "--mitmdump-arg=cassette_max_size=0"]
    result = cassette("run", *bad, "--", sys.executable, "-c", WAITING_CLIENT, cwd=tmp_path)
    assert result.returncode == 2
    assert "mitmdump exited with status" in result.stderr
    assert "cassette_max_size" in result.stderr
    assert "200" not in result.stdout


PIDS = """
import json, os, pathlib, time
from urllib.parse import urlsplit
folder = pathlib.Path(os.environ["SSL_CERT_FILE"]).parent
while not (folder / "ready.json").exists():
    time.sleep(0.02)
print(json.dumps({"pid": json.loads((folder / "ready.json").read_text())["pid"], "folder": str(folder),
                  "ports": [urlsplit(os.environ[name]).port for name in ("HTTPS_PROXY", "OPENAI_BASE_URL")]}))
"""


def test_after_a_run_no_mitmdump_no_private_folder_and_no_listener_is_left(tmp_path, monkeypatch):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    result = cassette(
        "run", "--reverse", "openai=https://api.openai.com", "--", sys.executable, "-c", PIDS, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    left = json.loads(result.stdout)
    with pytest.raises(ProcessLookupError):
        os.kill(left["pid"], 0)
    assert not Path(left["folder"]).exists()
    for port in left["ports"]:
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=10):
            pass


CA = """
import os, pathlib
print(pathlib.Path(os.environ["SSL_CERT_FILE"]).read_text().strip())
"""


@pytest.mark.parametrize("made_by", ["the launcher", "mitmdump"])
def test_the_proxy_ca_is_made_once_and_kept_private(tmp_path, monkeypatch, made_by):
    """Made before mitmdump starts, with mitmdump's Python; by mitmdump itself when that Python is not found."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    if made_by == "mitmdump":
        wrapper = tmp_path / "mitmdump"
        wrapper.write_text(f'#!/bin/sh\nexec {mitmdump_path()} "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("CASSETTE_MITMDUMP", str(wrapper))
    first = cassette("run", "--proxy-ca-only", "--", sys.executable, "-c", CA, cwd=tmp_path)
    second = cassette("run", "--proxy-ca-only", "--", sys.executable, "-c", CA, cwd=tmp_path)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.startswith("-----BEGIN CERTIFICATE-----")
    assert first.stdout == second.stdout
    kept = tmp_path / f"cassette-proxy-{os.getuid()}" / "ca"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    assert stat.S_IMODE((kept / "mitmproxy-ca.pem").stat().st_mode) == 0o600
    assert "PRIVATE KEY" not in first.stdout
