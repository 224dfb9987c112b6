"""Loopback by address, not by name, proved where names really resolve elsewhere: mitmdump runs in a named network
namespace of this test's own (`ip netns`, root) whose hosts file points `exfil.localhost` at a second address on `lo`
(another machine, as far as the proxy can tell) and whose resolver is a UDP listener that records every query.

In replay mode a name that only looks local is refused as `cassette_offline` and never resolved; the controls (the
same kinds of names, allowed with `cassette_allow_hosts`) reach the listener and the resolver, so the refusals are
not an accident of the namespace. The traffic never leaves it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from harness import ADDON, mitmdump_path

ELSEWHERE, RESOLVER = "10.77.0.3", "10.77.0.4"

SCENARIO = r"""
import json, os, socket, subprocess, sys, threading, time
mitmdump, addon, folder, elsewhere, resolver = sys.argv[1:6]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
for address in (elsewhere, resolver):
    subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)

reached, queried = [], []

def serve_http():
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((elsewhere, 80))
    server.listen()
    while True:
        conn, _ = server.accept()
        reached.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        conn.close()

def serve_dns():
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((resolver, 53))
    while True:
        packet, peer = udp.recvfrom(512)
        labels, at = [], 12
        while packet[at]:
            labels.append(packet[at + 1 : at + 1 + packet[at]].decode("ascii", "replace"))
            at += 1 + packet[at]
        queried.append(".".join(labels).lower())
        question = packet[12 : at + 5]
        udp.sendto(packet[:2] + b"\x81\x83\x00\x01\x00\x00\x00\x00\x00\x00" + question, peer)  # NXDOMAIN

for target in (serve_http, serve_dns):
    threading.Thread(target=target, daemon=True).start()

ready, report = os.path.join(folder, "ready.json"), os.path.join(folder, "report.json")
args = [mitmdump, "--listen-host", "127.0.0.1", "-p", "0", "-s", addon, "--set", f"confdir={folder}/confdir",
        "--set", f"cassette_dir={folder}/cassettes", "--set", f"cassette_ready_file={ready}",
        "--set", f"cassette_report={report}", "--set", "cassette_mode=replay",
        "--set", "cassette_allow_hosts=allowed.localhost", "--set", "cassette_allow_hosts=resolved.example"]
log = open(os.path.join(folder, "mitmdump.log"), "w")
proxy = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
try:
    for _ in range(600):
        if os.path.exists(ready):
            break
        time.sleep(0.05)
    port = json.load(open(ready))["listen"][0]["port"]
    statuses = {}
    for host in ("exfil.localhost", "db", "leak.localhost", "allowed.localhost", "resolved.example"):
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(f"GET http://{host}/collect HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        statuses[host] = [int(head.split(b" ", 2)[1]), body.decode("utf-8", "replace")]
finally:
    proxy.terminate()
    proxy.wait(15)
print(json.dumps({"statuses": statuses, "reached": reached, "queried": queried, "report": json.load(open(report))}))
"""


@pytest.fixture
def namespace():
    """A named network namespace (`seal-…`) whose /etc/hosts and /etc/resolv.conf are this test's own."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.fail("this test needs root and ip (iproute2): CI runs the suite as root on Debian")
    name = f"seal-loopback-{uuid.uuid4().hex[:8]}"
    files = Path("/etc/netns") / name
    files.mkdir(parents=True)
    (files / "hosts").write_text(f"127.0.0.1 localhost\n{ELSEWHERE} exfil.localhost allowed.localhost\n")
    (files / "resolv.conf").write_text(f"nameserver {RESOLVER}\noptions timeout:1 attempts:1\n")
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False)
        shutil.rmtree(files, ignore_errors=True)


def test_names_that_only_look_local_are_refused_offline_and_never_resolved(tmp_path, namespace):
    result = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", SCENARIO, mitmdump_path(), str(ADDON), str(tmp_path),
         ELSEWHERE, RESOLVER],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + (tmp_path / "mitmdump.log").read_text()
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    statuses, report = outcome["statuses"], outcome["report"]
    for refused in ("exfil.localhost", "db", "leak.localhost"):
        status, body = statuses[refused]
        assert status == 403 and "cassette_offline" in body, (refused, statuses)
    # The controls: the hosts entry does point elsewhere, and the proxy does ask this resolver for names it resolves.
    assert statuses["allowed.localhost"][0] == 200
    assert outcome["reached"] == ["GET /collect HTTP/1.1"]
    assert "resolved.example" in outcome["queried"]
    assert not {"exfil.localhost", "db", "leak.localhost"} & set(outcome["queried"]), outcome["queried"]
    assert sorted(entry["host"] for entry in report["offline"]) == ["db", "exfil.localhost", "leak.localhost"]
    assert report["passthrough_hosts"] == {"allowed.localhost": 1, "resolved.example": 1}
    assert report["counts"]["offline"] == 3  # what `--strict` fails on
