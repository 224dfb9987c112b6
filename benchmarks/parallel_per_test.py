"""Per-test recordings in parallel against the shared scope and against a serial run (issue 35).

The Vitest suite of tests/node/parallel (12 tests, 4 files, an Express app in-process and as a started server)
replayed offline through `cassette run --strict`, in interleaved rounds:

- per-test, 4 workers: the helper announces every test, each request carries its test (the test scope);
- shared scope, 4 workers: no helper (CASSETTE_NODE_TEST_HOOKS unset), one recording per distinct request;
- per-test, serial: the same as the first, one worker, one file at a time.

Each is the wall time of the whole `cassette run` (proxy start included), as a user waits for it; the ratios are the
medians of the per-round ratios. Run alone, with the venvs of scripts/test and `npm ci` done in tests/node:

    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/parallel_per_test.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "tests" / "support")]

from cassette_command import CASSETTE, redirect_args  # noqa: E402
from harness import FAKE_OPENAI_KEY, FakeUpstream, make_certificate  # noqa: E402

NODE_SUITE = ROOT / "tests" / "node"
VITEST = ["npx", "vitest", "run", "--config", "parallel/vitest.config.mjs"]
SYSTEMS = {
    "per-test, 4 workers": [*VITEST],
    "shared scope, 4 workers": ["env", "-u", "CASSETTE_NODE_TEST_HOOKS", *VITEST],
    "per-test, serial": [*VITEST, "--maxWorkers=1", "--no-file-parallelism"],
}


def cassette_run(mode: str, folder: Path, command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    run = subprocess.run(
        [CASSETTE, "run", "--mode", mode, "--strict", "--dir", str(folder), "--", *command],
        cwd=NODE_SUITE, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    took = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command)} ({mode}) failed:\n{run.stdout}\n{run.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "certs").mkdir()
        upstream = FakeUpstream(base / "upstream", make_certificate(base / "certs")).start()
        try:
            env = {**os.environ, "CASSETTE_MITMDUMP_ARGS": redirect_args(upstream), "OPENAI_API_KEY": FAKE_OPENAI_KEY}
            folders = {"per-test": base / "per-test", "shared": base / "shared"}
            cassette_run("record", folders["per-test"], SYSTEMS["per-test, 4 workers"], env)
            cassette_run("record", folders["shared"], SYSTEMS["shared scope, 4 workers"], env)
            times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
            names = list(SYSTEMS)
            for round_ in range(rounds):
                for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # the order rotated
                    folder = folders["shared" if name.startswith("shared") else "per-test"]
                    times[name].append(cassette_run("replay", folder, SYSTEMS[name], env))
        finally:
            upstream.stop()
    shared = times["shared scope, 4 workers"]
    print(f"| system ({rounds} rounds) | median s | vs shared scope, 4 workers |")
    print("|---|---|---|")
    for name, values in times.items():
        ratio = statistics.median(v / s for v, s in zip(values, shared, strict=True))
        print(f"| {name} | {statistics.median(values):.2f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
