"""Warm proxies (launch/warm_proxy.py): `cassette serve` left running, reused by `cassette run` and pytest sessions
with the same settings, refused to runs with others, stopped by `cassette serve --stop` or when idle.

Each test has its own user folder (XDG_RUNTIME_DIR), so no warm proxy outside it is seen, and stops what it started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import samples
from cassette_command import CASSETTE, cassette
from cassette_proxy.core.files.location import repeat_path
from harness import FAKE_OPENAI_KEY

pytest_plugins = ["pytester"]

ASK = """
import json, os, sys
import openai
client = openai.OpenAI(api_key=sys.argv[1], max_retries=0)
answers = [client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
           .choices[0].message.content for prompt in sys.argv[2:]]
print(json.dumps({"proxy": os.environ["HTTPS_PROXY"], "answers": answers}))
"""


def ask(*prompts: str) -> list[str]:
    return [sys.executable, "-c", ASK, FAKE_OPENAI_KEY, *prompts]


@pytest.fixture
def user(tmp_path, monkeypatch) -> Path:
    """This test's user folder; every warm proxy started in it is stopped at the end."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.delenv("CASSETTE_REPLAY_TIMING", raising=False)
    for prompt, answer in (("one", "first"), ("two", "second"), ("three", "third")):
        samples.write(tmp_path / "cassettes", samples.chat(prompt, answer))
    yield tmp_path / f"cassette-proxy-{os.getuid()}"
    cassette("serve", "--stop", cwd=tmp_path)


def detach(cwd: Path, *flags: str) -> str:
    """`cassette serve --detach FLAGS`; the warm proxy's URL."""
    started = cassette("serve", "--detach", *flags, cwd=cwd)
    assert started.returncode == 0, started.stderr
    return next(line for line in started.stdout.splitlines() if line.startswith("export HTTPS_PROXY=")).split("=")[1]


def served(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_runs_reuse_the_warm_proxy_each_with_its_own_report(tmp_path, user):
    warm = detach(tmp_path)
    first = cassette("run", "--", *ask("one"), cwd=tmp_path)
    second = cassette("run", "--report", str(tmp_path / "second.json"), "--", *ask("two", "three"), cwd=tmp_path)
    assert served(first) == {"proxy": warm, "answers": ["first"]}
    assert served(second) == {"proxy": warm, "answers": ["second", "third"]}
    for result in (first, second):
        assert f"cassette: using the warm proxy at {warm}" in result.stderr
    assert "cassette: replay: 1 hits, 0 misses" in first.stderr
    assert "cassette: replay: 2 hits, 0 misses" in second.stderr
    report = json.loads((tmp_path / "second.json").read_text())
    assert report["counts"]["hits"] == 2
    assert len(report["cassettes_used"]) == 2


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (["--mode", "record"], {}, "mode: 'record' in this run, 'replay' in the warm proxy (--mode)"),
        (["--ignore", "metadata.trace_id"], {}, "ignore: ['metadata.trace_id'] in this run, [] in the warm proxy"),
        ([], {"CASSETTE_REPLAY_TIMING": "recorded"}, "environment: CASSETTE_REPLAY_TIMING differ"),
        (["--allow-host", "cdn.example.com"], {}, "allow_hosts: ['cdn.example.com'] in this run, [] in the warm"),
    ],
)
def test_a_run_with_other_settings_is_refused_the_warm_proxy_and_starts_its_own(tmp_path, user, flags, env, named):
    warm = detach(tmp_path)
    result = cassette("run", *flags, "--", *ask("one"), cwd=tmp_path, env=env)
    assert f"cassette: not using the warm proxy at {warm}" in result.stderr
    assert named in result.stderr
    assert "Starting a proxy of its own" in result.stderr
    assert served(result)["proxy"] != warm


WAIT = """
import os, pathlib, sys, time
here = pathlib.Path(sys.argv[1])
(here / "first-started").write_text(os.environ["HTTPS_PROXY"])
while not (here / "second-done").exists():
    time.sleep(0.02)
"""


