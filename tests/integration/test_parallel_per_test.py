"""Per-test recordings of a Node suite run in parallel, as users run it: Vitest with 4 workers sharing one proxy, an
Express app reached in-process through supertest and as a server the suite starts (tests/node/parallel).

Every test asks with its own id as the prompt, so a recording in another test's folder is caught by reading it.
One proxy per `cassette run`; the record run and the offline replays share the cassette folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cassette_command import cassette, redirect_args
from cassette_proxy.core.per_test import test_dir
from harness import FAKE_OPENAI_KEY, ROOT

NODE_SUITE = ROOT / "tests" / "node"
VITEST = ["npx", "vitest", "run", "--config", "parallel/vitest.config.mjs"]
TESTS = 12  # 4 files x 3 tests


def vitest(tmp_path: Path, upstream, mode: str, pool: str = "forks") -> tuple[object, dict]:
    report = tmp_path / "report.json"
    report.unlink(missing_ok=True)
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream), "VITEST_POOL": pool, "OPENAI_API_KEY": FAKE_OPENAI_KEY}
    run = cassette(
        "run", "--mode", mode, "--strict", "--dir", str(tmp_path / "cassettes"), "--report", str(report),
        "--", *VITEST, cwd=NODE_SUITE, env=env,
    )  # fmt: skip
    assert report.exists(), run.stdout + run.stderr
    return run, json.loads(report.read_text())


def prompts_by_folder(cassettes: Path) -> dict[str, str]:
    """Each recording's test folder → the prompt it holds (the id of the test that sent it)."""
    found = {}
    for path in cassettes.rglob("*.json"):
        prompt = json.loads(path.read_text())["request"]["body"]["messages"][-1]["content"]
        folder = path.relative_to(cassettes).as_posix().split("/api.openai.com/")[0]
        assert folder not in found, f"two recordings in {folder}"
        found[folder] = prompt
    return found


@pytest.mark.parametrize("pool", ["forks", "threads"])
def test_vitest_workers_record_each_test_into_its_own_folder_and_replay_offline(tmp_path, https_upstream, pool):
    recorded, report = vitest(tmp_path, https_upstream, "record", pool)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert f"{TESTS} passed" in recorded.stdout
    assert report["counts"]["recorded"] == TESTS and report["errors"] == [] and report["test_notices"] == []
    folders = prompts_by_folder(tmp_path / "cassettes")
    assert len(folders) == TESTS
    assert {folder: test_dir(prompt) for folder, prompt in folders.items()} == {f: f for f in folders}
    assert all("::" in prompt and prompt.startswith("parallel/") for prompt in folders.values())  # the file is in it
    for cassette_file in (tmp_path / "cassettes").rglob("*.json"):
        assert "x-cassette-test" not in cassette_file.read_text()

    for _ in range(2):
        replayed, report = vitest(tmp_path, https_upstream, "replay", pool)
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert f"{TESTS} passed" in replayed.stdout
        assert (report["counts"]["hits"], report["counts"]["misses"], report["counts"]["upstream"]) == (TESTS, 0, 0)
    assert https_upstream.count == TESTS
