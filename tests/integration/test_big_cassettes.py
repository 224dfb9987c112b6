"""A big cassette (from 1 MB: built by a replay worker process, off the proxy's event loop) replays byte-exact,
is refused when broken exactly as a small one is, and another client's hits are answered meanwhile; a big prompt
(keyed and stored by a request worker) records and replays."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path

import httpx
import openai
import pytest
from cassette_proxy.core.files.cassette_file import decode_body, dumps
from harness import FAKE_OPENAI_KEY

CHAT_URL = "https://api.openai.com/v1/chat/completions"


def post(proxy, text: str) -> httpx.Response:
    verify = ssl.create_default_context(cafile=proxy.ca_bundle)
    with httpx.Client(proxy=proxy.url, verify=verify, trust_env=False, timeout=120) as client:
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
        return client.post(CHAT_URL, json=body, headers={"authorization": f"Bearer {FAKE_OPENAI_KEY}"})


def recorded(start_proxy, upstream, texts: list[str], cassette_dir: Path) -> dict[str, Path]:
    """Record one small interaction per text; the path of each one's cassette."""
    recorder = start_proxy(upstream, cassette_mode="record")
    for text in texts:
        assert post(recorder, text).status_code == 200
    recorder.stop()
    paths = {}
    for path in cassette_dir.rglob("*.json"):
        cassette = json.loads(path.read_text())
        paths[cassette["request"]["body"]["messages"][0]["content"]] = path
    return paths


def big_json() -> dict:
    """About 3 MB: nested objects, non-ASCII text, numbers that must come back as they were written."""
    items = [{"i": i, "text": f"élément {i} — ✓ «{'x' * (i % 50)}»", "score": i / 7, "tags": ["a", None, True]}
             for i in range(25_000)]  # fmt: skip
    return {"id": "chatcmpl-big", "object": "list", "data": items}


def make_big(path: Path, body_format: str, body) -> dict:
    cassette = json.loads(path.read_text())
    cassette["response"].update(body_format=body_format, body=body)
    cassette["response"]["headers"]["x-note"] = "grün"
    path.write_bytes(dumps(cassette))
    assert path.stat().st_size > 1024 * 1024
    return cassette


@pytest.mark.parametrize("body_format", ["json", "text", "base64"])
def test_a_big_cassette_replays_byte_exact(start_proxy, http_upstream, cassette_dir, body_format):
    paths = recorded(start_proxy, http_upstream, ["big", "small"], cassette_dir)
    value = big_json()
    if body_format == "text":
        value = json.dumps(value, indent=1, ensure_ascii=False)
    elif body_format == "base64":
        value = base64.b64encode(bytes(range(256)) * 12_000).decode()
    cassette = make_big(paths["big"], body_format, value)
    expected = decode_body(body_format, value)
    replayer = start_proxy(http_upstream)
    served = http_upstream.count

    first, again = post(replayer, "big"), post(replayer, "big")
    small = post(replayer, "small")

    for answer in (first, again):
        assert answer.status_code == 200
        assert answer.content == expected
        assert answer.headers["content-length"] == str(len(expected))
        assert (b"x-note", "grün".encode()) in answer.headers.raw
        assert answer.headers["content-type"] == cassette["response"]["headers"]["content-type"]
    assert small.status_code == 200
    assert http_upstream.count == served
    assert replayer.stop()["counts"]["hits"] == 3


def test_a_broken_big_cassette_is_refused_naming_the_problem(start_proxy, http_upstream, cassette_dir):
    paths = recorded(start_proxy, http_upstream, ["big"], cassette_dir)
    cassette = make_big(paths["big"], "json", big_json())
    cassette["response"]["body_format"] = "base64"
    cassette["response"]["body"] = "x" * 1_500_001  # not a whole number of base64 quads
    paths["big"].write_bytes(dumps(cassette))
    replayer = start_proxy(http_upstream)

    answer = post(replayer, "big")

    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["type"] == "cassette_invalid"
    assert "response.body does not match its body_format" in error["message"]
    assert str(paths["big"]) in error["message"]


def test_a_big_cassette_that_is_not_json_is_refused(start_proxy, http_upstream, cassette_dir):
    paths = recorded(start_proxy, http_upstream, ["big"], cassette_dir)
    make_big(paths["big"], "json", big_json())
    paths["big"].write_bytes(paths["big"].read_bytes()[:-100])  # cut off, as a bad merge might leave it
    replayer = start_proxy(http_upstream)

    answer = post(replayer, "big")

    assert answer.status_code == 500
    assert "invalid JSON" in answer.json()["error"]["message"]


def test_a_big_prompt_records_through_the_worker_and_replays_with_the_sdk(start_proxy, https_upstream, client_env):
    """A 2 MB conversation (above BIG_REQUEST_BYTES: keyed and stored by a worker process) through the openai SDK."""
    turns = [{"role": "user", "content": f"turn {i}: {'context ' * 250}"} for i in range(1000)]
    messages = [*turns, {"role": "user", "content": "Sum it up"}]

    def ask() -> str:
        client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, timeout=120)
        return client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content

    client_env(start_proxy(https_upstream, cassette_mode="record"))
    assert ask() == "echo: Sum it up"
    replayer = start_proxy(https_upstream, cassette_mode="replay")
    client_env(replayer)
    served = https_upstream.count
    assert ask() == "echo: Sum it up"
    report = replayer.stop()
    assert report["counts"]["hits"] == 1 and report["errors"] == []
    assert https_upstream.count == served
