"""Big request bodies (issue 22): what a 50 MB prompt costs the other clients of the proxy.

One client sends a chat request whose messages add up to the given size (a long conversation, as an agent's context
grows); meanwhile another client sends small hits, one at a time, and the longest of them is the stall. Against the
floor (mitmdump answering a constant: what mitmproxy itself costs to receive those bytes), ours in replay (the big
request a hit: its cassette written beforehand, keyed as the addon keys it), in replay missing it (a closest
recording of the same size to diff against) and in record (the run's fake upstream answers it). The systems take
turns in `rounds` interleaved rounds; each ratio is ours against the floor of the same round.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import load
import pressure
import workload

HOST = "127.0.0.1"
MB = 1024 * 1024


def big_chat_body(size: int, last: str) -> bytes:
    """A chat request of about `size` bytes: many turns of a conversation, then `last` as the final user message."""
    turn = "The quick brown fox jumps over the lazy dog while the assistant summarises chapter after chapter. " * 40
    count = max(1, size // (len(turn) + 40))
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"{i}: {turn}"} for i in range(count)]
    messages.append({"role": "user", "content": last})
    return json.dumps({"model": "gpt-4o-mini", "messages": messages}, separators=(",", ":")).encode()


async def _small_hits_during(port: int, small: bytes, big: bytes) -> dict:
    """The small hits another client got while `big` was sent and answered (any status: a miss answers 409)."""
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

    async def big_client() -> tuple[int, float]:
        reader, writer = await asyncio.open_connection(HOST, port, limit=2**26)
        try:
            sent = time.perf_counter()
            writer.write(big)
            status, _ = await load.read_response(reader)
            return status, time.perf_counter() - sent
        finally:
            writer.close()

    task = asyncio.create_task(small_client())
    await asyncio.sleep(0.3)
    before = len(latencies)
    status, seconds = await big_client()
    await asyncio.sleep(0.05)  # a stall that outlasts the answer (a write after it) still counts
    done.set()
    await task
    during = latencies[before:] or [0.0]
    return {
        "status": status,
        "big_s": round(seconds, 2),
        "small_p50_ms": round(statistics.median(during), 2),
        "small_max_ms": round(max(during), 1),
        "small_hits_during": len(during),
    }


def part_big_requests(folder: Path, port: int, sizes_mb: list[int], rounds: int, systems: dict) -> list[dict]:
    """`systems`: name → (factory(cassette folder, name, mode), mode, expected status); `port`: the fake upstream's."""
    rows = []
    for size_mb in sizes_mb:
        began = time.perf_counter()
        hit_body = big_chat_body(size_mb * MB, f"Request big-request-{size_mb}: which chapter was longest?")
        miss_body = hit_body.replace(b"which chapter was longest?", b"which chapter was shortest?")
        small_body = workload.synthetic_body(0)
        cassettes = folder / f"big-request-{size_mb}"
        pressure.write_cassette(cassettes, port, small_body, workload.answer_of(small_body))
        pressure.write_cassette(cassettes, port, hit_body, workload.answer_of(hit_body))
        small = workload.raw_request(HOST, port, small_body, via_proxy=True)
        requests = {"hit": workload.raw_request(HOST, port, hit_body, via_proxy=True),
                    "miss": workload.raw_request(HOST, port, miss_body, via_proxy=True)}  # fmt: skip
        print(f"  {size_mb} MB: request of {len(hit_body) / MB:.1f} MB, cassettes written in "
              f"{time.perf_counter() - began:.0f} s", flush=True)  # fmt: skip
        measured: dict[str, list[dict]] = {name: [] for name in systems}
        for round_ in range(rounds):
            for name, (make, mode, expected) in systems.items():
                record_folder = folder / f"big-request-record-{size_mb}-{round_}"
                if mode == "record":
                    pressure.write_cassette(record_folder, port, small_body, workload.answer_of(small_body))
                proxy = make(record_folder if mode == "record" else cassettes, f"{name}_{size_mb}_{round_}", mode)
                proxy.start(small)
                try:
                    big = requests["miss" if name.endswith("miss") else "hit"]
                    row = asyncio.run(_small_hits_during(proxy.port, small, big))
                finally:
                    proxy.stop()
                if row["status"] != expected:
                    raise RuntimeError(f"{name}: the big request got {row['status']}, not {expected}")
                measured[name].append(row)
                print(f"    round {round_ + 1} {name}: {row}", flush=True)
        floor = [row["small_max_ms"] for row in measured["floor"]]
        for name, runs in measured.items():
            stalls = [row["small_max_ms"] for row in runs]
            rows.append(
                {
                    "system": name,
                    "body_mb": round(len(requests["hit"]) / MB, 1),
                    "small_max_ms": round(statistics.median(stalls), 1),
                    "small_max_ms_rounds": stalls,
                    "over_floor": round(statistics.median(s / f for s, f in zip(stalls, floor, strict=True)), 2),
                    "big_s": round(statistics.median(row["big_s"] for row in runs), 2),
                    "small_p50_ms": round(statistics.median(row["small_p50_ms"] for row in runs), 2),
                }
            )
            print(f"    {rows[-1]}", flush=True)
    return rows
