"""Faults around the addon: a bad upstream, a killed proxy, a bad cassette folder, two proxies writing at once.

Each test runs the real mitmdump with the addon against the fake upstream (or a
port nobody listens on) and asserts what the client gets, what is on disk and
what the run report counts.
"""

from __future__ import annotations

import errno
import os
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from cassette_proxy.core.files.atomic_write import STALE_TEMP_SECONDS, write_atomic
from cassette_proxy.core.files.cassette_file import load
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, FakeUpstream, Proxy, free_port

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


def openai_call() -> None:
    openai.OpenAI(api_key=FAKE_OPENAI_KEY).chat.completions.create(**chat_body("anyone there?"))


def anthropic_call() -> None:
    anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY).messages.create(max_tokens=5, **chat_body("anyone there?"))


@pytest.mark.parametrize(
    ("call", "error"), [(openai_call, openai.InternalServerError), (anthropic_call, anthropic.InternalServerError)]
)
def test_refused_upstream_answers_502_json_once_without_sdk_retries(start_proxy, cassette_dir, client_env, call, error):
    proxy = start_proxy(fake_upstream=f"http://127.0.0.1:{free_port()}", cassette_mode="record")
    client_env(proxy)
    with pytest.raises(error) as raised:
        call()
    assert raised.value.status_code == 502
    body = raised.value.body.get("error", raised.value.body)  # Anthropic's SDK keeps the envelope, OpenAI's not
    assert body["type"] == "cassette_upstream_error"
    assert "upstream unreachable" in body["message"]
    assert "nothing was saved" in body["message"]
    assert "upstream unreachable" in str(raised.value)
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


def slow_request_outcome(proxy, cassette_dir: Path, status: int) -> httpx.Response:
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
    assert [e["status"] for e in report["errors"]] == [status]
    assert "cassette_upstream_timeout=1" in report["errors"][0]["message"]
    assert len(cassette_files(cassette_dir)) == 1
    return response


def test_silent_plain_http_upstream_answers_504_json_at_cassette_upstream_timeout(
    start_proxy, http_upstream, cassette_dir
):
    proxy = start_proxy(http_upstream, cassette_mode="record", cassette_upstream_timeout=1)
    response = slow_request_outcome(proxy, cassette_dir, 504)
    assert_upstream_error(response, 504, "cassette_upstream_timeout=1", "nothing was saved")


