"""`cassette drift` ends whatever the provider does: an answer is bounded in total time and size as well as in
silence (launch/resend.py), a signal stops the scratch proxy and the report is still written (launch/drift_run.py).

`send` talks to a local stand-in over plain HTTP in absolute form, as it talks to the proxy; the endless stream
sends a chunk every 50 ms for at most 30 s, so an unbounded read would end with an answer (and fail the test)
rather than hang it. tests/integration/test_drift_bounds_proxy.py drives the real proxy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.keys.key import RequestFacts
from cassette_proxy.launch import drift_run
from cassette_proxy.launch.resend import AnswerLimit, Received, send
from samples import chat, write

ENDLESS_FOR = 30.0
FAKE_KEY = "sk-fake-drift-bounds-0123456789"


class Endless(BaseHTTPRequestHandler):
    """`/endless`: an SSE chunk every 50 ms (for ENDLESS_FOR seconds, then the end); anything else: a small JSON."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if not self.path.endswith("/endless"):
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        until = time.monotonic() + ENDLESS_FOR
        try:
            while time.monotonic() < until:
                chunk = b'data: {"delta": "more"}\n\n'
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
                time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client gave up: what the bound is for

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def facts(path: str) -> RequestFacts:
    return RequestFacts("POST", "http", "api.example.test", 80, path, [], {}, b"{}", "application/json")


def test_an_endless_stream_is_cut_off_at_max_time(server):
    with pytest.raises(AnswerLimit, match=r"still arriving after --max-time 0.5 s"):
        send(server, Path("unused.pem"), facts("/v1/endless"), {"content-type": "application/json"}, 5.0,
             max_time=0.5)  # fmt: skip


def test_an_answer_over_max_bytes_is_cut_off(server):
    with pytest.raises(AnswerLimit, match=r"passed --max-bytes 1000 bytes"):
        send(server, Path("unused.pem"), facts("/v1/endless"), {}, 5.0, max_bytes=1000)


def test_a_finite_answer_within_the_bounds_is_read_whole(server):
    received = send(server, Path("unused.pem"), facts("/v1/finite"), {}, 5.0, max_time=5.0, max_bytes=100)
    assert (received.status, received.body) == (200, b'{"ok": true}')


# -- a signal: the proxy stopped, the report written ---------------------------------------------------------------


class StandInProxy:
    url, ca_bundle = "http://127.0.0.1:9", "ca.pem"

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_the_proxy_and_the_report_lists_what_was_not_checked(tmp_path, monkeypatch, capsys, signum):
    folder = tmp_path / "cassettes"
    write(folder, chat("first", "one"))
    write(folder, chat("second", "two"))
    proxy = StandInProxy()

    def hanging_send(proxy_url, ca_bundle, facts, headers, timeout, max_time, max_bytes) -> Received:
        os.kill(os.getpid(), signum)  # as a CI step's timeout would, while a request is in flight
        if not proxy.stopped.wait(30):  # in flight until the proxy goes, as through a real proxy
            pytest.fail("the proxy was not stopped")
        raise ConnectionResetError("the proxy went away")

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setattr(drift_run.launcher, "start", lambda settings: proxy)
    monkeypatch.setattr(drift_run, "send", hanging_send)
    report, markdown = tmp_path / "drift.json", tmp_path / "drift.md"
    previous = signal.getsignal(signum)
    code = main(["drift", "--dir", str(folder), "--mitmdump", shutil.which("true") or "true", "--concurrency", "1",
                 "--report", str(report), "--markdown", str(markdown)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 128 + signum and proxy.stopped.is_set()
    assert f"cassette: drift stopped by {signum.name}" in err
    results = json.loads(report.read_text())["results"]
    assert len(results) == 2 and {r["outcome"] for r in results} == {"error"}
    assert all(r["message"] == f"not checked: cassette drift was stopped by {signum.name} before its answer was "
               "compared" for r in results)  # fmt: skip
    assert "not checked" in markdown.read_text() and "2 checked" not in out
    assert signal.getsignal(signum) == previous  # the command's handlers are its own, restored after


def test_a_proxy_that_does_not_start_still_leaves_a_report(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "cassettes"
    write(folder, chat("first", "one"))

    def failing_start(settings):
        raise drift_run.LauncherError("mitmdump exited at start: see its log")

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setattr(drift_run.launcher, "start", failing_start)
    report = tmp_path / "drift.json"
    code = main(["drift", "--dir", str(folder), "--mitmdump", shutil.which("true") or "true", "--report", str(report)])
    assert code == 2 and "mitmdump exited at start" in capsys.readouterr().err
    [result] = json.loads(report.read_text())["results"]
    assert result["outcome"] == "error" and result["message"].startswith("not checked: cassette drift failed")
