"""What grows with the work: misses in big folders, big cassettes, bursts of connections (issue 16).

Used by run.py (parts 5-7); each part takes the process factories of run.py so
that every system is started, probed and stopped the same way.

- Misses: one endpoint folder holding 200 … 100,000 cassettes; the first miss
  of a run (it lists the folder) and the misses after it.
- Big bodies: while `CONCURRENT` clients fetch big cassettes for the first
  time, another client's small hits are timed; against the floor answering a
  ready body of the same size, and against ours with the big cassettes parsed
  on the event loop (in_loop_addon.py: what the proxy did before), from cassettes
  as recording writes them now (a big JSON body as text) and as before (JSON). The peak
  RSS is of the proxy and its replay workers together, sampled every 10 ms.
- Burst: `BURST` connections opened at once, one small request each.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import load
import workload
from cassette_proxy.core.files.cassette_file import body_fields, dumps, large_json_as_text, new_cassette
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.keys import key

HOST = "127.0.0.1"
CONCURRENT = 3
REAL_CANDIDATES = 200
"""Cassettes of the miss part written for real (keyed); the others are copies of the last one, 100× faster."""
BURST = 500
MB = 1024 * 1024


def write_cassette(root: Path, port: int, request_body: bytes, response_body, as_recorded: bool = True) -> Path:
    """A cassette for this request body, in the real format, keyed as the addon keys it; `as_recorded`:
    as recording writes it now (a big JSON body as text), else as it did before (JSON)."""
    headers = workload.request_headers(HOST, port, request_body)
    facts = key.RequestFacts(
        "POST", "http", HOST, port, workload.CHAT_PATH, [], headers, request_body, "application/json"
    )
    ident = key.identity(facts)
    cassette_key = key.key_of(ident)
    request = {"method": "POST", "url": ident["url"], "headers": ident["headers"], **body_fields(request_body, "json")}
    response = {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json"}
    response["body"] = response_body
    cassette = new_cassette(cassette_key, request, response, {"cassette_proxy": "benchmark"})
    if as_recorded:
        cassette = large_json_as_text(cassette)
    path = root / relative_name("http", HOST, port, workload.CHAT_PATH, cassette_key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(dumps(cassette))
    return path


def embeddings(size: int) -> tuple[dict, int]:
    """An embeddings answer of about `size` bytes and the exact length of its replay; rows share one list,
    so that a 200 MB body costs the benchmark little memory to write."""
    rng = random.Random(size)
    row = {"object": "embedding", "index": 0, "embedding": [rng.uniform(-1, 1) for _ in range(1536)]}
    count = max(1, size // len(json.dumps(row)))
    body = {"object": "list", "data": [row] * count, "model": "text-embedding-3-small"}
    return body, len(json.dumps(body, ensure_ascii=False).encode())


class PeakRss(threading.Thread):
    """The peak resident memory of a process and its children (the replay workers), sampled every 10 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.running = pid, 0, True

    def run(self) -> None:
        while self.running:
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self.pid))
            time.sleep(0.01)

    def stop(self) -> float:
        self.running = False
        self.join()
        return self.peak_kb / 1024


def tree_rss_kb(pid: int) -> int:
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += tree_rss_kb(int(child))
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


def part_misses(folder: Path, port: int, counts: list[int], start_ours: Callable, misses: int) -> list[dict]:
    """Miss latency with `count` cassettes in the miss's endpoint folder, fresh proxy per count."""
    cassettes, have, rows = folder / "miss-cassettes", 0, []
    for count in counts:
        began = time.perf_counter()
        for i in range(have, count):
            if i < REAL_CANDIDATES:
                body = workload.synthetic_body(i)
                template = write_cassette(cassettes, port, body, workload.answer_of(body))
            else:
                # The rest: copies, older than the real ones (a miss compares with the newest 200 only).
                copy = template.with_name(f"{i:032x}.json")
                copy.write_bytes(template.read_bytes())
                os.utime(copy, (time.time() - 86400, time.time() - 86400))
        written, have = time.perf_counter() - began, count
        hit = workload.raw_request(HOST, port, workload.synthetic_body(0), via_proxy=True)
        proxy = start_ours(cassettes, f"ours_misses_{count}").start(hit)
        try:
            timings = []
            for m in range(misses + 1):
                request = workload.raw_request(HOST, port, workload.chat_body(f"never recorded {m}"), via_proxy=True)
                sent = time.perf_counter()
                status, _ = load.answer(HOST, proxy.port, request)
                timings.append((time.perf_counter() - sent) * 1000)
                if status != 409:
                    raise RuntimeError(f"a miss got {status}")
        finally:
            proxy.stop()
        rows.append(
            {
                "count": count,
                "first_miss_ms": round(timings[0], 1),
                "miss_p50_ms": round(statistics.median(timings[1:]), 1),
                "miss_max_ms": round(max(timings[1:]), 1),
            }
        )
        print(f"  {count:,} cassettes (written in {written:.0f} s): {rows[-1]}", flush=True)
    return rows


