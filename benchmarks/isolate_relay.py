"""What `cassette run --isolate` costs: the namespace's setup and the relay's extra loopback hop.

    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/isolate_relay.py [--rounds N]

In each round, interleaved and in rotated order, `cassette run` and `cassette run --isolate` each run
- `true`: the run's wall time (the namespace, the relay and the entry's Python start, on top of a run);
- a client making HITS hits on one kept connection, then NEW hits each on a new client and connection
  (the relay's per-byte and per-connection costs), timed inside the command, median per request.
Each ratio is the median of the per-round ratios (isolated / plain). Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "support")]

import samples  # noqa: E402
from harness import FAKE_OPENAI_KEY  # noqa: E402

CASSETTE = str(Path(sys.executable).with_name("cassette"))
HITS, NEW = 200, 50
CLIENT = """
import json, statistics, sys, time
import openai
def call(client):
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}])
kept, seconds = openai.OpenAI(api_key=sys.argv[1], max_retries=0), {"kept": [], "new": []}
call(kept)
for _ in range(int(sys.argv[2])):
    start = time.perf_counter(); call(kept); seconds["kept"].append(time.perf_counter() - start)
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    with openai.OpenAI(api_key=sys.argv[1], max_retries=0) as client:
        call(client)
    seconds["new"].append(time.perf_counter() - start)
print(json.dumps({name: statistics.median(values) for name, values in seconds.items()}))
"""


def run(folder: Path, isolated: bool, *command: str) -> tuple[float, str]:
    flags = ["--isolate"] if isolated else []
    start = time.perf_counter()
    done = subprocess.run(
        [CASSETTE, "run", *flags, "--", *command], cwd=folder, capture_output=True, text=True,
        env={**{k: v for k, v in os.environ.items() if k != "CASSETTE_MODE"}, "XDG_RUNTIME_DIR": str(folder)},
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"cassette run {' '.join(flags)} failed ({done.returncode}):\n{done.stderr}")
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        samples.write(folder / "cassettes", samples.chat("one", "first"))
        ratios: dict[str, list[float]] = {"run of `true`": [], "hit, kept connection": [], "hit, new client": []}
        absolute: dict[str, list[float]] = {f"{k} ({v})": [] for k in ratios for v in ("plain", "isolated")}
        for index in range(rounds):
            figures = {}
            for isolated in (index % 2 == 0, index % 2 != 0):
                label = "isolated" if isolated else "plain"
                wall, _ = run(folder, isolated, "true")
                _, out = run(folder, isolated, sys.executable, "-c", CLIENT, FAKE_OPENAI_KEY, str(HITS), str(NEW))
                medians = json.loads(out.strip().splitlines()[-1])
                figures[label] = {"run of `true`": wall, "hit, kept connection": medians["kept"],
                                  "hit, new client": medians["new"]}  # fmt: skip
            for name in ratios:
                ratios[name].append(figures["isolated"][name] / figures["plain"][name])
                for label in ("plain", "isolated"):
                    absolute[f"{name} ({label})"].append(figures[label][name])
        print(f"| {rounds} rounds | plain | --isolate | ratio (median of rounds) |\n|---|---|---|---|")
        for name in ratios:
            plain = statistics.median(absolute[f"{name} (plain)"]) * 1000
            isolated = statistics.median(absolute[f"{name} (isolated)"]) * 1000
            print(f"| {name} | {plain:.2f} ms | {isolated:.2f} ms | {statistics.median(ratios[name]):.2f}× |")


if __name__ == "__main__":
    main()
