"""The hit path reads only the request headers that are part of the key, in one pass, and parses the
query only when there is one (benchmarks/ measured copying every header as the largest cost of a hit).

These pin what that must not change: a key header counts whatever its case, repeated
lines fold as one, the query counts, and headers outside the key (the SDK's volatile
ones) do not.
"""

from __future__ import annotations

import json
import ssl
import time

import httpx
from harness import FAKE_ANTHROPIC_KEY

BODY = {"model": "claude-fake", "max_tokens": 16, "messages": [{"role": "user", "content": "hit path"}]}


def post(proxy, headers: list[tuple[str, str]], query: str = "") -> httpx.Response:
    verify = ssl.create_default_context(cafile=proxy.ca_bundle)
    with httpx.Client(proxy=proxy.url, verify=verify, trust_env=False) as client:
        return client.post(
            f"https://api.anthropic.com/v1/messages{query}",
            json=BODY,
            headers=[("x-api-key", FAKE_ANTHROPIC_KEY), *headers],
        )


def test_key_header_counts_whatever_its_case(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, [("Anthropic-Version", "2023-06-01")]).status_code == 200
    recorder.stop()
    replayer = start_proxy(upstream)
    served = upstream.count

    assert post(replayer, [("anthropic-version", "2023-06-01")]).status_code == 200
    changed = post(replayer, [("ANTHROPIC-VERSION", "2024-01-01")])

    assert changed.status_code == 409
    assert changed.headers["x-should-retry"] == "false"
    assert upstream.count == served


def test_repeated_key_header_folds_like_one_line(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, [("anthropic-beta", "tools-1"), ("anthropic-beta", "cache-2")]).status_code == 200
    recorder.stop()
    replayer = start_proxy(upstream)

    assert post(replayer, [("anthropic-beta", "tools-1, cache-2")]).status_code == 200
    assert post(replayer, [("anthropic-beta", "tools-1")]).status_code == 409


def test_query_parameters_still_count(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, [], "?api-version=2024-02-01&beta=true").status_code == 200
    recorder.stop()
    replayer = start_proxy(upstream)

    assert post(replayer, [], "?beta=true&api-version=2024-02-01").status_code == 200
    assert post(replayer, [], "?api-version=2024-06-01&beta=true").status_code == 409
    assert post(replayer, []).status_code == 409


def test_headers_outside_the_key_still_hit(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    recorded = post(recorder, [("anthropic-version", "2023-06-01"), ("x-stainless-retry-count", "0")])
    recorder.stop()
    replayer = start_proxy(upstream)

    replayed = post(
        replayer, [("anthropic-version", "2023-06-01"), ("x-stainless-retry-count", "2"), ("user-agent", "other")]
    )

    assert replayed.status_code == 200
    assert replayed.json() == recorded.json()
    assert replayer.stop()["counts"]["hits"] == 1


def wait_for_log(proxy, text: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in proxy.log_text().splitlines():
            if text in line:
                return line
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the proxy log:\n{proxy.log_text()[-2000:]}")


def test_cassettes_preloaded_as_the_proxy_starts_answer_and_an_edit_is_still_seen(upstream, start_proxy, tmp_path):
    recorder = start_proxy(upstream, cassette_mode="record")
    for version in ("2023-06-01", "2024-01-01", "2024-06-01"):
        assert post(recorder, [("anthropic-version", version)]).status_code == 200
    recorder.stop()
    files = sorted(recorder.cassette_dir.rglob("*.json"))
    assert len(files) == 3
    replayer = start_proxy(upstream)
    assert "preloaded 3 cassettes (3 request keys)" in wait_for_log(replayer, "cassette: preloaded")
    # Edited after the preload, as a re-recording proxy writes (a new file): the edit is what replays.
    edited = json.loads(files[0].read_text())
    edited["response"]["body"]["content"] = [{"type": "text", "text": "edited after the preload"}]
    files[0].with_suffix(".tmp").write_text(json.dumps(edited))
    files[0].with_suffix(".tmp").replace(files[0])
    served = upstream.count

    texts = [post(replayer, [("anthropic-version", v)]).json()["content"][0]["text"]
             for v in ("2023-06-01", "2024-01-01", "2024-06-01")]  # fmt: skip

    assert texts.count("edited after the preload") == 1
    assert upstream.count == served
    assert replayer.stop()["counts"]["hits"] == 3


def test_no_preload_when_it_is_off(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, [("anthropic-version", "2023-06-01")]).status_code == 200
    recorder.stop()
    replayer = start_proxy(upstream, cassette_preload=0)
    assert post(replayer, [("anthropic-version", "2023-06-01")]).status_code == 200
    replayer.stop()
    assert "preloaded" not in replayer.log_text()
