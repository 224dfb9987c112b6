"""A FastAPI app on one uvicorn that every xdist worker calls, started once (the usual session-fixture pattern), with
per-test recordings: each of the server's LLM calls lands in the folder of the test whose request caused it (the test's
httpx request carries its test, the server's PYTHONPATH carrier passes it on), and so does each test's own call. With a
proxy per worker (the server's calls reach one worker's proxy) and inside `cassette run` (the workers share one)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys

import pytest
from cassette_command import CASSETTE, redirect_args
from cassette_proxy.core.traffic.per_test import folder_of_test
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

APP = """
from fastapi import FastAPI
from openai import AsyncOpenAI
from pydantic import BaseModel

app = FastAPI()


class Question(BaseModel):
    prompt: str


@app.post("/ask")
async def ask(question: Question) -> dict:
    client = AsyncOpenAI(api_key="{key}", max_retries=0)
    reply = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{{"role": "user", "content": question.prompt}}]
    )
    return {{"answer": reply.choices[0].message.content}}
"""

CONFTEST = """
import os, socket, subprocess, sys, time
from pathlib import Path

import pytest

SHARED = Path(os.environ["SHARED_SERVER_DIR"])
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


@pytest.fixture(scope="session")
def app_url():
    \"\"\"One uvicorn for every worker: the first worker starts it, the others wait for its address.\"\"\"
    url_file = SHARED / "url"
    try:
        os.close(os.open(SHARED / "lock", os.O_CREAT | os.O_EXCL))
        owner = True
    except FileExistsError:
        owner = False
    if owner:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "uvicorn", "app:app", "--port", str(port), "--log-level", "warning"])
        (SHARED / "pid").write_text(str(server.pid))
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        url_file.write_text(f"http://127.0.0.1:{port}")
    while not url_file.exists():
        time.sleep(0.05)
    yield url_file.read_text()
    (SHARED / f"done-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}").touch()
    if owner:  # the others' tests may still call it: stop it once every worker is done
        while len(list(SHARED.glob("done-*"))) < WORKERS:
            time.sleep(0.05)
        server.terminate()
        server.wait(10)
"""

TESTS = """
import httpx
from openai import OpenAI


def ask(app_url, request):
    prompt = request.node.nodeid
    reply = httpx.post(app_url + "/ask", json={{"prompt": prompt}}, timeout=30)
    assert reply.status_code == 200, reply.text
    assert reply.json()["answer"] == "echo: " + prompt
    direct = OpenAI(api_key="{key}", max_retries=0).chat.completions.create(
        model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt + " (direct)"}}]
    )
    assert direct.choices[0].message.content == "echo: " + prompt + " (direct)"
{tests}
"""
ONE = """

def test_{n}(app_url, request):
    ask(app_url, request)
"""


@pytest.fixture
def suite(pytester, monkeypatch, https_upstream):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\ncassette_scope = test\n")
    pytester.makepyfile(app=APP.format(key=FAKE_OPENAI_KEY), conftest=CONFTEST)
    for module in ("test_one", "test_two", "test_three"):
        pytester.makepyfile(
            **{module: TESTS.format(key=FAKE_OPENAI_KEY, tests="".join(ONE.format(n=n) for n in range(4)))}
        )
    return pytester


def run(pytester, monkeypatch, tmp_path, name: str, *args: str, outer: bool = False):
    """`pytest -n 4`, each worker with its proxy, or (`outer`) inside `cassette run`, whose one proxy they share."""
    shared = tmp_path / name
    shared.mkdir()
    monkeypatch.setenv("SHARED_SERVER_DIR", str(shared))
    pytest_args = ["-n", "4", "-p", "no:cacheprovider", *args]
    try:
        if outer:
            mode = "record" if "--cassette-mode=record" in args else "replay"
            pytest_args = [a for a in pytest_args if not a.startswith("--cassette-mode")]
            command = [CASSETTE, "run", "--mode", mode, "--strict", "--", sys.executable, "-m", "pytest", *pytest_args]
            return pytester.run(*command, timeout=300)
        return pytester.runpytest_subprocess(*pytest_args, timeout=300)
    finally:
        if (pid := shared / "pid").exists():
            with contextlib.suppress(ProcessLookupError):  # a run that failed may have left it running
                os.kill(int(pid.read_text()), signal.SIGTERM)


@pytest.mark.parametrize("outer", [False, True], ids=["a-proxy-per-worker", "inside-cassette-run"])
def test_a_server_shared_by_xdist_workers_files_each_call_under_the_test_that_caused_it(
    suite, monkeypatch, tmp_path, https_upstream, outer
):
    recorded = run(suite, monkeypatch, tmp_path, "record", "--cassette-mode=record", outer=outer)
    recorded.assert_outcomes(passed=12)
    output = recorded.stdout.str() + recorded.stderr.str()
    assert "test announcements" not in output and "cassette_unattributed" not in output
    cassettes = suite.path / "cassettes"
    prompts: dict[str, set[str]] = {}
    for path in cassettes.rglob("*.json"):
        prompt = json.loads(path.read_text())["request"]["body"]["messages"][-1]["content"]
        folder = path.relative_to(cassettes).as_posix().split("/api.openai.com/")[0]
        prompts.setdefault(folder, set()).add(prompt)
        assert "x-cassette-test" not in path.read_text()
    assert len(prompts) == 12  # the server's call and the test's own, in the test's folder
    assert {
        folder: {folder_of_test(p.removesuffix(" (direct)")) for p in found} for folder, found in prompts.items()
    } == {folder: {folder} for folder in prompts}
    assert all(len(found) == 2 for found in prompts.values())

    for attempt in ("replay-1", "replay-2"):
        replayed = run(suite, monkeypatch, tmp_path, attempt, outer=outer)
        replayed.assert_outcomes(passed=12)
        summary = replayed.stdout.str() + replayed.stderr.str()  # `cassette run` prints it on stderr
        assert "cassette: replay: 24 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough" in summary
    assert https_upstream.count == 24
