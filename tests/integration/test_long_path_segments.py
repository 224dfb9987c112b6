"""A URL path segment longer than a file name may be (255 bytes) is shortened, so every request can be recorded.

The short form is deterministic (a readable prefix plus a hash of the whole
segment); segments that fit are unchanged, so existing cassettes keep their paths.
"""

from __future__ import annotations

import ssl

import httpx
from cassette_proxy.core.location import MAX_SEGMENT, relative_name

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
