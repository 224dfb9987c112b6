"""How long `cassette view`'s served index takes on a big folder: cold (every summary read) and warm (cached).

    python benchmarks/view_index.py [COUNT]   (default 10000; run with the test environment's python)

Writes COUNT cassettes with the store's own writer (half whole chat answers,
half Anthropic streams of 60 events, the shapes the fake upstream sends) to a
temporary folder, serves it with `cassette view` on a free port, and times
GET /api/index as the page does: on a first start (every file read and
summarised in the background; the first answer lists what is ready, the page
asks again until nothing is pending), a reload in the same run (unchanged
files come from memory), and the next start (summaries from the cache file of
the previous run). Figures vary with the machine: compare
runs made on the same one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import fake_upstream
from cassette_proxy import store


def write_folder(root: Path, count: int) -> None:
    for n in range(count):
        prompt = f"Question number {n}: what is {n} squared, and why?"
        key = f"{n:032x}"
        if n % 2:
            body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
            response = {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json",
                        "body": fake_upstream.openai_chat(body, f"echo: {prompt}")}  # fmt: skip
            url, folder = "https://api.openai.com/v1/chat/completions", "api.openai.com/v1/chat/completions"
        else:
            body = {"model": "claude-test-model", "max_tokens": 64, "messages": [{"role": "user", "content": prompt}]}
            text = " ".join([f"echo: {prompt}"] * 5)
            events = fake_upstream.anthropic_stream(body, text, error=False)
            response = {"status": 200, "headers": {"content-type": "text/event-stream"},
                        **store.events_fields([{"ms": 20 * i, "text": e} for i, e in enumerate(events)])}  # fmt: skip
            url, folder = "https://api.anthropic.com/v1/messages", "api.anthropic.com/v1/messages"
        request = {"method": "POST", "url": url, "headers": {}, "body_format": "json", "body": body}
        cassette = store.new_cassette(key, request, response, {"cassette_proxy": "bench"})
        path = root / folder / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.dumps(cassette))


def time_index(cassette: str, root: Path, env: dict[str, str]) -> dict[str, float]:
    """Start `cassette view`; time its first index answer, the load until nothing is pending, and a reload."""
    view = subprocess.Popen([cassette, "view", str(root)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = view.stdout.readline().split(" at ", 1)[1].split()[0]
        started = time.perf_counter()
        reply = httpx.get(url + "api/index", timeout=300).json()
        figures = {"first_answer_s": time.perf_counter() - started, "first_answer_listed": len(reply["cassettes"])}
        while reply["pending"]:  # as the page does: ask again until every summary is read
            time.sleep(1)
            reply = httpx.get(url + "api/index", timeout=300).json()
        figures["complete_s"] = time.perf_counter() - started
        started = time.perf_counter()
        figures["listed"] = len(httpx.get(url + "api/index", timeout=300).json()["cassettes"])
        figures["reload_s"] = time.perf_counter() - started
    finally:
        view.terminate()
        view.wait(15)
    return {name: round(value, 2) for name, value in figures.items()}


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cassettes"
        write_folder(root, count)
        size = sum(p.stat().st_size for p in root.rglob("*.json"))
        cassette = str(Path(sys.executable).with_name("cassette"))
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}
        first_start = time_index(cassette, root, env)
        next_start = time_index(cassette, root, env)
    print(json.dumps({"cassettes": count, "folder_mb": round(size / 1e6, 1), "first_start": first_start,
                      "next_start": next_start}))  # fmt: skip


if __name__ == "__main__":
    main()
