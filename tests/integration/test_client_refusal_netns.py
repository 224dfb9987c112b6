"""Only local clients, proved with a real non-loopback peer: mitmdump runs in a network namespace of this test's
own (`unshare -n`, root), where a second address on `lo` plays another machine. The traffic never leaves it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness import ADDON, mitmdump_path

SCENARIO = r"""
import json, os, socket, subprocess, sys, time
mitmdump, addon, folder, allow = sys.argv[1:5]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
subprocess.run(["ip", "addr", "add", "10.77.0.2/32", "dev", "lo"], check=True)
ready = os.path.join(folder, "ready.json")
args = [mitmdump, "--listen-host", "0.0.0.0", "-p", "0", "-s", addon, "--set", f"confdir={folder}/confdir",
        "--set", f"cassette_dir={folder}/cassettes", "--set", f"cassette_ready_file={ready}"]
if allow:
    args += ["--set", f"cassette_allow_clients={allow}"]
log = open(os.path.join(folder, "mitmdump.log"), "w")
proxy = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
try:
    for _ in range(600):
        if os.path.exists(ready):
            break
        time.sleep(0.05)
    port = json.load(open(ready))["listen"][0]["port"]
    outcome = {}
    for source in ("127.0.0.1", "10.77.0.2"):
        with socket.create_connection(("10.77.0.2", port), timeout=10, source_address=(source, 0)) as s:
            s.sendall(b"GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n")
            data = b""
            try:
                while chunk := s.recv(4096):
                    data += chunk
            except OSError:
                pass
        outcome[source] = data.split(b"\r\n", 1)[0].decode("latin-1")
    print(json.dumps(outcome))
finally:
    proxy.terminate()
    proxy.wait(15)
"""


def run_in_namespace(tmp_path: Path, allow: str = "") -> dict:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.fail("this test needs root, unshare and ip (iproute2): CI runs the suite as root on Debian")
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", SCENARIO, mitmdump_path(), str(ADDON), str(tmp_path), allow],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr + (tmp_path / "mitmdump.log").read_text()
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_client_from_another_address_is_refused_and_the_log_says_how_to_allow_it(tmp_path):
    outcome = run_in_namespace(tmp_path)
    assert outcome["127.0.0.1"].startswith("HTTP/1.1 ")  # served (whatever the answer: port 9 is closed)
    assert outcome["10.77.0.2"] == ""  # the connection was dropped before any answer
    log = (tmp_path / "mitmdump.log").read_text()
    assert "refused a client from 10.77.0.2" in log and "cassette_allow_clients" in log


def test_a_client_from_an_allowed_network_is_served(tmp_path):
    outcome = run_in_namespace(tmp_path, allow="10.77.0.0/24")
    assert outcome["10.77.0.2"].startswith("HTTP/1.1 ")
