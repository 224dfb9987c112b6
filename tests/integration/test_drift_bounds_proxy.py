"""`cassette drift` through its real scratch proxy against an upstream that never ends: an SSE chunk every 50 ms.
`--timeout` (silence) never fires on it; `--max-time` ends the request with a result, and SIGTERM, SIGINT or
SIGHUP (a CI step's timeout, Ctrl-C, a closed terminal) stops drift's mitmdump and still writes the report.

The upstream is a thread of this process, reached through the test-only redirect addon; it streams for at most
60 s, so an unbounded drift would end (with the wrong result) rather than hang the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cassette_command import CASSETTE, redirect_args
from cassette_proxy.cli import main
from samples import chat, write

FAKE_KEY = "sk-fake-drift-endless-0123456789"
STREAM_FOR = 60.0


class EndlessUpstream:
    """Answers every request with an SSE stream that goes on (a chunk every 50 ms); counts the requests."""

    certificate = None

    def __init__(self) -> None:
        self.asked = threading.Event()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                upstream.asked.set()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                until = time.monotonic() + STREAM_FOR
                try:
                    while time.monotonic() < until:
                        chunk = b'data: {"choices": [{"delta": {"content": "more"}}]}\n\n'
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                        time.sleep(0.05)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def upstream():
    endless = EndlessUpstream()
    yield endless
    endless.stop()


@pytest.fixture
def folder(tmp_path) -> Path:
    write(tmp_path / "cassettes", chat("Stream forever", "a finite answer"))
    return tmp_path / "cassettes"


def test_an_endless_stream_ends_at_max_time_with_a_result(upstream, folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(upstream))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    report = tmp_path / "drift.json"
    code = main(["drift", "--dir", str(folder), "--timeout", "30", "--max-time", "2", "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 3, out  # not checked: no verdict on an answer never read to its end
    [result] = json.loads(report.read_text())["results"]
    assert result["outcome"] == "error"
    assert result["message"] == ("the answer was still arriving after --max-time 2 s (an endless stream?): cut off, "
                                 "not compared")  # fmt: skip


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie waiting for a reaper has ended


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_drifts_proxy_and_the_report_is_written(upstream, folder, tmp_path, signum):
    report, markdown = tmp_path / "drift.json", tmp_path / "drift.md"
    upstream.asked.clear()
    env = {**os.environ, "CASSETTE_MITMDUMP_ARGS": redirect_args(upstream), "OPENAI_API_KEY": FAKE_KEY}
    env.pop("CASSETTE_MODE", None)
    command = subprocess.Popen(
        [CASSETTE, "drift", "--dir", str(folder), "--report", str(report), "--markdown", str(markdown)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert upstream.asked.wait(60), "drift never sent its request"
        [mitmdump] = children(command.pid)
        command.send_signal(signum)
        out, err = command.communicate(timeout=60)
    finally:
        if command.poll() is None:
            command.kill()
    assert command.returncode == 128 + signum, err
    assert not running(mitmdump)
    assert f"cassette: drift stopped by {signum.name}" in err
    [result] = json.loads(report.read_text())["results"]
    assert (result["outcome"], result["message"]) == (
        "error", f"not checked: cassette drift was stopped by {signum.name} before its answer was compared")  # fmt: skip
    assert "not checked" in markdown.read_text() and FAKE_KEY not in out + err + markdown.read_text()
