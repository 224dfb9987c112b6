"""A URL path segment longer than a file name may be (255 bytes) is shortened, so every request can be recorded.

The short form is deterministic (a readable prefix plus a hash of the whole
segment); segments that fit are unchanged, so existing cassettes keep their paths.
"""

from __future__ import annotations

import ssl

import httpx
from cassette_proxy import cli
from cassette_proxy.core.location import MAX_NAME, MAX_SEGMENT, relative_name, short_name

KEY = "0123456789abcdef0123456789abcdef"


def segments(path: str) -> list[str]:
    return relative_name("https", "api.example.com", 443, path, KEY).split("/")[1:-1]


def test_a_segment_that_fits_is_unchanged():
    fits = "a" * MAX_SEGMENT
    assert segments(f"/v1/files/{fits}/content") == ["v1", "files", fits, "content"]


def test_a_long_segment_becomes_a_readable_prefix_and_a_hash_of_the_whole_segment():
    long = "file-" + "x" * 395
    (first, short) = segments(f"/v1/{long}")
    assert first == "v1"
    assert len(short.encode()) <= MAX_SEGMENT
    assert short.startswith("file-xxxx")
    assert segments(f"/v1/{long}") == ["v1", short]  # deterministic
    assert segments(f"/v1/{long[:-1]}y")[1] != short  # same prefix, other segment: another folder


def test_a_long_non_ascii_segment_fits_in_255_bytes():
    (short,) = segments("/" + "é" * 300)
    assert len(short.encode()) <= 255


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


def long_path(total: int) -> str:
    """A URL path of segments of up to 150 characters whose cassette name (`relative_name`) is `total` bytes long."""
    path = "/v1"
    while (left := total - len(relative_name("https", "api.example.com", 443, path, KEY))) > 0:
        path += "s" if left == 1 else "/" + "s" * min(150, left - 1)
    return path


def test_a_name_over_the_limit_is_shortened_to_a_readable_prefix_and_a_hash_and_one_at_it_is_not():
    at = relative_name("https", "api.example.com", 443, long_path(MAX_NAME), KEY)
    assert len(at) == MAX_NAME  # stored as it is: existing cassettes keep their names
    over = relative_name("https", "api.example.com", 443, long_path(MAX_NAME + 1), KEY)
    short = short_name(over)
    assert len(short) < 300 and all(len(part) <= 255 for part in short.split("/"))
    assert short.startswith("api.example.com/v1/sss") and short.endswith(f"/{KEY}.json")
    assert short == short_name(over)  # deterministic
    assert short_name(over.replace("s/", "t/", 1)) != short  # another endpoint: another folder


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
