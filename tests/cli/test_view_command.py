"""`cassette view` without a browser: the served API's boundaries, the index cache, the export's limits and errors."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from cassette_command import CASSETTE, cassette
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps, load
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Report
from cassette_proxy.viewer import index as viewer_index
from cassette_proxy.viewer.index import Index, detail
from cassette_proxy.viewer.reports import miss_view, report_view
from harness import mitmdump_path
from samples import cassette_path, chat, write


@pytest.fixture
def served(tmp_path):
    """`cassette view` serving a folder of two cassettes; yields (url, folder); stopped by PID."""
    folder = tmp_path / "cassettes"
    write(folder, chat("first prompt", "first answer"))
    write(folder, chat("second prompt", "second answer"))
    process = subprocess.Popen([CASSETTE, "view", str(folder)], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    try:
        yield line.split(" at ", 1)[1].split()[0], folder
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=15)


def test_serves_on_loopback_with_a_strict_policy_and_refuses_writes(served):
    url, _ = served
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url)
    page = httpx.get(url, timeout=10)
    policy = page.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; script-src 'sha256-")
    assert "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    for method in ("POST", "PUT", "DELETE"):
        assert httpx.request(method, url + "api/index", timeout=10).status_code == 405


def raw_get(url: str, head: str) -> tuple[int, bytes]:
    """The status and body of a request written byte for byte (`head`: request line and headers), as a browser
    page under DNS rebinding or a cross-origin script would send it."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("PORT", str(port)).encode() + b"Connection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\n", 200),
        ("GET /api/index HTTP/1.1\r\nHost: localhost:PORT\r\n", 200),
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: http://127.0.0.1:PORT\r\n", 200),
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nSec-Fetch-Site: same-origin\r\n", 200),
        ("GET /api/index HTTP/1.1\r\nHost: attacker.example\r\n", 421),  # DNS rebinding
        ("GET /api/index HTTP/1.1\r\nHost: attacker.example:PORT\r\n", 421),
        ("GET / HTTP/1.1\r\nHost: attacker.example:PORT\r\n", 421),
        ("GET /api/cassette?id=x.json HTTP/1.1\r\nHost: 127.0.0.2:PORT\r\n", 421),
        ("GET /api/index HTTP/1.0\r\n", 421),  # no Host at all
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nHost: attacker.example\r\n", 421),
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: http://attacker.example\r\n", 403),
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nOrigin: null\r\n", 403),
        ("GET /api/index HTTP/1.1\r\nHost: 127.0.0.1:PORT\r\nSec-Fetch-Site: cross-site\r\n", 403),
        ("POST /api/index HTTP/1.1\r\nHost: attacker.example\r\nContent-Length: 0\r\n", 421),
    ],
)
def test_the_served_viewer_answers_only_requests_for_its_own_origin(served, head, status):
    url, _ = served
    got, body = raw_get(url, head)
    assert got == status, body
    assert (b"first prompt" in body) is (status == 200)
    if status == 421:
        assert b"answers only requests for http://127.0.0.1:" in body


def test_a_cassette_id_outside_the_folder_is_not_found_and_a_link_out_is_refused_with_its_reason(served, tmp_path):
    url, folder = served
    assert len(httpx.get(url + "api/index", timeout=10).json()["cassettes"]) == 2
    (tmp_path / "secret.json").write_text('{"secret": "not-for-the-viewer"}')
    (folder / "link.json").symlink_to(tmp_path / "secret.json")
    for bad in ("../secret.json", "/etc/passwd", "api.openai.com/../../secret.json", "nope.json"):
        reply = httpx.get(url + "api/cassette", params={"id": bad}, timeout=10)
        assert reply.status_code == 404, bad
        assert "not-for-the-viewer" not in reply.text
    index = httpx.get(url + "api/index", timeout=10)
    [one] = [c["id"] for c in index.json()["cassettes"] if "first" in c.get("last_user", "")]
    [link] = [c for c in index.json()["cassettes"] if c["id"] == "link.json"]
    assert "outside the cassette folder" in link["error"]  # listed, and refused with the reason
    refused = httpx.get(url + "api/cassette", params={"id": "link.json"}, timeout=10)
    assert "outside the cassette folder" in refused.json()["error"] and "raw" not in refused.json()
    assert "not-for-the-viewer" not in index.text + refused.text
    detail = httpx.get(url + "api/cassette", params={"id": one}, timeout=10).json()
    assert detail["conversation"]["answer"]["text"] == "first answer"


