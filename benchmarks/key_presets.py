"""What the framework presets (on by default) cost a key computed afresh, against the same key without them.

    .venv/test/bin/python benchmarks/key_presets.py [--rounds 20]

A request's key is computed once per distinct request a run sees (the key cache and the preload take the
rest), so this is the cost of a first sight: `key.request_key` on chat bodies of 1 KB, 50 KB and 1 MB,
with no value to replace (the common case, where the raw-body check skips the walk) and with tool-call
ids a preset replaces. The two settings run interleaved, round after round; each figure is the median of
the per-round ratios (presets / none), as benchmarks/README.md's method asks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid

from cassette_proxy.core.keys.key import RequestFacts, request_key
from cassette_proxy.core.keys.recipe import make_recipe

PRESETS = make_recipe().patterns
NONE = make_recipe(frameworks=()).patterns


def chat(size: int, made_up: bool) -> bytes:
    """A chat body of about `size` bytes; with `made_up`, LangChain-style few-shot tool calls with fresh uuid4 ids."""
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    while len(json.dumps(messages)) < size:
        if made_up:
            call = str(uuid.uuid4())
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "Person", "arguments": "{\"name\": \"Fiona\"}"}}]})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": call, "content": "ok"})
        messages.append({"role": "user", "content": "Summarise the quarterly report for the board. " * 8})
    return json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()


def facts(body: bytes) -> RequestFacts:
    return RequestFacts(
        "POST", "https", "api.openai.com", 443, "/v1/chat/completions", [], {}, body, "application/json"
    )


def seconds_per_key(body: bytes, patterns, repeat: int) -> float:
    request = facts(body)
    started = time.perf_counter()
    for _ in range(repeat):
        request_key(request, (), (), patterns)
    return (time.perf_counter() - started) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print("| body | presets on / off (median of per-round ratios) | off: µs per key | on: µs per key |")
    print("|---|---|---|---|")
    for size, repeat in ((1_000, 400), (50_000, 40), (1_000_000, 3)):
        for made_up in (False, True):
            body = chat(size, made_up)
            ratios, off, on = [], [], []
            for i in range(args.rounds):
                order = (NONE, PRESETS) if i % 2 == 0 else (PRESETS, NONE)  # the order alternates
                timed = {id(p): seconds_per_key(body, p, repeat) for p in order}
                off.append(timed[id(NONE)])
                on.append(timed[id(PRESETS)])
                ratios.append(on[-1] / off[-1])
            what = f"{len(body) / 1000:.0f} KB" + (", made-up ids" if made_up else "")
            print(f"| {what} | {statistics.median(ratios):.2f} | {statistics.median(off) * 1e6:.0f} | "
                  f"{statistics.median(on) * 1e6:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
