"""The hit path reads only the request headers that are part of the key (benchmarks/ measured a full copy as its largest cost).

These pin what that must not change: a key header still counts whatever its case,
and headers outside the key (the SDK's volatile ones) still do not.
"""

from __future__ import annotations

import httpx
from harness import FAKE_ANTHROPIC_KEY

BODY = {"model": "claude-fake", "max_tokens": 16, "messages": [{"role": "user", "content": "hit path"}]}


def post(proxy, headers: dict[str, str]) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, verify=str(proxy.ca_bundle), trust_env=False) as client:
        return client.post(
            "https://api.anthropic.com/v1/messages", json=BODY, headers={"x-api-key": FAKE_ANTHROPIC_KEY, **headers}
        )


def test_key_header_counts_whatever_its_case(upstream, start_proxy):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, {"Anthropic-Version": "2023-06-01"}).status_code == 200
    recorder.stop()
    replayer = start_proxy(upstream)
    served = upstream.count

    assert post(replayer, {"anthropic-version": "2023-06-01"}).status_code == 200
    changed = post(replayer, {"ANTHROPIC-VERSION": "2024-01-01"})

    assert changed.status_code == 409
    assert changed.headers["x-should-retry"] == "false"
    assert upstream.count == served


def test_headers_outside_the_key_still_hit(upstream, start_proxy):
    volatile = {"anthropic-version": "2023-06-01", "x-stainless-retry-count": "0", "user-agent": "first"}
    recorder = start_proxy(upstream, cassette_mode="record")
    recorded = post(recorder, volatile)
    recorder.stop()
    replayer = start_proxy(upstream)

    replayed = post(replayer, {**volatile, "x-stainless-retry-count": "2", "user-agent": "second"})

    assert replayed.status_code == 200
    assert replayed.json() == recorded.json()
    assert replayer.stop()["counts"]["hits"] == 1