def test_the_index_rereads_only_files_that_changed(tmp_path, monkeypatch):
    first = write(tmp_path, chat("one", "a"))
    write(tmp_path, chat("two", "b"))
    loads = []
    real_load = load
    monkeypatch.setattr(viewer_index, "load", lambda path, root: loads.append(path.name) or real_load(path, root))
    index = Index(tmp_path)
    assert [s["last_user"] for s in index.summaries()] == sorted(
        ["one", "two"], key=lambda t: cassette_path(chat(t, ""))
    )
    assert len(loads) == 2
    index.summaries()
    assert len(loads) == 2  # unchanged files come from the cache
    changed = chat("one, edited", "a")
    write_atomic(first, dumps(changed))
    third = write(tmp_path, chat("three", "c"))
    summaries = index.summaries()
    assert sorted(loads[2:]) == sorted([first.name, third.name])
    assert "one, edited" in [s["last_user"] for s in summaries]
    third.unlink()
    assert len(index.summaries()) == 2


def test_a_request_during_a_long_first_read_gets_what_is_ready_and_how_many_are_pending(tmp_path, monkeypatch):
    for n in range(3):
        write(tmp_path, chat(f"prompt {n}", "a"))
    first_read, release = threading.Event(), threading.Event()
    real_load = load

    def slow_load(path, root):
        if first_read.is_set():
            release.wait(30)  # the second file's read takes "long": until the test releases it
        first_read.set()
        return real_load(path, root)

    monkeypatch.setattr(viewer_index, "load", slow_load)
    index = Index(tmp_path)
    index.refresh_in_background(wait=0)
    assert first_read.wait(30)
    ready, pending = index.snapshot()
    assert (len(ready), pending) in ((0, 3), (1, 2))  # the first summary may be stored yet or not
    release.set()
    index.refresh_in_background(wait=30)
    ready, pending = index.snapshot()
    assert (sorted(s["last_user"] for s in ready), pending) == (["prompt 0", "prompt 1", "prompt 2"], 0)


def test_summaries_are_kept_between_runs_and_a_broken_cache_is_ignored(tmp_path, monkeypatch):
    folder, cache = tmp_path / "cassettes", tmp_path / "cache" / "view.json"
    write(folder, chat("one", "a"))
    write(folder, chat("two", "b"))
    first = Index(folder, cache).summaries()
    loads = []
    real_load = load
    monkeypatch.setattr(viewer_index, "load", lambda path, root: loads.append(path.name) or real_load(path, root))
    assert Index(folder, cache).summaries() == first
    assert loads == []  # a new run read no cassette
    cache.write_text("{broken")
    assert Index(folder, cache).summaries() == first
    assert len(loads) == 2


def test_an_unreadable_cassette_is_listed_with_its_problem(tmp_path):
    write(tmp_path, chat("fine", "ok"))
    (tmp_path / "broken.json").write_text("{not json")
    summaries = {s["id"]: s for s in Index(tmp_path).summaries()}
    assert "invalid JSON" in summaries["broken.json"]["error"]
    assert "invalid JSON" in detail(tmp_path, "broken.json")["error"]


