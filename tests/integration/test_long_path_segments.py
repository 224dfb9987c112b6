"""A URL path segment longer than a file name may be (255 bytes) is shortened, so every request can be recorded.

Here, such requests recorded and replayed through a real mitmdump; the short names themselves:
tests/unit/test_location.py.
"""

from __future__ import annotations

import ssl

import httpx
from cassette_proxy import cli


def client(proxy) -> httpx.Client:
    return httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca_bundle)), timeout=60)


def test_a_request_with_a_400_byte_segment_records_and_replays(start_proxy, https_upstream, cassette_dir):
    url = "https://api.openai.com/v1/files/" + "f" * 400 + "/content"
    recorder = start_proxy(https_upstream, cassette_mode="record")
    with client(recorder) as http:
        recorded = http.get(url)
    report = recorder.stop()
    assert recorded.status_code == 200
    assert report["counts"]["recorded"] == 1, report
    (written,) = cassette_dir.rglob("*.json")
    assert all(len(part.encode()) <= 255 for part in written.relative_to(cassette_dir).parts)
    calls = https_upstream.count
    replay = start_proxy(https_upstream, cassette_mode="replay")
    with client(replay) as http:
        replayed = http.get(url)
    report = replay.stop()
    assert report["counts"]["hits"] == 1, report
    assert replayed.json() == recorded.json()
    assert https_upstream.count == calls


def test_a_5_kb_path_records_and_replays_and_the_report_has_no_error(start_proxy, https_upstream, cassette_dir, capsys):
    url = "https://api.openai.com/v1" + "".join("/" + chr(97 + i % 26) * 200 for i in range(25))  # 5 KB
    recorder = start_proxy(https_upstream, cassette_mode="record")
    with client(recorder) as http:
        recorded = http.get(url)
    report = recorder.stop()
    assert recorded.status_code == 200, recorded.text
    assert report["counts"]["recorded"] == 1 and report["errors"] == [], report
    (written,) = cassette_dir.rglob("*.json")
    name = written.relative_to(cassette_dir).as_posix()
    assert name.startswith("api.openai.com/v1/aaaa") and len(name) < 300
    assert report["cassettes_used"] == [name]  # the report names the request once, as stored
    assert cli.main(["rekey", "--dir", str(cassette_dir), "--dry-run"]) == 0  # rekey finds it where it belongs
    assert "1 unchanged" in capsys.readouterr().out
    calls = https_upstream.count
    replay = start_proxy(https_upstream, cassette_mode="replay")
    with client(replay) as http:
        replayed = http.get(url)
    report = replay.stop()
    assert report["counts"]["hits"] == 1, report
    assert replayed.json() == recorded.json()
    assert https_upstream.count == calls