def test_a_second_run_at_once_gets_a_proxy_of_its_own(tmp_path, user):
    warm = detach(tmp_path)
    first = subprocess.Popen(
        [CASSETTE, "run", "--", sys.executable, "-c", WAIT, str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        while not (tmp_path / "first-started").exists() and first.poll() is None:
            time.sleep(0.02)
        second = cassette("run", "--", *ask("one"), cwd=tmp_path)
    finally:
        (tmp_path / "second-done").touch()
        _, first_err = first.communicate(timeout=120)
    assert (tmp_path / "first-started").read_text() == warm
    assert f"the warm proxy at {warm} (pid" in second.stderr and "is in use by another run" in second.stderr
    assert served(second) == {"proxy": served(second)["proxy"], "answers": ["first"]}
    assert served(second)["proxy"] != warm
    assert first.returncode == 0, first_err


def test_each_run_counts_its_repeats_from_one(tmp_path, user):
    """cassette_repeats=sequence on a reused proxy: the n-th identical request of a run gets the n-th recording."""
    folder = tmp_path / "cassettes"
    first = samples.chat("again", "answer 1")
    samples.write(folder, first)
    samples.write(folder, samples.chat("again", "answer 2"), repeat_path(samples.cassette_path(first), 2))
    sequence = ["--mitmdump-arg=--set", "--mitmdump-arg=cassette_repeats=sequence"]
    warm = detach(tmp_path, *sequence)
    for _ in range(2):
        result = cassette("run", *sequence, "--", *ask("again", "again"), cwd=tmp_path)
        assert served(result) == {"proxy": warm, "answers": ["answer 1", "answer 2"]}


def test_run_keep_leaves_a_warm_proxy_that_the_next_run_reuses(tmp_path, user):
    kept = cassette("run", "--keep", "--", *ask("one"), cwd=tmp_path)
    again = cassette("run", "--", *ask("two"), cwd=tmp_path)
    assert served(kept)["proxy"] == served(again)["proxy"]
    assert served(again)["answers"] == ["second"]
    assert "cassette: replay: 1 hits" in kept.stderr and "cassette: replay: 1 hits" in again.stderr


PLUGIN_SUITE = """
import os
import openai


def test_through_the_warm_proxy():
    assert os.environ["HTTPS_PROXY"] == "{warm}"
    client = openai.OpenAI(api_key="{key}", max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "one"}}])
    assert reply.choices[0].message.content == "first"
"""


def test_a_pytest_session_reuses_the_warm_proxy(pytester, tmp_path, user):
    warm = detach(tmp_path, "--dir", str(tmp_path / "cassettes"))
    pytester.makeini(f"[pytest]\ncassette = true\ncassette_dir = {tmp_path / 'cassettes'}\n")
    pytester.makepyfile(test_warm=PLUGIN_SUITE.format(warm=warm, key=FAKE_OPENAI_KEY))
    for scope in ("shared", "test"):
        result = pytester.runpytest_subprocess(f"--cassette-scope={scope}")
        result.assert_outcomes(passed=1) if scope == "shared" else result.assert_outcomes(failed=1)
        assert f"cassette: using the warm proxy at {warm}" in result.stderr.str()
    # test scope looks in the test's own folder, where nothing was recorded: a miss, and it says which test
    result.stdout.fnmatch_lines(["*test_warm.py::test_through_the_warm_proxy (1 miss)*"])


def wait_until_gone(pid: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs")


def warm_processes(user: Path) -> tuple[int, int]:
    [registration] = [json.loads(p.read_text()) for p in (user / "warm").glob("*.json")]
    return registration["pid"], registration["mitmdump_pid"]


@pytest.mark.parametrize("how", ["idle", "stop"])
def test_a_stopped_warm_proxy_leaves_no_process_and_no_file(tmp_path, user, how):
    detach(tmp_path, *(["--idle", "1s"] if how == "idle" else []))
    served(cassette("run", "--", *ask("one"), cwd=tmp_path))
    serving, mitmdump = warm_processes(user)
    private = Path(json.loads(next((user / "warm").glob("*.json")).read_text())["ca_certificate"]).parent.parent
    if how == "stop":
        stopped = cassette("serve", "--stop", cwd=tmp_path)
        assert "cassette: stopped the warm proxy at" in stopped.stdout
    for pid in (serving, mitmdump):
        wait_until_gone(pid)
    assert sorted(p.name for p in (user / "warm").iterdir()) == []
    assert not (user / "serve.env").exists()
    assert not private.exists()
    after = cassette("run", "--", *ask("one"), cwd=tmp_path)
    assert "warm proxy" not in after.stderr
    assert served(after)["answers"] == ["first"]
