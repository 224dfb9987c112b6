"""The Node test helper (launch/node_test_hooks.cjs) through `cassette run -- node --test`: a node:test file
announces its tests, so with the test scope and sequences each test replays its own answers, alone or together."""

from __future__ import annotations

import json

from cassette_command import cassette, redirect_args
from harness import ROOT

NODE_SUITE = ROOT / "tests" / "node"
FILE = "per_test/sequence.mjs"
FIRST, SECOND = "first asks twice", "second asks twice"


def run_node(tmp_path, upstream, *args: str, mode: str = "replay") -> tuple[dict, dict]:
    results, report = tmp_path / "results.jsonl", tmp_path / "report.json"
    results.unlink(missing_ok=True)
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream), "RESULTS": str(results)}
    run = cassette(
        "run", "--mode", mode, "--dir", str(tmp_path / "cassettes"), "--report", str(report),
        "--", "node", "--test", *args, FILE, cwd=NODE_SUITE, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    got = dict(json.loads(line) for line in results.read_text().splitlines())
    return got, json.loads(report.read_text())


def test_node_tests_announced_by_the_helper_keep_their_own_sequences(tmp_path, https_upstream):
    recorded, report = run_node(tmp_path, https_upstream, mode="record")
    assert recorded == {
        FIRST: ["#1 echo: same question", "#2 echo: same question"],
        SECOND: ["#3 echo: same question", "#4 echo: same question"],
    }
    assert {test: entry["recorded"] for test, entry in report["tests"].items()} == {
        f"{FILE}::{FIRST}": 2,
        f"{FILE}::{SECOND}": 2,
    }
    folders = {p.parent.relative_to(tmp_path / "cassettes").parts[:4] for p in (tmp_path / "cassettes").rglob("*.json")}
    assert folders == {
        ("tests", "per_test", "sequence.mjs", "first_asks_twice"),
        ("tests", "per_test", "sequence.mjs", "second_asks_twice"),
    }

    alone, report = run_node(tmp_path, https_upstream, "--test-name-pattern=second")
    assert alone == {SECOND: recorded[SECOND]}
    assert (report["counts"]["hits"], report["counts"]["misses"], report["counts"]["upstream"]) == (2, 0, 0)
    together, _ = run_node(tmp_path, https_upstream)
    assert together == recorded
    assert https_upstream.count == 4
