"""Faults around the addon: a bad upstream, a killed proxy, a bad cassette folder, two proxies writing at once.

Each test runs the real mitmdump with the addon against the fake upstream (or a
port nobody listens on) and asserts what the client gets, what is on disk and
what the run report counts.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from harness import FAKE_OPENAI_KEY, FakeUpstream, free_port

CHAT_URL = "https://api.openai.com/v1/chat/completions"


def chat_body(text: str) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}


def post(proxy, text: str, headers: dict | None = None, timeout: float = 60) -> httpx.Response:
    """One chat request through the proxy, as an SDK would send it (no retries: the test sees every answer)."""
    trust = ssl.create_default_context(cafile=str(proxy.ca_bundle))
    with httpx.Client(proxy=proxy.url, verify=trust, timeout=timeout) as client:
        return client.post(
            CHAT_URL, json=chat_body(text), headers={"authorization": f"Bearer {FAKE_OPENAI_KEY}", **(headers or {})}
        )


def cassette_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def assert_upstream_error(response: httpx.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-should-retry"] == "false"
    error = response.json()["error"]
    assert error["type"] == "cassette_upstream_error"
    for word in words:
        assert word in error["message"]
    return error


# --- bad upstream ------------------------------------------------------------------------------------------


def test_refused_upstream_answers_502_json_once_without_sdk_retries(start_proxy, cassette_dir, client_env):
    proxy = start_proxy(fake_upstream=f"http://127.0.0.1:{free_port()}", cassette_mode="record")
    client_env(proxy)
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY)
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(**chat_body("anyone there?"))
    assert raised.value.status_code == 502
    assert raised.value.body["type"] == "cassette_upstream_error"
    assert "upstream unreachable" in raised.value.body["message"]
    assert "nothing was saved" in raised.value.body["message"]
    report = proxy.stop()
    assert [e["type"] for e in report["errors"]] == ["cassette_upstream_error"]  # one attempt: no SDK retry
    assert not cassette_dir.exists() or cassette_files(cassette_dir) == []
    assert "upstream unreachable" in proxy.log_text()


def test_untrusted_upstream_certificate_answers_502_json(start_proxy, https_upstream, cassette_dir):
    # The proxy is not told to trust the fake's self-signed certificate, as with a real invalid certificate.
    proxy = start_proxy(fake_upstream=https_upstream.url, cassette_mode="record")
    assert_upstream_error(post(proxy, "hello"), 502, "TLS handshake", "self-signed certificate")
    assert https_upstream.count == 0
    assert proxy.stop()["counts"]["errors"] == 1
    assert not cassette_dir.exists() or cassette_files(cassette_dir) == []


@pytest.fixture
def http_upstream(tmp_path) -> Iterator[FakeUpstream]:
    fake = FakeUpstream(tmp_path / "http-upstream").start()
    yield fake
    fake.stop()


def slow_request_outcome(proxy, cassette_dir: Path) -> httpx.Response:
    """Send a request the upstream answers after 8 s, with cassette_upstream_timeout=1: bounded, nothing saved."""
    delay = 8.0
    started = time.monotonic()
    response = post(proxy, "slow", {"x-fake-delay": str(delay)})
    elapsed = time.monotonic() - started
    assert elapsed < delay / 2, f"the answer took {elapsed:.1f} s, the upstream's delay is {delay} s"
    assert post(proxy, "fast").status_code == 200  # still serving, and records the next request
    time.sleep(delay - elapsed)  # the slow upstream answers late: still nothing saved for it
    report = proxy.stop()
    assert report["counts"]["recorded"] == 1
    assert [e["status"] for e in report["errors"]] == [504]
    assert "cassette_upstream_timeout=1" in report["errors"][0]["message"]
    assert len(cassette_files(cassette_dir)) == 1
    return response


def test_silent_plain_http_upstream_answers_504_json_at_cassette_upstream_timeout(
    start_proxy, http_upstream, cassette_dir
):
    proxy = start_proxy(http_upstream, cassette_mode="record", cassette_upstream_timeout=1)
    response = slow_request_outcome(proxy, cassette_dir)
    assert_upstream_error(response, 504, "cassette_upstream_timeout=1", "nothing was saved")


def test_silent_tls_upstream_is_cut_off_at_cassette_upstream_timeout(start_proxy, https_upstream, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record", cassette_upstream_timeout=1)
    response = slow_request_outcome(proxy, cassette_dir)
    # Over TLS the addon cannot answer in the upstream's place: mitmproxy's own 502 page, on time.
    assert response.status_code == 502


def test_reset_mid_response_saves_nothing_and_is_counted(start_proxy, upstream, cassette_dir):
    proxy = start_proxy(upstream, cassette_mode="record")
    response = post(proxy, "reset", {"x-fake-reset": "1"})
    # mitmproxy answers this one itself (its own 502 page): the probe had found the upstream alive.
    assert response.status_code == 502
    assert post(proxy, "after the reset").status_code == 200
    report = proxy.stop()
    assert report["counts"]["recorded"] == 1
    assert [e["type"] for e in report["errors"]] == ["cassette_upstream_error"]
    assert len(cassette_files(cassette_dir)) == 1


@pytest.mark.parametrize("status", [429, 500, 404])
def test_upstream_error_status_passes_through_unchanged_and_unsaved(start_proxy, upstream, cassette_dir, status):
    proxy = start_proxy(upstream, cassette_mode="record")
    with ThreadPoolExecutor(8) as pool:  # a storm: every request gets the upstream's answer
        responses = list(pool.map(lambda i: post(proxy, f"storm {i}", {"x-fake-status": str(status)}), range(16)))
    for response in responses:
        assert response.status_code == status
        assert response.json()["error"]["message"] == f"fake upstream error {status}"
        assert response.headers.get("retry-after") == ("7" if status == 429 else None)
    report = proxy.stop()
    assert report["counts"]["recorded"] == 0
    assert not cassette_dir.exists() or cassette_files(cassette_dir) == []
