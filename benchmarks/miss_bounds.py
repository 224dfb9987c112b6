"""A near miss against a recording that holds a multi-megabyte string, against a plain miss (issue 33).

What the client waits for on a miss is the closest-recording search (`core/reading/miss.py`): this times that search,
in-process and in rounds, for a miss in an empty folder (the plain miss), a near miss whose recording holds a
2 MB base64 data URL while the live request holds a 130 KB one (pydantic-ai's and LangChain's multimodal
tests), and the same near miss against 20 such recordings; with the process's peak RSS growth for each.
Before the bound, the near miss got no answer in 120 s and the proxy's memory grew by about 40 MB a second.

    .venv/test/bin/python benchmarks/miss_bounds.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from cassette_proxy.core.files.cassette_file import dumps, new_cassette
from cassette_proxy.core.keys.recipe import make_recipe
from cassette_proxy.core.reading.miss import closest

URL = "https://api.openai.com/v1/chat/completions"


def request(image_bytes: int, seed: int) -> dict:
    image = "data:image/png;base64," + base64.b64encode(random.Random(seed).randbytes(image_bytes)).decode()
    content = [{"type": "text", "text": "what is in this image?"}, {"type": "image_url", "image_url": {"url": image}}]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": content}]}
    return {"method": "POST", "url": URL, "headers": {}, "body_format": "json", "body": body}


def folder_with(root: Path, count: int) -> Path:
    folder = root / "api.openai.com" / "v1" / "chat" / "completions"
    folder.mkdir(parents=True)
    for i in range(count):
        key = f"{i:032x}"
        cassette = new_cassette(key, request(1_500_000, i), {"status": 200, "headers": {}}, {})
        (folder / f"{key}.json").write_bytes(dumps(cassette))
    return folder


def timed(folder: Path, root: Path, live: dict, rounds: int) -> tuple[float, float]:
    recipe = make_recipe()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        closest(folder, root, live, recipe)
        seconds.append(time.perf_counter() - start)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    return statistics.median(seconds), grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    live = request(100_000, 999)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, count in (
            ("plain miss (empty folder)", 0),
            ("near miss, 1 recording", 1),
            ("near miss, 20 recordings", 20),
        ):
            root = Path(tmp) / name.replace(" ", "_").replace(",", "").replace("(", "").replace(")", "")
            folder = folder_with(root, count) if count else root / "api.openai.com" / "v1" / "chat" / "completions"
            results[name] = timed(folder, root, live, rounds)
    plain = results["plain miss (empty folder)"][0]
    print("| miss | median search | × plain miss | peak RSS growth |")
    print("|---|---:|---:|---:|")
    for name, (seconds, grown) in results.items():
        print(f"| {name} | {seconds * 1000:.1f} ms | {seconds / plain:.0f}× | {grown:.0f} MB |")
    print(json.dumps({name: {"seconds": s, "rss_growth_mb": g} for name, (s, g) in results.items()}))


if __name__ == "__main__":
    main()
