"""Per-test recordings of Node suites run in parallel, as users run them: Vitest with 4 workers (forks, threads) and
`node --test` with 4 file processes sharing one proxy, an Express app reached in-process through supertest and (Vitest)
as a server the suite starts (tests/node/parallel).

Every test asks with its own id as the prompt, so a recording in another test's folder is caught by reading it.
One proxy per `cassette run`; the record run and the offline replays share the cassette folder.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from cassette_proxy.core.traffic.per_test import folder_of_test
from harness import FAKE_OPENAI_KEY, ROOT

NODE_SUITE = ROOT / "tests" / "node"
VITEST = ["npx", "vitest", "run", "--config", "parallel/vitest.config.mjs"]
NODE_TEST = [
    "node",
    "--test",
    "--test-concurrency=4",
    *(f"parallel/node_{n}.mjs" for n in ("one", "two", "three", "four")),
]
JEST = ["npx", "jest", "--config", "parallel/jest.config.cjs"]
PLAYWRIGHT = ["npx", "playwright", "test", "--config", "parallel/playwright.config.mjs"]
SUITES = {
    # runner: (command, extra environment, tests, what its output says when they all pass)
    "vitest-forks": (VITEST, {"VITEST_POOL": "forks"}, 12, "12 passed"),
    "vitest-threads": (VITEST, {"VITEST_POOL": "threads"}, 12, "12 passed"),
    "node-test": (NODE_TEST, {}, 8, "# pass 8"),
    "jest": (JEST, {}, 8, "Tests:       8 passed"),
    # Three tests at once in one process, each body in withTest: 6 recordings (the test's and its app call's).
    "node-test-concurrent": (["node", "--test", "parallel/node_concurrent.mjs"], {}, 6, "# pass 3"),
    # Debian's chromium, 3 workers, the app started by Playwright's webServer (under `cassette run`: the preload).
    "playwright": (PLAYWRIGHT, {"APP_PORT": "free"}, 3, "3 passed"),
}


def run_suite(tmp_path: Path, upstream, mode: str, command: list[str], extra: dict) -> tuple[object, dict]:
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream), "OPENAI_API_KEY": FAKE_OPENAI_KEY, **extra}
    if env.get("APP_PORT") == "free":
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            env["APP_PORT"] = str(probe.getsockname()[1])
    run = cassette(
        "run", "--mode", mode, "--strict", "--dir", str(tmp_path / "cassettes"), "--report", str(report),
        "--", *command, cwd=NODE_SUITE, env=env,
    )  # fmt: skip
    assert report.exists(), run.stdout + run.stderr
    return run, json.loads(report.read_text())


def prompts_by_file(cassettes: Path) -> dict[str, str]:
    """Each recording's test folder (and file name) → the test id its prompt names."""
    found = {}
    for path in cassettes.rglob("*.json"):
        prompt = json.loads(path.read_text())["request"]["body"]["messages"][-1]["content"]
        folder = path.relative_to(cassettes).as_posix().split("/api.openai.com/")[0]
        found[f"{folder} {path.name}"] = prompt.removesuffix(" (app)")
    return found


@pytest.mark.parametrize("runner", SUITES)
def test_parallel_workers_record_each_test_into_its_own_folder_and_replay_offline(tmp_path, https_upstream, runner):
    command, extra, tests, passed = SUITES[runner]
    recorded, report = run_suite(tmp_path, https_upstream, "record", command, extra)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert passed in recorded.stdout + recorded.stderr  # Jest reports on stderr
    assert report["counts"]["recorded"] == tests and report["errors"] == []
    # Overlapping starts in one process are in the summary, though withTest kept every request apart.
    overlaps = 2 if runner == "node-test-concurrent" else 0
    assert len(report["test_notices"]) == overlaps
    assert all("had not ended" in notice for notice in report["test_notices"])
    files = prompts_by_file(tmp_path / "cassettes")
    assert len(files) == tests
    assert {name: folder_of_test(test) for name, test in files.items()} == {name: name.split()[0] for name in files}
    assert all("::" in test and test.startswith("parallel/") for test in files.values())  # the file is in it
    for cassette_file in (tmp_path / "cassettes").rglob("*.json"):
        assert "x-cassette-test" not in cassette_file.read_text()

    for _ in range(2):
        replayed, report = run_suite(tmp_path, https_upstream, "replay", command, extra)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert passed in replayed.stdout + replayed.stderr
        assert (report["counts"]["hits"], report["counts"]["misses"], report["counts"]["upstream"]) == (tests, 0, 0)
    assert https_upstream.count == tests


UNATTRIBUTED = """
import json, os, sys, httpx
proxy = os.environ["CASSETTE_PROXY_URL"]
token = {"x-cassette-control-token": os.environ["CASSETTE_CONTROL_TOKEN"]}
with httpx.Client(proxy=proxy, trust_env=False) as control:
    for runner, test in (("1", "a.test.js::x"), ("2", "b.test.js::y")):
        body = {"test": test, "runner": runner, "options": {"scope": "test"}}
        control.post("http://cassette.control/v1/test/start", json=body, headers=token).raise_for_status()
reply = httpx.post(
    "https://api.openai.com/v1/chat/completions",
    headers={"authorization": "Bearer " + sys.argv[1]},
    json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "whose am I?"}]},
    timeout=30,
)
print(reply.status_code, reply.json()["error"]["type"])
"""
"""Two workers' tests run; a client that sends no carrier (no preload) asks: its test cannot be named."""


def test_a_request_no_test_can_be_named_for_is_refused_in_record_and_fails_strict(tmp_path, https_upstream):
    run = cassette(
        "run", "--mode", "record", "--strict", "--dir", str(tmp_path / "cassettes"),
        "--", sys.executable, "-c", UNATTRIBUTED, FAKE_OPENAI_KEY,
        cwd=tmp_path, env={"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)},
    )  # fmt: skip
    assert "428 cassette_unattributed" in run.stdout, run.stdout + run.stderr
    assert run.returncode != 0
    assert (
        "error cassette_unattributed" in run.stderr and "2 test(s) run now (a.test.js::x, b.test.js::y)" in run.stderr
    )
    assert "--strict: failing the run for 1 errors" in run.stderr
    assert not (tmp_path / "cassettes").exists() or not any((tmp_path / "cassettes").rglob("*.json"))
    assert https_upstream.count == 0