def test_the_export_is_one_file_with_no_network_reference_and_data_that_cannot_close_its_script(tmp_path):
    folder = tmp_path / "cassettes"
    write(folder, chat("</script><script>alert(1)</script> <!-- & -->", "<img src=https://example.com/x.png>"))
    out = tmp_path / "export.html"
    done = cassette("view", str(folder), "--html", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    html = out.read_text()
    data = re.search(r'<script type="application/json" id="cassette-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in data and ">" not in data and "\\u003c/script\\u003e" in data
    page = html.replace(data, "")
    assert not re.search(r"\b(src|href)\s*=|@import|url\(|https?://", page, re.I)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "connect-src 'none'" in policy and "img-src 'none'" in policy and "'unsafe-inline'" not in policy
    assert html.count("<script") == 2  # the data block and the page's one script, allowed by its hash


def test_export_only_used_keeps_the_cassettes_a_run_used_or_missed_near(tmp_path):
    folder = tmp_path / "cassettes"
    used = write(folder, chat("used", "a")).relative_to(folder).as_posix()
    near = write(folder, chat("near a miss", "b")).relative_to(folder).as_posix()
    write(folder, chat("neither", "c"))
    report = Report(hits=1, cassettes_used={used})
    report.misses.append({"key": "f" * 32, "method": "POST", "url": "u", "cassette": "x", "closest": [{"cassette": near, "differences": []}]})  # fmt: skip
    report.write(tmp_path / "report.json")
    out = tmp_path / "used.html"
    done = cassette("view", str(folder), "--report", "report.json", "--html", str(out), "--only-used", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(2 of 3 cassettes)" in done.stdout
    html = out.read_text()
    assert "near a miss" in html and '"used"' in html and "neither" not in html


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args], cwd=cwd, check=True, capture_output=True
    )


def test_export_changed_keeps_what_a_re_record_added_or_changed(tmp_path):
    folder = tmp_path / "cassettes"
    kept = write(folder, chat("kept", "same"))
    rerecorded = write(folder, chat("re-recorded", "before"))
    git("init", "-q", cwd=tmp_path)
    git("add", ".", cwd=tmp_path)
    git("commit", "-qm", "cassettes", cwd=tmp_path)
    write_atomic(rerecorded, dumps(chat("re-recorded", "after")))
    write(folder, chat("brand new", "n"))
    out = tmp_path / "changed.html"
    done = cassette("view", "cassettes", "--html", str(out), "--changed", "HEAD", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(2 of 3 cassettes)" in done.stdout
    html = out.read_text()
    assert "brand new" in html and "after" in html and kept.stem not in html


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing-folder"], "missing-folder is not a folder"),
        (["cassettes", "--report", "nope.json"], "cannot read the report nope.json"),
        (["cassettes", "--report", "bad.json"], "is not JSON"),
        (["cassettes", "--only-used", "--report", "bad.json"], "is not JSON"),
        (["cassettes", "--only-used"], "--only-used and --changed limit an export: add --html OUT"),
        (["cassettes", "--html", "o.html", "--only-used"], "--only-used needs the run's report"),
        (["cassettes", "--html", "o.html", "--changed", "no-such-rev"], "is not a commit of this repository"),
    ],
)
def test_bad_input_is_named_with_what_to_do(tmp_path, args, says):
    write(tmp_path / "cassettes", chat("q", "a"))
    (tmp_path / "bad.json").write_text("{")
    git("init", "-q", cwd=tmp_path)
    done = cassette("view", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert says in done.stdout


def test_a_bad_port_is_refused_before_serving(tmp_path):
    done = cassette("view", str(tmp_path), "--port", "70000", cwd=tmp_path)
    assert done.returncode == 2
    assert "'70000' is not a port: give a number from 1 to 65535, or 0 for a free one" in done.stderr


def test_report_view_sums_reports_and_lists_unused_cassettes(tmp_path):
    a, b = Report(hits=2, cassettes_used={"x.json"}), Report(hits=1, cassettes_used={"y.json"})
    a.error(ErrorEntry(ErrorKind.STREAM_INCOMPLETE, "cut off", cassette="z.json"))
    shown = report_view(tmp_path, [(Path("a"), a), (Path("b"), b)], ["x.json", "y.json", "w.json"])  # fmt: skip
    assert (shown["counts"]["hits"], shown["counts"]["errors"], shown["unused"]) == (3, 1, ["w.json"])
    assert shown["errors"][0]["type"] == "stream_incomplete"


def test_the_command_side_does_not_import_mitmproxy():
    python = Path(mitmdump_path()).with_name("python")  # the proxy's environment, where mitmproxy is installed
    code = (
        "import sys, cassette_proxy.cli, cassette_proxy.cli.view, cassette_proxy.viewer.server, "
        "cassette_proxy.viewer.export; assert 'mitmproxy' not in sys.modules, 'imported'"
    )
    assert subprocess.run([str(python), "-c", code], capture_output=True, text=True).returncode == 0


def test_a_miss_is_diffed_against_its_closest_recording_and_a_path_out_of_the_folder_is_not_read(tmp_path):
    near = write(tmp_path, chat("What is the capital of France?", "Paris")).relative_to(tmp_path).as_posix()
    body = {"model": "gpt-4o-mini", "temperature": 0, "messages": [{"role": "user", "content": "What about Spain?"}]}
    miss = {"key": "f" * 32, "method": "POST", "url": "u", "cassette": "c", "body": body,
            "closest": [{"cassette": near, "differences": ["worded"]}, {"cassette": "../../etc/passwd", "differences": ["kept"]}]}  # fmt: skip
    shown, outside = miss_view(tmp_path, miss)["closest"]
    assert shown["rows"] == [
        ["messages[0].content", "What is the capital of France?", "What about Spain?"],
        ["temperature", None, "0"],
    ]
    assert outside == {"cassette": "../../etc/passwd", "differences": ["kept"]}
