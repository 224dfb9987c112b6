"""Reading session cassettes: how long the proxy's event loop stalls while a 100,000-frame session is opened, and
what the hostile files of issue 33 cost before they are refused; and what the depth check (core/files/json_depth.py)
adds to parsing ordinary cassettes.

    .venv/test/bin/python benchmarks/session_read.py [--rounds N]

The stall is measured as the addon meets it (proxy/websocket/sessions.py): the session is read in a worker thread
(`asyncio.to_thread`) while the event loop runs a 1 ms ticker; the figure is the ticker's longest late wake-up,
what another client's request would wait. "plain" parses with one `json.loads` call, as before issue 33 (the C
parser holds the GIL for the whole file); "counted" is the reader now (frames counted through a hook, which
lets the loop in between objects). The hostile files are read in a child process each, for its peak RSS.
Not a test: no figure here is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "addon"), str(ROOT / "tests" / "support")]

from cassette_proxy.core.files import session_file  # noqa: E402
from cassette_proxy.core.files.cassette_file import load  # noqa: E402
from cassette_proxy.core.files.safe_read import CassetteError  # noqa: E402
from cassette_proxy.core.files.session_file import read_session  # noqa: E402
from session_samples import client, server, write_session  # noqa: E402


def plain_parse(path: Path | str, text: str) -> object:
    """The reader before issue 33: the whole file in one `json.loads` call."""
    return json.loads(text)


def realistic_frames(count: int) -> list:
    """A long realtime conversation: text deltas from the server, a client message now and then."""
    frames = []
    for i in range(count):
        if i % 50 == 0:
            frames.append(client(i, {"type": "response.create", "event_id": f"evt_{i}"}))
        else:
            frames.append(server(i, {"type": "response.output_text.delta", "event_id": f"event_{i}",
                                     "item_id": "item_1", "output_index": 0, "content_index": 0,
                                     "delta": f"word{i} "}))  # fmt: skip
    return frames


async def stall(path: Path, root: Path) -> tuple[float, float]:
    """(seconds the read took, the event loop's longest late wake-up meanwhile)."""
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, time.perf_counter() - before - 0.001)

    def read() -> None:
        read_session(path, load(path, root), root)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    started = time.perf_counter()
    await asyncio.to_thread(read)
    took = time.perf_counter() - started
    done = True
    await tick
    return took, worst


HOSTILE = """
import json, sys, time
sys.path[:0] = [sys.argv[1] + "/addon"]
from cassette_proxy.core.files import session_file
from cassette_proxy.core.files.cassette_file import CassetteError, load
from cassette_proxy.core.files.session_file import read_session
from pathlib import Path
if sys.argv[4] == "plain":
    session_file.parse_json = lambda path, text: json.loads(text)
started = time.perf_counter()
try:
    path = Path(sys.argv[2])
    read_session(path, load(path, Path(sys.argv[3])), Path(sys.argv[3]))
    outcome = "read"
except CassetteError as e:
    outcome = "refused: " + e.problem[:70]
status = Path("/proc/self/status").read_text()  # VmHWM: this program's peak, not the parent's it was forked from
peak_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))
print(json.dumps({"seconds": time.perf_counter() - started, "outcome": outcome, "peak_rss_mb": peak_kb / 1024}))
"""


