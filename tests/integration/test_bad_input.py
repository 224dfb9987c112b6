"""Bad input on both sides of the addon: broken cassette files, and requests no SDK would send.

A cassette crafted to attack its reader (a stored `\\r\\n` injecting headers, an
illegal status, a symlink out of the folder, a fifo, an oversized file) answers
500 `cassette_invalid` naming the file and the problem, and nothing is forwarded;
an odd request gets a stable key: recorded once, the same request replays from disk.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

import brotli
import httpx
import pytest
import zstandard
from harness import FAKE_OPENAI_KEY

API = "https://api.openai.com"


def client(proxy, **options) -> httpx.Client:
    trust = ssl.create_default_context(cafile=str(proxy.ca_bundle))
    return httpx.Client(proxy=proxy.url, verify=trust, timeout=60, **options)


def chat(proxy, text: str) -> httpx.Response:
    with client(proxy) as http:
        return http.post(
            f"{API}/v1/chat/completions",
            json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
            headers={"authorization": f"Bearer {FAKE_OPENAI_KEY}"},
        )


# --- bad cassettes -----------------------------------------------------------------------------------------


# A broken file (invalid JSON, another cassette_format, a field missing, not UTF-8) in each mode: in-process,
# tests/addon/test_broken_cassettes.py. Here, files crafted to attack their reader, through a real mitmdump.


def ask(http: httpx.Client, text: str) -> httpx.Response:
    return http.post(
        f"{API}/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    )


def set_response(path: Path, **fields) -> None:
    content = json.loads(path.read_text())
    content["response"].update(fields)
    path.write_text(json.dumps(content))


def hostile(tmp_path: Path) -> dict:
    """Ways a cassette from a pull request could attack its reader, each a function of the recorded file."""

    def outside(path: Path) -> None:
        elsewhere = tmp_path / "outside-the-folder.json"
        elsewhere.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(elsewhere)

    def dev_zero(path: Path) -> None:
        path.unlink()
        path.symlink_to("/dev/zero")

    def oversized(path: Path) -> None:
        set_response(path, body={"padding": "x" * 200_000})

    return {
        "crlf-header": (lambda p: set_response(p, headers={"x-a": "ok\r\nx-injected: 1"}), "holds a CR, LF or NUL"),
        "status-0": (lambda p: set_response(p, status=0), "response.status 0 is not an HTTP status"),
        "status-true": (lambda p: set_response(p, status=True), "must be an integer from 100 to 599, not True"),
        "status-huge": (lambda p: set_response(p, status=10**30), "is not an HTTP status"),
        "status-999": (lambda p: set_response(p, status=999), "response.status 999 is not an HTTP status"),
        "symlink-outside": (outside, "outside the cassette folder"),
        "symlink-dev-zero": (dev_zero, "resolves to /dev/zero, outside the cassette folder"),
        "oversized": (oversized, "over the cassette_max_size limit of 100000 bytes"),
        "fifo": (lambda p: (p.unlink(), os.mkfifo(p)), "is not a regular file (a fifo)"),
    }


@pytest.mark.parametrize("mode", ["replay", "record"])
def test_hostile_cassettes_answer_500_cassette_invalid_and_nothing_is_forwarded(
    start_proxy, https_upstream, cassette_dir, tmp_path, mode
):
    attacks = hostile(tmp_path)
    recorder = start_proxy(https_upstream, cassette_mode="record")
    with client(recorder) as http:
        for name in [*attacks, "intact", "linked"]:
            assert ask(http, name).status_code == 200
    recorder.stop()
    files = {
        json.loads(p.read_text())["request"]["body"]["messages"][0]["content"]: p for p in cassette_dir.rglob("*.json")
    }
    for name, (damage, _) in attacks.items():
        damage(files[name])
    # A symlink to another cassette inside the folder is fine.
    linked = files["linked"]
    (cassette_dir / "shared.json").write_bytes(linked.read_bytes())
    linked.unlink()
    linked.symlink_to(cassette_dir / "shared.json")
    calls = https_upstream.count

    proxy = start_proxy(https_upstream, cassette_mode=mode, cassette_max_size=100_000)
    with client(proxy) as http:
        answers = {name: ask(http, name) for name in [*attacks, "intact", "linked"]}
    report = proxy.stop()

    for name, (_, problem) in attacks.items():
        answer = answers[name]
        assert answer.status_code == 500, (name, answer.text)
        assert "x-injected" not in answer.headers
        assert answer.headers["x-should-retry"] == "false"
        error = answer.json()["error"]
        assert error["type"] == "cassette_invalid", name
        assert problem in error["message"], (name, error["message"])
        assert str(files[name]) in error["message"]
    assert answers["intact"].json()["choices"][0]["message"]["content"] == "echo: intact"
    assert answers["linked"].json()["choices"][0]["message"]["content"] == "echo: linked"
    assert https_upstream.count == calls  # nothing forwarded, in record mode either
    assert report["counts"]["errors"] == len(attacks)
    assert report["counts"]["hits"] == 2


# --- bad requests ------------------------------------------------------------------------------------------


def twice(start_proxy, upstream, send: Callable[[object], httpx.Response]) -> tuple[httpx.Response, httpx.Response]:
    """Send the same request in record mode, then in replay mode: the replay must hit and match."""
    recorder = start_proxy(upstream, cassette_mode="record")
    recorded = send(recorder)
    report = recorder.stop()
    assert report["counts"]["errors"] == 0, report["errors"]
    replay = start_proxy(upstream, cassette_mode="replay")
    replayed = send(replay)
    report = replay.stop()
    assert report["counts"]["hits"] == 1, report
    assert replayed.status_code == recorded.status_code
    if "json" in recorded.headers.get("content-type", ""):
        assert replayed.json() == recorded.json()  # JSON bodies are stored parsed: same value, maybe other escapes
    else:
        assert replayed.content == recorded.content
    return recorded, replayed


def post_raw(body: bytes, headers: dict, method: str = "POST", path: str = "/v1/echo") -> Callable:
    def send(proxy) -> httpx.Response:
        with client(proxy) as http:
            return http.request(method, f"{API}{path}", content=body, headers=headers)

    return send


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"model": "gpt", "messages": [', "application/json"),  # invalid JSON under a JSON type
        (b"", "application/json"),  # empty body
        (bytes(range(256)) * 64, "application/octet-stream"),  # binary
        ("café naïve".encode("latin-1"), "text/plain; charset=latin-1"),  # text that is not UTF-8
        (b'{"text": "lone \\ud800 surrogate"}', "application/json"),  # valid JSON, not encodable as UTF-8
    ],
    ids=["invalid-json", "empty", "binary", "latin-1", "lone-surrogate"],
)
def test_odd_body_records_then_replays(start_proxy, upstream, body: bytes, content_type: str):
    recorded, _ = twice(start_proxy, upstream, post_raw(body, {"content-type": content_type}))
    assert recorded.status_code == 200


def test_twenty_megabyte_body_records_then_replays(start_proxy, upstream):
    prompt = "x" * (20 * 1024 * 1024)
    body = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": prompt}]}).encode()
    recorded, _ = twice(start_proxy, upstream, post_raw(body, {"content-type": "application/json"}))
    assert len(recorded.json()["echo"]) == len(body)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("br", brotli.compress), ("zstd", zstandard.ZstdCompressor().compress)],
)
def test_compressed_request_body_is_keyed_by_its_content(start_proxy, upstream, encoding, compress):
    body = json.dumps({"model": "gpt", "messages": [{"role": "user", "content": f"squeezed {encoding}"}]}).encode()
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post_raw(compress(body), {"content-type": "application/json", "content-encoding": encoding})(
        recorder
    ).is_success
    recorder.stop()
    # The same content sent plain is the same request: it replays.
    replay = start_proxy(upstream, cassette_mode="replay")
    assert post_raw(body, {"content-type": "application/json"})(replay).status_code == 200
    assert replay.stop()["counts"]["hits"] == 1


def test_chunked_upload_records_then_replays(start_proxy, upstream):
    parts = [b'{"model": "gpt", ', b'"messages": [{"role": "user", ', b'"content": "in chunks"}]}']

    def send(proxy) -> httpx.Response:
        with client(proxy) as http:
            return http.post(
                f"{API}/v1/chat/completions", content=iter(parts), headers={"content-type": "application/json"}
            )

    recorded, _ = twice(start_proxy, upstream, send)
    assert recorded.json()["choices"][0]["message"]["content"] == "echo: in chunks"


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_other_methods_record_then_replay(start_proxy, upstream, method: str):
    body = b"" if method in ("GET", "DELETE") else b'{"name": "x"}'
    recorded, _ = twice(
        start_proxy, upstream, post_raw(body, {"content-type": "application/json"}, method, "/v1/files/f1")
    )
    assert recorded.json()["method"] == method


@pytest.mark.parametrize("method", ["OPTIONS", "PROPFIND"])
def test_methods_the_upstream_rejects_pass_through_unsaved(start_proxy, upstream, cassette_dir, method: str):
    proxy = start_proxy(upstream, cassette_mode="record")
    response = post_raw(b"", {}, method, "/v1/models")(proxy)
    assert response.status_code == 501  # the fake upstream's http.server knows neither
    assert proxy.stop()["counts"]["recorded"] == 0
    assert list(cassette_dir.rglob("*.json")) == []


def test_http2_client_records_then_replays(start_proxy, upstream):
    def send(proxy) -> httpx.Response:
        result = subprocess.run(
            ["curl", "--silent", "--show-error", "--http2", "--proxy", proxy.url, "--cacert", str(proxy.ca_bundle),
             "--write-out", "\n%{http_version} %{http_code}", "--header", "content-type: application/json",
             "--data", '{"model": "gpt", "messages": [{"role": "user", "content": "over h2"}]}',
             f"{API}/v1/chat/completions"],
            capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        body, status_line = result.stdout.rsplit(b"\n", 1)
        version, status = status_line.decode().split()
        assert version == "2"  # the client really spoke HTTP/2 to the proxy
        return httpx.Response(int(status), content=body)

    recorded, _ = twice(start_proxy, upstream, send)
    assert recorded.json()["choices"][0]["message"]["content"] == "echo: over h2"


# A request no client would send, byte for byte: the key of its raw bytes (tests/unit/test_key_raw_bytes.py), through
# mitmproxy's own parsing.


def raw_exchange(proxy, head: bytes, body: bytes) -> bytes:
    """A plain-HTTP proxy request sent byte for byte: no client would send these bytes."""
    with socket.create_connection(("127.0.0.1", proxy.port()), timeout=30) as conn:
        conn.sendall(head + b"\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


UNREADABLE = {
    "query-ff": (b"POST http://api.openai.com/v1/chat/completions?x=%ff HTTP/1.1\r\nhost: api.openai.com", b"{}"),
    "multipart-ff": (
        b"POST http://api.openai.com/v1/audio/transcriptions HTTP/1.1\r\nhost: api.openai.com\r\n"
        b"content-type: multipart/form-data; boundary=\xff",
        b"--\xff\r\ncontent-disposition: form-data; name=file\r\n\r\nabc\r\n--\xff--\r\n",
    ),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_request_not_readable_as_text_records_and_replays_and_is_never_forwarded_in_replay(
    start_proxy, http_upstream, cassette_dir, name
):
    head, body = UNREADABLE[name]
    replay = start_proxy(http_upstream, cassette_mode="replay")
    assert raw_exchange(replay, head, body).startswith(b"HTTP/1.1 409")  # a miss, answered here
    replay.stop()
    assert http_upstream.count == 0
    recorder = start_proxy(http_upstream, cassette_mode="record")
    assert raw_exchange(recorder, head, body).startswith(b"HTTP/1.1 200")
    assert recorder.stop()["counts"]["recorded"] == 1
    replay = start_proxy(http_upstream, cassette_mode="replay")
    assert raw_exchange(replay, head, body).startswith(b"HTTP/1.1 200")
    assert replay.stop()["counts"]["hits"] == 1
    assert http_upstream.count == 1