async def _small_hits_during(port: int, small: bytes, big: list[bytes], expected_length: int) -> dict:
    latencies: list[float] = []
    done = asyncio.Event()

    async def small_client() -> None:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            while not done.is_set():
                sent = time.perf_counter()
                writer.write(small)
                status, _ = await load.read_response(reader)
                latencies.append((time.perf_counter() - sent) * 1000)
                if status != 200:
                    raise RuntimeError(f"a small hit got {status}")
        finally:
            writer.close()

    async def big_client(request: bytes) -> float:
        reader, writer = await asyncio.open_connection(HOST, port, limit=2**26)
        try:
            sent = time.perf_counter()
            writer.write(request)
            status, body = await load.read_response(reader)
            if status != 200 or len(body) != expected_length:
                raise RuntimeError(f"a big replay got {status} with {len(body)} bytes, not {expected_length}")
            return time.perf_counter() - sent
        finally:
            writer.close()

    task = asyncio.create_task(small_client())
    await asyncio.sleep(0.3)
    before = len(latencies)
    began = time.perf_counter()
    big_seconds = await asyncio.gather(*(big_client(r) for r in big))
    window = time.perf_counter() - began
    done.set()
    await task
    during = latencies[before:] or [0.0]
    return {
        "small_p50_ms": round(statistics.median(during), 2),
        "small_max_ms": round(max(during), 1),
        "small_hits_during": len(during),
        "big_max_s": round(max(big_seconds), 2),
        "window_s": round(window, 2),
    }


def part_big_bodies(
    folder: Path, port: int, sizes_mb: list[int], rss_sizes_mb: list[int], systems: dict[str, Callable]
) -> dict:
    """`systems`: name → (factory, as_recorded): the factory makes an unstarted Mitmdump from (cassette folder,
    name, big body bytes); as_recorded: whether it replays cassettes as recording writes them now."""
    cassettes = folder / "big-cassettes"
    small_body = workload.synthetic_body(0)
    write_cassette(cassettes, port, small_body, workload.answer_of(small_body))
    small = workload.raw_request(HOST, port, small_body, via_proxy=True)
    stalls, memory = [], []
    for size_mb in sorted(set(sizes_mb) | set(rss_sizes_mb)):
        began = time.perf_counter()
        body, length = embeddings(size_mb * MB)
        bigs: dict[bool, list[bytes]] = {True: [], False: []}
        file_sizes: dict[bool, int] = {}
        for as_recorded in (True, False):
            for j in range(CONCURRENT if size_mb in sizes_mb else 1):
                request_body = workload.chat_body(f"big-{size_mb}-{j}-{'text' if as_recorded else 'json'}")
                file = write_cassette(cassettes, port, request_body, body, as_recorded)
                bigs[as_recorded].append(workload.raw_request(HOST, port, request_body, via_proxy=True))
            file_sizes[as_recorded] = file.stat().st_size
        del body
        print(f"  {size_mb} MB: cassettes of {file_sizes[True] / MB:.0f} MB (text) and {file_sizes[False] / MB:.0f} MB (JSON) written in "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        for name, (make, as_recorded) in systems.items():
            big = bigs[as_recorded]
            if size_mb in sizes_mb:
                proxy = make(cassettes, f"{name}_stall_{size_mb}", length).start(small)
                try:
                    row = asyncio.run(_small_hits_during(proxy.port, small, big, length))
                finally:
                    proxy.stop()
                stalls.append({"system": name, "body_mb": round(length / MB, 1), **row})
                print(f"    {stalls[-1]}", flush=True)
            if size_mb in rss_sizes_mb:
                proxy = make(cassettes, f"{name}_rss_{size_mb}", length).start(small)
                try:
                    start_mb = tree_rss_kb(proxy.process.pid) / 1024
                    sampler = PeakRss(proxy.process.pid)
                    sampler.start()
                    sent = time.perf_counter()
                    row = asyncio.run(_small_hits_during(proxy.port, small, big[:1], length))
                    seconds = time.perf_counter() - sent
                    peak = sampler.stop()
                finally:
                    proxy.stop()
                memory.append(
                    {
                        "system": name,
                        "body_mb": round(length / MB, 1),
                        "cassette_file_mb": round(file_sizes[as_recorded] / MB, 1),
                        "rss_start_mb": round(start_mb, 1),
                        "peak_rss_mb": round(peak, 1),
                        "peak_over_start_per_body": round((peak - start_mb) / (length / MB), 2),
                        "first_replay_s": round(seconds, 2),
                        "small_max_ms": row["small_max_ms"],
                    }
                )
                print(f"    {memory[-1]}", flush=True)
        for file in cassettes.rglob("*.json"):
            if file.stat().st_size > MB:
                file.unlink()
    return {"concurrent": CONCURRENT, "stalls": stalls, "memory": memory}


async def _burst(port: int, request: bytes, count: int) -> dict:
    async def one() -> float:
        sent = time.perf_counter()
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            writer.write(request)
            status, _ = await load.read_response(reader)
            if status != 200:
                raise RuntimeError(f"status {status}")
            return time.perf_counter() - sent
        finally:
            writer.close()

    began = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    answered = sorted(r for r in results if isinstance(r, float))
    failures = [f"{type(r).__name__}: {r}" for r in results if not isinstance(r, float)]
    return {
        "connections": count,
        "answered": len(answered),
        "failed": len(failures),
        "first_failure": failures[0] if failures else None,
        "p50_s": round(statistics.median(answered), 3) if answered else None,
        "max_s": round(answered[-1], 3) if answered else None,
        "wall_s": round(time.perf_counter() - began, 2),
    }


def part_burst(folder: Path, port: int, systems: dict[str, Callable], count: int = BURST) -> list[dict]:
    cassettes = folder / "burst-cassettes"
    body = workload.synthetic_body(0)
    write_cassette(cassettes, port, body, workload.answer_of(body))
    request = workload.raw_request(HOST, port, body, via_proxy=True)
    rows = []
    for name, (make, _) in systems.items():
        proxy = make(cassettes, f"{name}_burst", 0).start(request)
        try:
            rows.append({"system": name, **asyncio.run(_burst(proxy.port, request, count))})
        finally:
            proxy.stop()
        print(f"  {rows[-1]}", flush=True)
    return rows
