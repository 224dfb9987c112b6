"""A realtime session replayed through the proxy against the same session live on loopback, interleaved.

    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/realtime_session.py [--rounds N]

The session (the `websockets` library, OpenAI Realtime shape): connect, `session.update`, a user text,
`response.create`, read to `response.done` (about 40 text deltas), close. Three systems: the session
against tests/support/fake_realtime.py directly (no proxy); through a plain mitmdump relaying it to the
fake (the floor: what mitmproxy itself costs); and ours, through mitmdump with the addon in replay mode,
played from the cassette by the proxy's own session server. Each round runs the three in a random order;
the claim is the median of the per-round ratios. Every process listens on 127.0.0.1 and is stopped by PID.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "support")]

import websockets  # noqa: E402
from harness import SUPPORT, FakeUpstream, Proxy, free_port, mitmdump_path, stop  # noqa: E402

URL = "ws://api.openai.com/v1/realtime?model=gpt-realtime"
TEXT = " ".join(f"word{i}" for i in range(40))


async def one_session(url: str, proxy: str | None) -> int:
    """The session's server events; the caller times it."""
    events = 0
    async with websockets.connect(url, proxy=proxy, compression=None) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "Be brief."}}))
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TEXT}]}
        await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.send(json.dumps({"type": "response.create"}))
        async for raw in ws:
            events += 1
            if json.loads(raw)["type"] == "response.done":
                break
    return events


def timed(url: str, proxy: str | None) -> float:
    began = time.perf_counter()
    events = asyncio.run(one_session(url, proxy))
    assert events > 40, events
    return time.perf_counter() - began


def plain_mitmdump(folder: Path) -> tuple[subprocess.Popen, str]:
    """mitmdump with no addon, on a free port, once it accepts connections."""
    port = free_port()
    args = [
        mitmdump_path(),
        "--listen-host",
        "127.0.0.1",
        "-p",
        str(port),
        "--set",
        f"confdir={folder}",
        "--set",
        "flow_detail=0",
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    stop(process)
    raise RuntimeError("mitmdump did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        upstream = FakeUpstream(folder / "upstream", script=SUPPORT / "fake_realtime.py").start()
        direct = upstream.url.replace("http://", "ws://") + "/v1/realtime?model=gpt-realtime"
        recorder = Proxy(
            folder / "record", folder / "cassettes", upstream, cassette_mode="record", flow_detail=0
        ).start()
        timed(URL, recorder.url)
        assert recorder.stop()["counts"]["recorded"] == 1
        player = Proxy(folder / "replay", folder / "cassettes", cassette_mode="replay", flow_detail=0).start()
        relay, relay_url = plain_mitmdump(folder / "relay")
        systems = {"direct": (direct, None), "relay": (direct, relay_url), "ours": (URL, player.url)}
        times: dict[str, list[float]] = {name: [] for name in systems}
        try:
            for _ in range(3):  # warm-up: imports, the session server's start, the OS's caches
                for url, proxy in systems.values():
                    timed(url, proxy)
            for _ in range(args.rounds):
                for name in random.sample(list(systems), len(systems)):
                    times[name].append(timed(*systems[name]))
            report = player.stop()
        finally:
            player.stop()
            stop(relay)
            upstream.stop()
    assert report["counts"]["hits"] == args.rounds + 3 and report["counts"]["misses"] == 0, report["counts"]
    result = {"rounds": args.rounds}
    result |= {f"{name}_median_ms": round(statistics.median(t) * 1000, 1) for name, t in times.items()}
    for name, base in (("ours_over_relay", "relay"), ("relay_over_direct", "direct")):
        ours = times["ours"] if name.startswith("ours") else times["relay"]
        result[name] = round(statistics.median(a / b for a, b in zip(ours, times[base], strict=True)), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