def test_silent_tls_upstream_is_cut_off_at_cassette_upstream_timeout(start_proxy, https_upstream, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record", cassette_upstream_timeout=1)
    response = slow_request_outcome(proxy, cassette_dir, 502)
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


@pytest.mark.parametrize("status", [429, 500, 401])  # 404 is a deterministic client error: recorded
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


# --- crash safety ------------------------------------------------------------------------------------------


def test_kill_9_while_recording_leaves_only_whole_cassettes_and_the_next_run_replays(
    start_proxy, upstream, cassette_dir
):
    proxy = start_proxy(upstream, cassette_mode="record")
    prompts = [f"crash {i}" for i in range(40)]

    def send(text: str) -> int | None:
        try:
            return post(proxy, text, {"x-fake-delay": "0.05"}, timeout=20).status_code
        except httpx.HTTPError:
            return None  # the proxy died under this request

    with ThreadPoolExecutor(8) as pool:
        outcomes = pool.map(send, prompts)
        deadline = time.monotonic() + 60
        while len(list(cassette_dir.rglob("*.json"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        proxy.process.send_signal(signal.SIGKILL)
        outcomes = list(outcomes)
    proxy.process.wait()
    saved = [p for p in cassette_files(cassette_dir) if p.suffix == ".json"]
    assert 0 < len(saved) < len(prompts), outcomes  # killed in the middle of the recording
    for path in saved:
        assert load(path)["response"]["status"] == 200  # every file whole and valid
    replay = start_proxy(upstream, cassette_mode="replay")
    answered = [post(replay, text).status_code for text in prompts]
    assert answered.count(200) == len(saved)
    assert answered.count(409) == len(prompts) - len(saved)


def test_stale_temp_files_are_removed_at_start_and_fresh_ones_ignored(start_proxy, upstream, cassette_dir):
    recorder = start_proxy(upstream, cassette_mode="record")
    assert post(recorder, "whole").status_code == 200
    recorder.stop()
    (saved,) = cassette_files(cassette_dir)
    stale = saved.with_name(f".{saved.name}.abc123.tmp")
    fresh = saved.with_name(f".{saved.name}.def456.tmp")
    stale.write_text('{"cassette_format": 1, "key": "torn')
    fresh.write_text('{"cassette_format": 1, "key": "being written')
    old = time.time() - STALE_TEMP_SECONDS - 5
    os.utime(stale, (old, old))
    replay = start_proxy(upstream, cassette_mode="replay")
    assert not stale.exists()
    assert fresh.exists()  # may belong to another live proxy writing into the same folder
    assert post(replay, "whole").status_code == 200
    assert replay.stop()["counts"] == {**replay.stop()["counts"], "hits": 1, "misses": 0, "errors": 0}
    assert "partial cassette" in replay.log_text()


# --- bad environment ---------------------------------------------------------------------------------------


@pytest.fixture
def proxy_on(tmp_path) -> Iterator[Callable[..., Proxy]]:
    """Start mitmdump with the addon on a given cassette folder; stopped (by PID) at the end of the test."""
    started: list[Proxy] = []

    def start(folder: Path, upstream: FakeUpstream, **options) -> Proxy:
        started.append(Proxy(tmp_path / f"proxy-on-{len(started)}", folder, upstream, **options))
        return started[-1].start()

    yield start
    for proxy in started:
        proxy.stop()


UNWRITABLE = Path("/sys/kernel/cassette-proxy-test")
"""sysfs refuses mkdir to everyone, root included (the tests run as root, so chmod would not stop them)."""


@pytest.mark.parametrize("mode", ["record", "update"])
def test_unwritable_cassette_folder_still_delivers_the_response_and_says_why(proxy_on, upstream, mode):
    assert not UNWRITABLE.exists()
    proxy = proxy_on(UNWRITABLE, upstream, cassette_mode=mode)
    response = post(proxy, "nothing lost")
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "echo: nothing lost"
    assert "cassette not saved to /sys/kernel/cassette-proxy-test/" in response.headers["x-cassette-error"]
    report = proxy.stop()
    assert [e["type"] for e in report["errors"]] == ["cassette_write_failed"]
    assert report["counts"]["recorded"] == 0
    assert "cassette not saved" in proxy.log_text()


def test_failing_write_leaves_no_temp_file_and_keeps_the_old_cassette(tmp_path, monkeypatch):
    target = tmp_path / "api.openai.com" / "v1" / f"{'0' * 32}.json"
    write_atomic(target, b'{"old": true}')

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, b'{"new": true}')
    assert target.read_bytes() == b'{"old": true}'
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_cassette_folder_with_spaces_and_non_ascii_records_and_replays(proxy_on, upstream, tmp_path):
    folder = tmp_path / "my cassettes" / "répertoire 日本"
    recorder = proxy_on(folder, upstream, cassette_mode="record")
    assert post(recorder, "naïve café").status_code == 200
    recorder.stop()
    assert len(cassette_files(folder)) == 1
    replay = proxy_on(folder, upstream, cassette_mode="replay")
    assert post(replay, "naïve café").json()["choices"][0]["message"]["content"] == "echo: naïve café"
    assert replay.stop()["counts"]["hits"] == 1


# --- concurrent writers ------------------------------------------------------------------------------------


def test_two_recording_proxies_on_one_folder_write_only_whole_files(start_proxy, upstream, cassette_dir):
    first = start_proxy(upstream, cassette_mode="record")
    second = start_proxy(upstream, cassette_mode="update")  # update: rewrites the same keys on every request
    prompts = [f"shared {i % 10}" for i in range(60)]  # ten keys, each written many times by both

    def send(job: tuple[int, str]):
        index, text = job
        return text, post(first if index % 2 else second, text)

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(send, enumerate(prompts)))
    for text, response in results:
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == f"echo: {text}"
        assert "x-cassette-error" not in response.headers
    files = cassette_files(cassette_dir)
    assert len(files) == 10  # no temp file left, no duplicate
    for path in files:
        assert load(path)["request"]["body"]["messages"][0]["content"].startswith("shared ")
    assert first.stop()["counts"]["errors"] == second.stop()["counts"]["errors"] == 0


def test_replay_never_reads_a_torn_cassette_while_another_proxy_rewrites_it(start_proxy, upstream, cassette_dir):
    writer = start_proxy(upstream, cassette_mode="update")
    assert post(writer, "contended").status_code == 200
    reader = start_proxy(upstream, cassette_mode="replay")
    with ThreadPoolExecutor(6) as pool:
        writes = [pool.submit(post, writer, "contended") for _ in range(30)]
        reads = [pool.submit(post, reader, "contended") for _ in range(60)]
        statuses = [f.result().status_code for f in reads + writes]
    assert statuses == [200] * 90
    assert reader.stop()["counts"] == {**reader.stop()["counts"], "hits": 60, "errors": 0}