def hostile(path: Path, root: Path, how: str) -> dict:
    out = subprocess.run([sys.executable, "-c", HOSTILE, str(ROOT), str(path), str(root), how],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return json.loads(out)


def hostile_files(root: Path) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    from test_session_bounds import MIB, write_with_frames

    frame = '{"from":"server","ms":0,"frame":"text","text":"0123456789"}'
    many = write_with_frames(root / "many", "[" + ",".join([frame] * 2_000_000) + "]")
    span = f'{{"from":"server","ms":0,"frame":"binary","sidecar":{{"offset":0,"length":{MIB}}}}}'
    overlapping = write_with_frames(root / "overlap", "[" + ",".join([span] * 12_000) + "]", sidecar=bytes(MIB))
    return {"2,000,000 frames (114 MB)": many, "1 MB + 1 MiB sidecar, overlapping spans": overlapping}


def parse_costs(rounds: int) -> None:
    """`cassette_file.parse` now, against the same parse with the depth check taken out (as before issue 33)."""
    from cassette_proxy.core.files import cassette_file
    from cassette_proxy.core.files.cassette_file import dumps, parse
    from samples import chat

    stream = chat("stream", "")
    events = [{"ms": i, "text": f'data: {{"choices":[{{"delta":{{"content":"w{i} "}}}}]}}\n\n'} for i in range(100_000)]
    stream["response"] = {"status": 200, "headers": {"content-type": "text/event-stream"}, "body_format": "events",
                          "body": events}  # fmt: skip
    vectors = chat("embed", "")
    vectors["response"]["body"] = {"data": [{"embedding": [0.123456] * 1536, "index": i} for i in range(60)]}
    tools = chat("tools", "")
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {}}}}
    tools["request"]["body"]["tools"] = [{"type": "function", "function": {"name": f"f{i}", "parameters": schema}}
                                         for i in range(30)]  # fmt: skip
    kinds = {"a stream of 100,000 events": dumps(stream), "60 embeddings (JSON)": dumps(vectors),
             "a chat with 30 tools": dumps(tools), "a plain chat": dumps(chat("hello", "hi there"))}  # fmt: skip
    checked = cassette_file.check_depth
    print("\n| cassette | size | parse before | parse now | now / before |\n|---|---:|---:|---:|---:|")
    for name, raw in kinds.items():
        times: dict[str, list[float]] = {"before": [], "now": []}
        repeat = max(1, 2_000_000 // len(raw))
        for _ in range(rounds):
            for how in ("before", "now"):
                cassette_file.check_depth = checked if how == "now" else (lambda text, value: value)
                started = time.perf_counter()
                for _ in range(repeat):
                    parse("x.json", raw)
                times[how].append((time.perf_counter() - started) / repeat)
        cassette_file.check_depth = checked
        before, now = statistics.median(times["before"]), statistics.median(times["now"])
        print(f"| {name} | {len(raw) / 1000:,.0f} KB | {before * 1000:.3f} ms | {now * 1000:.3f} ms | "
              f"{now / before:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--parse-only", action="store_true", help="only the depth check's cost on ordinary cassettes")
    args = parser.parse_args()
    parse_costs(args.rounds)
    if args.parse_only:
        return
    counted_parse = session_file.parse_json
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        path = write_session(root / "real", realistic_frames(args.frames))
        print(f"a {args.frames}-frame session: {path.stat().st_size / 1e6:.1f} MB\n")
        figures: dict[str, list[tuple[float, float]]] = {"plain": [], "counted": []}
        for _ in range(args.rounds):  # interleaved: the machine's load hits both alike
            for how in ("plain", "counted"):
                session_file.parse_json = plain_parse if how == "plain" else counted_parse
                figures[how].append(asyncio.run(stall(path, root / "real")))
        session_file.parse_json = counted_parse
        print("| reader | read (median s) | longest event-loop stall (median s) | (max s) |\n|---|---|---|---|")
        for how, runs in figures.items():
            took, stalls = [t for t, _ in runs], [s for _, s in runs]
            print(f"| {how} | {statistics.median(took):.2f} | {statistics.median(stalls):.3f} | {max(stalls):.3f} |")
        print("\n| hostile file | reader | outcome | seconds | peak RSS (MB) |\n|---|---|---|---|---|")
        for name, hostile_path in hostile_files(root).items():
            for how in ("plain", "counted"):
                if how == "plain" and "overlapping" in name:
                    continue  # rebuilt as before: 12 GB; the issue measured 6 GB before the kill
                figure = hostile(hostile_path, hostile_path.parent.parent.parent.parent, how)
                print(f"| {name} | {how} | {figure['outcome']} | {figure['seconds']:.2f} | "
                      f"{figure['peak_rss_mb']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    try:
        main()
    except CassetteError as e:
        sys.exit(f"benchmark: {e}")
