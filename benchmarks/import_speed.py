"""`cassette import` against libyaml reading the same files (issue 26): an import may take at most 3× what libyaml's
C loader needs just to parse the recordings.

Input: a folder of recordings, by default langchain-openai's own (the `tests/cassettes/*.yaml.gz` of its source
distribution: 102 gzip'd langchain_tests cassettes, 7.9 MB of YAML), fetched once with `pip download` into
`benchmarks/.cache/`. In each round, back to back, the order alternating:
- floor: every file read, gunzip'd and loaded with `yaml.load(text, Loader=yaml.CSafeLoader)`: parsing alone;
- import: `cassette import FOLDER --dir <a fresh folder> --hosts '*' --scope test`, in this process, writing
  every cassette (atomic writes, fsync included);
- dry run: the same with `--dry-run`: everything but the writes.
Each ratio is the median of the per-round ratios, so the machine's load drifting hits both sides alike; CPU time
(this process's, threads included) is given beside wall time, as other loads on the machine move it less.

    .venv/test/bin/python benchmarks/import_speed.py [FOLDER] [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml
from cassette_proxy import cli
from cassette_proxy.core.migration.recording_formats import LIBYAML

CACHE = Path(__file__).parent / ".cache"
SDIST = "langchain-openai==1.7.4"


def langchain_openai_cassettes() -> Path:
    """langchain-openai's recorded cassettes, from its sdist on PyPI (downloaded once)."""
    folder = CACHE / "langchain_openai-1.7.4" / "tests" / "cassettes"
    if folder.is_dir():
        return folder
    CACHE.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", SDIST, "-d", str(CACHE)],
        check=True,
    )
    with tarfile.open(next(CACHE.glob("langchain_openai-1.7.4.tar.gz"))) as sdist:
        members = [m for m in sdist.getmembers() if "/tests/" in m.name]
        sdist.extractall(CACHE, members=members, filter="data")
    return folder


def timed(work) -> tuple[float, float]:
    """(wall, CPU) seconds of `work()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def floor(files: list[Path]) -> tuple[float, float]:
    def parse() -> None:
        for path in files:
            raw = path.read_bytes()
            yaml.load(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, Loader=yaml.CSafeLoader)

    return timed(parse)


def ours(folder: Path, dry_run: bool) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="import-bench-") as out:
        args = ["import", str(folder), "--dir", out, "--hosts", "*", "--scope", "test"]
        with contextlib.redirect_stdout(io.StringIO()):
            return timed(lambda: cli.main([*args, "--dry-run"] if dry_run else args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="recordings to import (default: langchain-openai's)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    folder = (args.folder or langchain_openai_cassettes()).resolve()
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".yaml", ".yaml.gz", ".yml")))
    # The test scope finds each file's test module under the folder's parent, as from the project's root.
    os.chdir(folder.parent.parent if folder.parent.name == "tests" else folder.parent)
    print(f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.1f} MB on disk; libyaml: {LIBYAML}; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    rounds = []
    for n in range(args.rounds):
        systems = [("floor", lambda: floor(files)), ("import", lambda: ours(folder, False)),
                   ("dry run", lambda: ours(folder, True))]  # fmt: skip
        times = dict((name, measure()) for name, measure in (systems if n % 2 == 0 else systems[::-1]))
        rounds.append(times)
        print(
            f"round {n + 1}: "
            + ", ".join(f"{name} {wall:.3f} s ({cpu:.3f} CPU)" for name, (wall, cpu) in times.items())
        )
    print()
    print("| | median wall s | median ratio to the floor | median CPU s | CPU ratio |")
    print("|---|---|---|---|---|")
    for name in ("floor", "import", "dry run"):
        wall, cpu = (statistics.median(r[name][i] for r in rounds) for i in (0, 1))
        ratios = [statistics.median(r[name][i] / r["floor"][i] for r in rounds) for i in (0, 1)]
        print(f"| {name} | {wall:.3f} | {ratios[0]:.2f}× | {cpu:.3f} | {ratios[1]:.2f}× |")
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
