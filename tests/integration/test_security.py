"""Security: where the proxy listens, who can read its CA key, where request data can make it write, what it logs."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import subprocess
from pathlib import Path

import httpx
import pytest
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, ROOT, mitmdump_path, stop, wait_for_file

SECRETS = (FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY)


def test_serve_listens_on_127_0_0_1_unless_told_otherwise(tmp_path):
    """scripts/serve, as the README starts the proxy; mitmdump alone would listen on every interface."""
    ready = tmp_path / "proxy.ready"
    venv = Path(mitmdump_path()).parent.parent.parent  # <venv>/proxy/bin/mitmdump
    log = tmp_path / "serve.log"
    process = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "serve"), "-p", "0", "--set", f"confdir={tmp_path / 'confdir'}",
         "--set", f"cassette_ready_file={ready}"],
        env={**os.environ, "VENV": str(venv), "CASSETTE_DIR": str(tmp_path / "cassettes")},
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        info = wait_for_file(ready, process, log)
        assert {entry["host"] for entry in info["listen"]} == {"127.0.0.1"}
        port = info["listen"][0]["port"]
        with pytest.raises(OSError), socket.create_connection((outside_address(), port), timeout=2):
            pass
    finally:
        stop(process)


def outside_address() -> str:
    """This machine's address on its network (not loopback): what another machine would connect to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the kernel only picks the route
        address = probe.getsockname()[0]
    assert not address.startswith("127.")
    return address


def test_ca_private_key_is_readable_by_its_owner_only(start_proxy, cassette_dir):
    proxy = start_proxy(fresh_ca=True)  # the CA mitmproxy makes for this proxy, not the tests' shared copy
    for name in ("mitmproxy-ca.pem", "mitmproxy-ca.p12"):
        mode = stat.S_IMODE((proxy.confdir / name).stat().st_mode)
        assert mode == 0o600, f"{name} has mode {mode:o}"
    assert not stat.S_IMODE(proxy.confdir.stat().st_mode) & (stat.S_IWGRP | stat.S_IWOTH)


def raw_request(proxy, request_line: str) -> bytes:
    """A plain-HTTP proxy request sent byte for byte: no client normalises the path first."""
    with socket.create_connection(("127.0.0.1", proxy.port()), timeout=30) as conn:
        conn.sendall(
            f"{request_line}\r\nHost: api.openai.com\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}".encode()
        )
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/../../../../escaped",
        "/v1/..%2f..%2f..%2fescaped",
        "/v1/%2e%2e/%2e%2e/%2e%2e/escaped",
        "/v1/./.././../escaped",
        "//escaped/../../x",
        "/v1/\\..\\..\\escaped",
    ],
)
def test_request_paths_cannot_leave_the_cassette_folder(start_proxy, http_upstream, tmp_path, cassette_dir, path):
    proxy = start_proxy(http_upstream, cassette_mode="record")
    assert raw_request(proxy, f"POST http://api.openai.com{path} HTTP/1.1").startswith(b"HTTP/1.1 200")
    report = proxy.stop()
    assert report["counts"]["recorded"] == 1
    (written,) = [p for p in cassette_dir.rglob("*.json")]
    assert written.resolve().is_relative_to(cassette_dir.resolve())
    assert not any("escaped" in p.name for p in tmp_path.rglob("*") if not p.is_relative_to(cassette_dir))


def test_secrets_never_reach_cassettes_reports_or_logs(start_proxy, upstream, cassette_dir):
    # flow_detail=0: mitmdump's own per-flow lines print each URL as sent, `?key=` included (see docs/guarantees.md).
    recorder = start_proxy(upstream, cassette_mode="record", flow_detail=0)
    trust = ssl.create_default_context(cafile=str(recorder.ca_bundle))
    body = {"model": "m", "messages": [{"role": "user", "content": "keep it secret"}]}
    with httpx.Client(proxy=recorder.url, verify=trust, timeout=60) as http:
        http.post(
            "https://api.openai.com/v1/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {FAKE_OPENAI_KEY}"},
        )
        http.post("https://api.anthropic.com/v1/messages", json=body, headers={"x-api-key": FAKE_ANTHROPIC_KEY})
        http.post(
            f"https://generativelanguage.googleapis.com/v1/g?key={FAKE_OPENAI_KEY}",
            json=body,
        )
    recorder.stop()
    replay = start_proxy(upstream, cassette_mode="replay")
    with httpx.Client(
        proxy=replay.url, verify=ssl.create_default_context(cafile=str(replay.ca_bundle)), timeout=60
    ) as http:
        missed = http.post(f"https://generativelanguage.googleapis.com/v1/o?key={FAKE_ANTHROPIC_KEY}", json=body)
    assert missed.status_code == 409
    replay.stop()
    written = [p.read_text() for p in cassette_dir.rglob("*.json")]
    assert len(written) == 3
    texts = [*written, missed.text, recorder.report_path.read_text(), replay.report_path.read_text(),
             recorder.log_text(), replay.log_text()]  # fmt: skip
    assert "cassette miss" in replay.log_text()
    for secret in SECRETS:
        assert not [text for text in texts if secret[:12] in text]
