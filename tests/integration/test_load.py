"""Load: many clients at once get exact answers, exact counts, whole cassettes, and no client waits on another.

Everything runs on 127.0.0.1: two proxies on one cassette folder (record and
replay), the fake upstream, and several client processes started together.
"""

from __future__ import annotations

import json
import ssl
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from cassette_proxy.core.files.cassette_file import load
from harness import ROOT

CLIENT = ROOT / "tests" / "support" / "load_client.py"
CHAT_URL = "https://api.openai.com/v1/chat/completions"
PROCESSES = 4
PER_PROCESS = 50


def chat(http: httpx.Client, text: str, headers: dict | None = None) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}
    return http.post(CHAT_URL, json=body, headers=headers or {})


def proxied(proxy) -> httpx.Client:
    return httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca_bundle)), timeout=120)


def record(proxy, prompts: list[str]) -> None:
    with proxied(proxy) as http, ThreadPoolExecutor(8) as pool:
        assert all(r.status_code == 200 for r in pool.map(lambda text: chat(http, text), prompts))


def trouble(*proxies) -> str:
    """What the proxies logged beyond requests and connections: handshake failures, errors, tracebacks."""
    routine = ("client connect", "client disconnect", "server connect", "server disconnect", " << ", "POST https")
    lines = [
        f"{proxy.folder.name}: {line}"
        for proxy in proxies
        for line in proxy.log_text().splitlines()
        if line.strip() and not any(word in line for word in routine)
    ]
    return "\n".join(lines[-40:])


def test_200_concurrent_mixed_requests_from_4_processes_are_exact(start_proxy, https_upstream, cassette_dir):
    recorder = start_proxy(https_upstream, cassette_mode="record")
    known = [f"known {i}" for i in range(25)]
    record(recorder, known)
    recorder.stop()
    recorder = start_proxy(https_upstream, cassette_mode="record")
    replayer = start_proxy(https_upstream, cassette_mode="replay")
    upstream_before = https_upstream.count

    # Each process: a quarter hits on the recorder, a quarter new recordings,
    # a quarter hits on the replayer, a quarter misses on the replayer.
    plans = []
    for p in range(PROCESSES):
        jobs = []
        for j in range(PER_PROCESS):
            kind = j % 4
            text = known[(p * PER_PROCESS + j) % len(known)] if kind in (0, 2) else f"new {p}-{j}"
            jobs.append({"proxy": (recorder if kind < 2 else replayer).url, "text": text, "kind": kind})
        plans.append(jobs)
    both_cas = Path(cassette_dir).parent / "both-cas.pem"  # each proxy has its own CA
    both_cas.write_text(recorder.ca_bundle.read_text() + replayer.ca_bundle.read_text())
    clients = [
        subprocess.Popen(
            [sys.executable, str(CLIENT), "--ca", str(both_cas)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in plans
    ]
    started = time.monotonic()
    outputs = [c.communicate(json.dumps(jobs), timeout=300)[0] for c, jobs in zip(clients, plans, strict=True)]
    wall = time.monotonic() - started
    results = [r for out in outputs for r in json.loads(out)]

    assert len(results) == PROCESSES * PER_PROCESS
    for r in results:
        expected = (200, f"echo: {r['text']}") if r["kind"] != 3 else (409, "cassette_miss")
        assert (r["status"], r["answer"]) == expected, f"{r}\n{trouble(recorder, replayer)}"
    # A connect refused or dropped (TCP, CONNECT or the TLS handshake) is retried once, as the SDKs do; it
    # happened once in a CI run (a TLS handshake cut short), never in 60 runs here. Seen, bounded, not hidden.
    retried = [r for r in results if r["connect_errors"]]
    if retried:
        print(f"\n{len(retried)} connect(s) retried: {[r['connect_errors'] for r in retried]}")
        print(trouble(recorder, replayer))
    assert len(retried) <= len(results) // 100, "more than 1% of the connections failed"
    seconds = sorted(r["seconds"] for r in results)
    print(f"\n200 requests in {wall:.1f} s; latency p50 {seconds[100]:.2f} s, max {seconds[-1]:.2f} s")
    assert seconds[-1] < 20 * seconds[100], "a request waited far longer than the others: serialised somewhere"

    kinds = [sum(job["kind"] == kind for jobs in plans for job in jobs) for kind in range(4)]
    texts = [json.loads(entry["body"])["messages"][0]["content"] for entry in https_upstream.stats()["log"]]
    assert sorted(texts[upstream_before:]) == sorted(
        f"new {p}-{j}" for p in range(PROCESSES) for j in range(1, PER_PROCESS, 4)
    )
    counts = recorder.stop()["counts"]
    assert counts == {**counts, "hits": kinds[0], "recorded": kinds[1], "upstream": kinds[1], "misses": 0, "errors": 0}
    counts = replayer.stop()["counts"]
    assert counts == {**counts, "hits": kinds[2], "misses": kinds[3], "upstream": 0, "errors": 0}
    files = list(Path(cassette_dir).rglob("*"))
    assert len(files) == len(known) + kinds[1] + sum(1 for f in files if f.is_dir())  # no temp file left
    for path in (f for f in files if f.is_file()):
        assert load(path)["response"]["status"] == 200


def median_hit_seconds(http: httpx.Client, text: str, count: int = 20) -> float:
    timings = []
    for _ in range(count):
        began = time.perf_counter()
        assert chat(http, text).status_code == 200
        timings.append(time.perf_counter() - began)
    return statistics.median(timings)


def test_slow_upstream_requests_do_not_delay_hits_for_other_clients(start_proxy, https_upstream):
    delay = 6.0
    proxy = start_proxy(https_upstream, cassette_mode="record")
    with proxied(proxy) as http:
        assert chat(http, "fast hit").status_code == 200
        idle = median_hit_seconds(http, "fast hit")
        with ThreadPoolExecutor(20) as pool:
            in_flight = https_upstream.count
            slow = [pool.submit(lambda i: chat(proxied(proxy), f"slow {i}", {"x-fake-delay": str(delay)}), i)
                    for i in range(20)]  # fmt: skip
            while https_upstream.count < in_flight + 20:  # all 20 are waiting on the upstream now
                time.sleep(0.02)
            loaded = median_hit_seconds(http, "fast hit")
            still_waiting = sum(not f.done() for f in slow)
            assert all(f.result().status_code == 200 for f in slow)
    ratio = loaded / idle
    print(
        f"\nhit latency idle {idle * 1000:.1f} ms, with 20 slow upstream requests {loaded * 1000:.1f} ms: x{ratio:.1f}"
    )
    assert still_waiting == 20  # the hits were measured while all 20 slow requests were in flight
    assert ratio < 10, f"hits slowed x{ratio:.1f} by slow upstream requests: something blocks the event loop"
