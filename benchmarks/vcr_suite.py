"""Whole pytest suites replayed by VCR.py in-process and by every route of ours, start and stop included.

    bash benchmarks/run --parts vcr [--vcr-rounds 5] [--vcr-tests 36,144] [--vcr-before REV]
    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/vcr_suite.py [--rounds 5] [--before REV]

1. Generates suites shaped like real ones in a temp folder, one per size (`--tests`, default 36 and 144): six
   modules, every test builds a new SDK client (openai.OpenAI / AsyncOpenAI, anthropic.Anthropic / AsyncAnthropic;
   api keys from obviously fake values, base URLs from the SDKs' own variables) and makes one call, plain or
   streamed, sync or through asyncio.run, asserting on the answer. Every module carries `pytestmark =
   pytest.mark.vcr`; the marker is registered in pytest.ini, so it is harmless without pytest-recording.
2. Records our cassettes through a harness Proxy (record mode, upstream redirected to the fake upstream), the
   per-test ones through the plugin (`--cassette-scope test`), then VCR.py's for real: the suite under
   pytest-recording `--record-mode=all` through a *replaying* Cassette Proxy (VCR stores https://api.openai.com/...
   and the bytes the SDKs received), then the bound's table (the suite through `ideal_replay.py` forwarding to the
   fake upstream). Every count is checked.
3. Times each whole run, one process each, in interleaved rounds (order rotated): VCR.py (`-p recording
   --record-mode=none --block-network`), `cassette run` forward and reverse, the plugin in shared and in test
   scope, `cassette run` and the plugin on a warm proxy (`cassette serve --detach`, started before the rounds),
   the suite with no replay at all (base URLs at the fake upstream), the bound (a bare mitmdump answering from an
   in-memory table of the exact request bytes, `ideal_replay.py`, warm, forward and reverse; its table recorded
   in step 2), and with `--before REV` the same routes
   run by that revision's code (`git archive`, on PYTHONPATH). Every run must pass every test; ours must replay
   every request with no miss.
4. In the same rounds: the time to the command's first answered request and the time to stop (a stdlib client
   through `cassette run`, cold, warm and before), and one test re-run alone: with no proxy, VCR.py, `cassette run`
   cold, and on the warm proxy (`cassette run` and the plugin).
5. Prints Markdown tables; run.py writes the JSON with the other parts (alone: benchmarks/results/).

Like an installed package (pip compiles it), our code and that of `--before` are compiled to bytecode first: the
suite's environment says PYTHONDONTWRITEBYTECODE, as this machine does. Plugin autoloading is off (each system
loads its own plugin with `-p`), so pytest plugins of this repository's test environment that a suite would not
have (hypothesis, langsmith, syrupy, ...) do not add seconds to every system alike; `--autoload` keeps them.
Each cold run gets a user folder of its own (no CA kept: a CI machine's first run).

Ratios are medians of the per-round ratios (the machine is shared; absolute seconds move by ±30 %).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "support")]
if "CASSETTE_MITMDUMP" not in os.environ and (ROOT / ".venv" / "proxy" / "bin" / "mitmdump").exists():
    os.environ["CASSETTE_MITMDUMP"] = str(ROOT / ".venv" / "proxy" / "bin" / "mitmdump")

from cassette_command import redirect_args  # noqa: E402
from harness import (  # noqa: E402
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    REDIRECT,
    FakeUpstream,
    Proxy,
    free_port,
    mitmdump_path,
    stop,
    wait_for_file,
)

MODULES = 6
SIZES = (36, 144)
KINDS = (
    "openai_plain",
    "openai_stream",
    "anthropic_plain",
    "anthropic_stream",
    "openai_async_stream",
    "anthropic_async_plain",
)
REVERSE = ["--reverse", "openai=https://api.openai.com", "--reverse", "anthropic=https://api.anthropic.com"]
CLEARED = (
    "HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
    "CASSETTE_MODE", "CASSETTE_DIR", "CASSETTE_MITMDUMP_ARGS", "PYTEST_ADDOPTS", "XDG_RUNTIME_DIR",
)  # fmt: skip
ONE_TEST = "test_area_0.py::test_openai_plain_0"
"""The test re-run alone: module 0, test 0 (an openai chat call)."""
PROBE_PROMPT = "module 0 test 0 openai plain"
CASSETTE = "import sys; from cassette_proxy.cli import main; sys.exit(main())"
"""`cassette` as this Python runs it, for our code and for `--before`'s (on PYTHONPATH) alike."""

# ---------------------------------------------------------------------------------------------- the suite

PYTEST_INI = """\
[pytest]
markers =
    vcr: pytest-recording's cassette marker (harmless when the plugin is off)
"""

CONFTEST = """\
import os

import pytest

os.environ.setdefault("OPENAI_API_KEY", "sk-fake-openai-DO-NOT-STORE-0123456789abcdef")
os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-fake-DO-NOT-STORE-0123456789abcdef")


@pytest.fixture(scope="module")
def vcr_config():
    # What suites usually set: no credentials on tape, the body in the match like the proxy's key.
    return {
        "filter_headers": ["authorization", "x-api-key"],
        "match_on": ["method", "scheme", "host", "port", "path", "query", "body"],
    }
"""

HEADER = '''\
"""Generated by benchmarks/vcr_suite.py: one new SDK client per test."""

import asyncio

import anthropic
import openai
import pytest

pytestmark = pytest.mark.vcr

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-3-5-haiku-latest"
'''

TEMPLATES = {
    "openai_plain": """
        def test_{name}():
            client = openai.OpenAI()
            reply = client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{{"role": "user", "content": "{prompt}"}}]
            )
            assert reply.choices[0].message.content == "echo: {prompt}"
        """,
    "openai_stream": """
        def test_{name}():
            client = openai.OpenAI()
            stream = client.chat.completions.create(
                model=OPENAI_MODEL, messages=[{{"role": "user", "content": "{prompt}"}}], stream=True
            )
            text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            assert text == "echo: {prompt}"
        """,
    "anthropic_plain": """
        def test_{name}():
            client = anthropic.Anthropic()
            reply = client.messages.create(
                model=ANTHROPIC_MODEL, max_tokens=256, messages=[{{"role": "user", "content": "{prompt}"}}]
            )
            assert reply.content[0].text == "echo: {prompt}"
        """,
    "anthropic_stream": """
        def test_{name}():
            client = anthropic.Anthropic()
            with client.messages.stream(
                model=ANTHROPIC_MODEL, max_tokens=256, messages=[{{"role": "user", "content": "{prompt}"}}]
            ) as stream:
                text = stream.get_final_text()
            assert text == "echo: {prompt}"
        """,
    "openai_async_stream": """
        def test_{name}():
            async def ask():
                async with openai.AsyncOpenAI() as client:
                    stream = await client.chat.completions.create(
                        model=OPENAI_MODEL, messages=[{{"role": "user", "content": "{prompt}"}}], stream=True
                    )
                    return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])

            assert asyncio.run(ask()) == "echo: {prompt}"
        """,
    "anthropic_async_plain": """
        def test_{name}():
            async def ask():
                async with anthropic.AsyncAnthropic() as client:
                    reply = await client.messages.create(
                        model=ANTHROPIC_MODEL, max_tokens=256, messages=[{{"role": "user", "content": "{prompt}"}}]
                    )
                    return reply.content[0].text

            assert asyncio.run(ask()) == "echo: {prompt}"
        """,
}


def generate_suite(folder: Path, tests: int) -> Path:
    """The suite in `folder` (pytest.ini, conftest.py, MODULES test modules of tests / MODULES each)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text(PYTEST_INI)
    (folder / "conftest.py").write_text(CONFTEST)
    for m in range(MODULES):
        parts = [HEADER]
        for t in range(tests // MODULES):
            kind = KINDS[(m + t) % len(KINDS)]
            prompt = f"module {m} test {t} {kind.replace('_', ' ')}"
            parts.append(textwrap.dedent(TEMPLATES[kind]).format(name=f"{kind}_{t}", prompt=prompt))
        (folder / f"test_area_{m}.py").write_text("\n".join(parts))
    return folder


# ----------------------------------------------------------------------------------------------- running


def base_env(autoload: bool) -> dict[str, str]:
    """This environment without proxy, CA, base-URL or cassette variables, with the fake API keys."""
    env = {name: value for name, value in os.environ.items() if name not in CLEARED}
    env.update(OPENAI_API_KEY=FAKE_OPENAI_KEY, ANTHROPIC_API_KEY=FAKE_ANTHROPIC_KEY, PYTHONDONTWRITEBYTECODE="1")
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def pytest_command(suite: Path, target: str = "", *args: str) -> list[str]:
    # -p no:cacheprovider: identical runs, whatever ran before; .venv/test's Python (the clients' environment).
    where = str(suite / target) if target else str(suite)
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite), where, *args]


class Failed(RuntimeError):
    pass


def timed(
    command: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """(seconds, wall clock at the start, wall clock at the end, the result)."""
    began, wall = time.perf_counter(), time.time()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    return time.perf_counter() - began, wall, time.time(), result


def passed(result: subprocess.CompletedProcess, what: str, tests: int) -> None:
    """A pytest run that passed all `tests` tests."""
    found = re.search(r"(\d+) passed", result.stdout)
    if (
        result.returncode != 0
        or not found
        or int(found.group(1)) != tests
        or re.search(r"\d+ (failed|error)", result.stdout)
    ):
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-40:])
        raise Failed(f"{what}: exit {result.returncode}, expected {tests} passed:\n{tail}")


def replayed(counts: dict, what: str, hits: int) -> None:
    if counts["misses"] or counts["errors"] or counts["upstream"] or counts["hits"] != hits:
        raise Failed(f"{what}: expected {hits} hits and no miss, error or upstream request; counts {counts}")


def summary_counts(result: subprocess.CompletedProcess, what: str) -> dict:
    """The plugin's summary line as counts (`cassette: replay: N hits, M misses, ...`)."""
    found = re.search(r"cassette: replay: (\d+) hits, (\d+) misses, (\d+) recorded, (\d+) upstream", result.stdout)
    if not found:
        raise Failed(f"{what}: no summary line:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    hits, misses, _, upstream = map(int, found.groups())
    return {"hits": hits, "misses": misses, "upstream": upstream, "errors": 0}


PROBE = """
import http.client, json, os, ssl, sys, time
began = time.time()
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": sys.argv[1]}]})
headers = {"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
if os.environ.get("HTTPS_PROXY"):
    proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
    context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    connection = http.client.HTTPSConnection(proxy[0].split("//")[1], int(proxy[1]), context=context, timeout=120)
    connection.set_tunnel("api.openai.com", 443)
    path = "/v1/chat/completions"
else:
    host, port = os.environ["PROBE_UPSTREAM"].split("//")[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    path = "/v1/chat/completions"
connection.request("POST", path, body=body, headers=headers)
answer = connection.getresponse()
answer.read()
answered = time.time()
print(json.dumps({"began": began, "answered": answered, "status": answer.status, "exit": time.time()}), flush=True)
"""
"""The command of the first-request probe: the stdlib only (its own start is small and the same everywhere)."""


class IdealFloor:
    """A bare mitmdump answering from `ideal_replay.py`'s in-memory table: forward on one port, a reverse listener
    per API on two more; started before the rounds, like the warm proxy, so its start costs the suite nothing."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.confdir = folder / "confdir"
        self.table = folder / "table.json"
        self.ports = {"forward": free_port(), "openai": free_port(), "anthropic": free_port()}
        self.process: subprocess.Popen | None = None

    def record(self, upstream: FakeUpstream, command: list[str], cwd: Path, env: dict[str, str], tests: int) -> None:
        """The table: the suite once through a bare mitmdump that forwards to the fake upstream and keeps each answer."""
        process = self._start(["--set", f"ideal_record={self.table}", "-s", str(REDIRECT),
                               "--set", f"fake_upstream={upstream.url}"])  # fmt: skip
        try:
            _, _, _, result = timed(command, {**env, **self.forward_env()}, cwd)
        finally:
            stop(process)
        passed(result, "recording the ideal replay's table", tests)
        if len(json.loads(self.table.read_text())) != tests:
            raise Failed(
                f"the ideal replay's table holds {len(json.loads(self.table.read_text()))} answers, not {tests}"
            )

    def start(self) -> None:
        self.process = self._start(["--set", f"ideal_table={self.table}"])

    def _start(self, args: list[str]) -> subprocess.Popen:
        self.folder.mkdir(parents=True, exist_ok=True)
        ready = self.folder / "ready.json"
        ready.unlink(missing_ok=True)
        p = self.ports
        command = [
            mitmdump_path(), "-q", "--listen-host", "127.0.0.1", "--set", f"confdir={self.confdir}",
            "--set", "connection_strategy=lazy", "--mode", f"regular@{p['forward']}",
            "--mode", f"reverse:https://api.openai.com@{p['openai']}",
            "--mode", f"reverse:https://api.anthropic.com@{p['anthropic']}",
            "-s", str(HERE / "ideal_replay.py"), "--set", f"ideal_ready={ready}", *args,
        ]  # fmt: skip
        log = self.folder / "mitmdump.log"
        process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
        wait_for_file(ready, process, log, timeout=60)
        return process

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)

    def forward_env(self) -> dict[str, str]:
        """What our replay gives a client by default: the proxy variables and the proxy's CA alone."""
        proxy = f"http://127.0.0.1:{self.ports['forward']}"
        ca = str(self.confdir / "mitmproxy-ca-cert.pem")
        return {
            **dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"), proxy),
            **dict.fromkeys(("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"), ca),
            "NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
        }  # fmt: skip

    def reverse_env(self) -> dict[str, str]:
        return {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.ports['openai']}/v1",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.ports['anthropic']}",
        }


class Bench:
    """One generated suite, its three sets of cassettes, and one command per system."""

    def __init__(self, folder: Path, upstream: FakeUpstream, tests: int, autoload: bool, before: Path | None):
        self.folder = folder
        self.upstream = upstream
        self.tests = tests
        self.autoload = autoload
        self.before = before
        self.suite = generate_suite(folder / "suite", tests)
        self.ours = folder / "cassettes"
        self.per_test = folder / "cassettes-per-test"
        self.vcr = self.suite / "cassettes"  # pytest-recording's default: <test dir>/cassettes/<module>/<test>.yaml
        self.report = folder / "report.json"
        self.warm_user = folder / "user-warm"
        self.floor = IdealFloor(folder / "ideal")
        self.env = base_env(autoload)
        self.runs = 0

    def plugins(self, *names: str) -> list[str]:
        """`-p` for each plugin a system uses (autoload off), or `-p no:` for the recording plugin it must not."""
        if self.autoload:
            return [] if "recording" in names else ["-p", "no:recording"]
        return [arg for name in names for arg in ("-p", name)]

    # --- step 2: record every set of cassettes
    def record(self) -> dict:
        tests = self.tests
        recorder = Proxy(self.folder / "record", self.ours, self.upstream, cassette_mode="record").start()
        try:
            _, _, _, result = timed(
                pytest_command(self.suite, "", *self.plugins()), {**self.env, **recorder.client_env()}, self.suite
            )
        finally:
            report = recorder.stop()
        passed(result, "recording our cassettes", tests)
        if report["counts"]["recorded"] != tests or len(list(self.ours.rglob("*.json"))) != tests:
            raise Failed(f"recorded {report['counts']}, expected {tests}")

        plugin = [
            *self.plugins("cassette_proxy.pytest_plugin"),
            "-o",
            "cassette=true",
            "-o",
            f"cassette_dir={self.per_test}",
        ]
        env = {**self.env, **self.cold_user(), "CASSETTE_MITMDUMP_ARGS": redirect_args(self.upstream)}
        _, _, _, result = timed(
            pytest_command(self.suite, "", *plugin, "--cassette-mode=record", "--cassette-scope=test"), env, self.suite
        )
        passed(result, "recording the per-test cassettes through the plugin", tests)
        if len(list(self.per_test.rglob("*.json"))) != tests:
            raise Failed(f"per-test recording wrote {len(list(self.per_test.rglob('*.json')))} cassettes, not {tests}")

        replayer = Proxy(self.folder / "vcr-record", self.ours, self.upstream).start()  # replays what we recorded
        try:
            env = {**self.env, **replayer.client_env()}
            _, _, _, result = timed(
                pytest_command(self.suite, "", *self.plugins("recording"), "--record-mode=all"), env, self.suite
            )
        finally:
            report = replayer.stop()
        passed(result, "recording VCR.py's cassettes through a replaying proxy", tests)
        tapes = sorted(self.vcr.rglob("*.yaml"))
        if report["counts"]["hits"] != tests or report["counts"]["misses"] or len(tapes) != tests:
            raise Failed(f"VCR recording: proxy {report['counts']}, {len(tapes)} cassettes, expected {tests}")
        uris = {
            line.split("uri: ", 1)[1].split("/v1/")[0]
            for t in tapes
            for line in t.read_text().splitlines()
            if "uri: " in line
        }
        if uris != {"https://api.openai.com", "https://api.anthropic.com"}:
            raise Failed(f"VCR cassettes name {uris}, expected the real API hosts")
        self.floor.record(self.upstream, pytest_command(self.suite, "", *self.plugins()), self.suite, self.env, tests)
        return {"ours": tests, "per_test": tests, "vcr": len(tapes), "vcr_uris": sorted(uris), "ideal": tests}

    # --- the warm proxy
    def start_warm(self) -> str:
        env = {**self.env, "XDG_RUNTIME_DIR": str(self.warm_user)}
        self.warm_user.mkdir(mode=0o700, exist_ok=True)
        started = subprocess.run(
            [sys.executable, "-c", CASSETTE, "serve", "--detach", "--idle", "0", "--dir", str(self.ours)],
            env=env, cwd=self.suite, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if started.returncode != 0:
            raise Failed(f"cassette serve --detach: {started.stderr}")
        return next(
            line.split("=", 1)[1] for line in started.stdout.splitlines() if line.startswith("export HTTPS_PROXY=")
        )

    def stop_warm(self) -> None:
        env = {**self.env, "XDG_RUNTIME_DIR": str(self.warm_user)}
        subprocess.run([sys.executable, "-c", CASSETTE, "serve", "--stop"], env=env, capture_output=True, timeout=120)

    def cold_user(self) -> dict[str, str]:
        """A user folder no run used yet: no CA kept, no warm proxy (a CI machine)."""
        self.runs += 1
        folder = self.folder / "users" / str(self.runs)
        folder.mkdir(parents=True, mode=0o700)
        return {"XDG_RUNTIME_DIR": str(folder)}

    # --- step 3 and 4: the systems
    def systems(self) -> dict[str, tuple[list[str], dict[str, str], str, int]]:
        """name → (command, environment, how its replay is checked: report / summary / "", tests it runs)."""
        n = self.tests
        before = {**self.env, "PYTHONPATH": str(self.before / "addon")} if self.before else None
        run = [sys.executable, "-c", CASSETTE, "run", "--dir", str(self.ours), "--report", str(self.report)]
        plain = pytest_command(self.suite, "", *self.plugins())
        plugin = [*self.plugins("cassette_proxy.pytest_plugin"), "-o", "cassette=true"]
        shared = [*plugin, "-o", f"cassette_dir={self.ours}"]
        scoped = [*plugin, "-o", f"cassette_dir={self.per_test}", "--cassette-scope=test"]
        vcr = [*self.plugins("recording"), "--record-mode=none", "--block-network"]
        direct = {**self.env, "OPENAI_BASE_URL": f"{self.upstream.url}/v1", "ANTHROPIC_BASE_URL": self.upstream.url}
        warm = {**self.env, "XDG_RUNTIME_DIR": str(self.warm_user)}
        one = lambda *args: pytest_command(self.suite, ONE_TEST, *args)  # noqa: E731
        probe = [sys.executable, "-c", PROBE, PROBE_PROMPT]
        found = {
            "vcr": (pytest_command(self.suite, "", *vcr), self.env, "", n),
            "run": ([*run, "--", *plain], self.env, "report", n),
            "run_reverse": ([*run, *REVERSE, "--", *plain], self.env, "report", n),
            "plugin": (pytest_command(self.suite, "", *shared), self.env, "summary", n),
            "plugin_test_scope": (pytest_command(self.suite, "", *scoped), self.env, "summary", n),
            "warm_run": ([*run, "--", *plain], warm, "report", n),
            "warm_plugin": (pytest_command(self.suite, "", *shared), warm, "summary", n),
            "direct": (plain, direct, "", n),
            "ideal_forward": (plain, {**self.env, **self.floor.forward_env()}, "", n),
            # Like `cassette run --reverse`: the base URLs, and the proxy variables and CA for the rest.
            "ideal_reverse": (plain, {**self.env, **self.floor.forward_env(), **self.floor.reverse_env()}, "", n),
            "one_direct": (one(*self.plugins()), direct, "", 1),
            "one_vcr": (one(*vcr), self.env, "", 1),
            "one_run": ([*run, "--", *one(*self.plugins())], self.env, "report", 1),
            "one_warm_run": ([*run, "--", *one(*self.plugins())], warm, "report", 1),
            "one_warm_plugin": (one(*shared), warm, "summary", 1),
            "probe_direct": (probe, {**self.env, "PROBE_UPSTREAM": self.upstream.url}, "probe", 0),
            "probe_run": ([*run, "--", *probe], self.env, "probe", 0),
            "probe_warm_run": ([*run, "--", *probe], warm, "probe", 0),
        }
        if before is not None:
            found["before_run"] = ([*run, "--", *plain], before, "report", n)
            found["before_plugin"] = (pytest_command(self.suite, "", *shared), before, "summary", n)
            found["before_plugin_test_scope"] = (pytest_command(self.suite, "", *scoped), before, "summary", n)
            found["one_before_run"] = ([*run, "--", *one(*self.plugins())], before, "report", 1)
            found["probe_before_run"] = ([*run, "--", *probe], before, "probe", 0)
        return found

    def measure(self, name: str, command: list[str], env: dict[str, str], check: str, tests: int) -> dict:
        if env.get("XDG_RUNTIME_DIR") != str(self.warm_user):
            env = {**env, **self.cold_user()}
        seconds, began, ended, result = timed(command, env, self.suite)
        measured = {"s": seconds}
        if check == "probe":
            if result.returncode != 0:
                raise Failed(f"{name}: exit {result.returncode}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
            child = json.loads(result.stdout.strip().splitlines()[-1])
            if child["status"] != 200:
                raise Failed(f"{name}: the probe's request answered {child['status']}")
            measured.update(
                to_child=child["began"] - began, to_answer=child["answered"] - began,
                request_wait=child["answered"] - child["began"], to_stop=ended - child["exit"],
            )  # fmt: skip
            if name != "probe_direct":
                replayed(json.loads(self.report.read_text())["counts"], name, 1)
        else:
            passed(result, name, tests)
            if check == "report":
                replayed(json.loads(self.report.read_text())["counts"], name, tests)
            elif check == "summary":
                replayed(summary_counts(result, name), name, tests)
        self.report.unlink(missing_ok=True)
        shutil.rmtree(self.folder / "users", ignore_errors=True)
        return measured

    def rounds(self, rounds: int) -> dict[str, list[dict]]:
        systems = self.systems()
        names = list(systems)
        timings: dict[str, list[dict]] = {name: [] for name in names}
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                timings[name].append(self.measure(name, *systems[name]))
            line = ", ".join(f"{n} {timings[n][-1]['s']:.2f}" for n in names)
            print(f"  {self.tests} tests, round {r + 1}/{rounds}: {line}", flush=True)
        return timings


# ----------------------------------------------------------------------------------------- in-process costs

CLIENT_COSTS = """
import json, os, sys, time
import anthropic, httpx, openai
N = int(sys.argv[1])
def per(make):
    make()  # first one pays lazy imports
    began = time.perf_counter()
    for _ in range(N):
        make().close()
    return (time.perf_counter() - began) / N * 1000
print(json.dumps({
    "openai.OpenAI()": per(openai.OpenAI),
    "anthropic.Anthropic()": per(anthropic.Anthropic),
    "httpx.Client()": per(httpx.Client),
}))
"""


def client_costs(bench: Bench, rounds: int = 3, n: int = 20) -> dict:
    """ms to build one SDK client (and close it) in the environments each route gives the suite, in subprocesses
    (the SDKs read the environment when a client is built)."""
    proxy = Proxy(bench.folder / "client-costs", bench.ours, bench.upstream).start()
    try:
        wired = {**bench.env, **proxy.client_env()}
        envs = {
            "no proxy variables, default CA store (vcr, direct, --only-reverse)": bench.env,
            "combined CA bundle only (SSL_CERT_FILE)": {**bench.env, "SSL_CERT_FILE": str(proxy.ca_bundle)},
            "proxy variables + combined CA bundle (record mode, or --system-cas)": wired,
            "proxy variables + the proxy's CA alone (replay's default)": {
                **wired,
                **dict.fromkeys(("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"), str(proxy.confdir / "mitmproxy-ca-cert.pem")),
            },
        }
        found: dict[str, list[dict]] = {name: [] for name in envs}
        for _ in range(rounds):
            for name, env in envs.items():
                out = subprocess.run(
                    [sys.executable, "-c", CLIENT_COSTS, str(n)], env=env, capture_output=True, text=True
                )
                if out.returncode:
                    raise Failed(out.stderr)
                found[name].append(json.loads(out.stdout))
    finally:
        proxy.stop()
    return {name: {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]} for name, runs in found.items()}


# ----------------------------------------------------------------------------------------------- the part


def median_ratio(timings: dict[str, list[dict]], a: str, b: str, field: str = "s") -> float:
    return round(statistics.median(x[field] / y[field] for x, y in zip(timings[a], timings[b], strict=True)), 3)


def median_of(timings: dict[str, list[dict]], name: str, field: str = "s") -> float:
    return round(statistics.median(t[field] for t in timings[name]), 3)


RATIOS_TO_VCR = (
    "run", "run_reverse", "plugin", "plugin_test_scope", "warm_run", "warm_plugin", "direct", "ideal_forward",
    "ideal_reverse",
)  # fmt: skip
BEFORE = ("before_run", "before_plugin", "before_plugin_test_scope")


def prepare_before(folder: Path, revision: str) -> Path:
    """`revision`'s addon/ in `folder` (git archive), compiled like an installed package."""
    tree = folder / "before"
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "addon"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    compileall.compile_dir(tree / "addon", quiet=1)
    return tree


def part_vcr(
    folder: Path,
    upstream: FakeUpstream,
    rounds: int,
    sizes: tuple[int, ...] = SIZES,
    before: str | None = None,
    autoload: bool = False,
    costs: bool = False,
) -> dict:
    compileall.compile_dir(ROOT / "addon", quiet=1)  # as pip would: our code is not recompiled on every start
    before_tree = prepare_before(folder, before) if before else None
    result: dict = {"sizes": list(sizes), "rounds": rounds, "before": before, "autoload": autoload, "suites": {}}
    for tests in sizes:
        bench = Bench(folder / f"suite-{tests}", upstream, tests, autoload, before_tree)
        print(f"  recording {tests} tests: ours, per test through the plugin, VCR.py's through a replaying proxy ...")
        recorded = bench.record()
        bench.start_warm()
        try:
            bench.floor.start()
            timings = bench.rounds(rounds)
        finally:
            bench.floor.stop()
            bench.stop_warm()
        names = list(timings)
        suite: dict = {
            "tests": tests,
            "recorded": recorded,
            "measured": timings,
            "median_s": {name: median_of(timings, name) for name in names},
            "to_vcr": {name: median_ratio(timings, name, "vcr") for name in [*RATIOS_TO_VCR, *BEFORE] if name in timings},
            "plugin_to_run": median_ratio(timings, "plugin", "run"),
            "plugin_test_scope_to_run": median_ratio(timings, "plugin_test_scope", "run"),
            "one_test_to_direct": {
                name: median_ratio(timings, name, "one_direct")
                for name in ("one_vcr", "one_run", "one_warm_run", "one_warm_plugin", "one_before_run")
                if name in timings
            },
            "probes": {
                name: {field: median_of(timings, name, field) for field in ("to_child", "to_answer", "request_wait", "to_stop")}
                for name in names
                if name.startswith("probe_")
            },
        }  # fmt: skip
        if before_tree:
            suite["to_before"] = {
                name: median_ratio(timings, name, f"before_{name}") for name in ("run", "plugin", "plugin_test_scope")
            }
            suite["one_run_to_before"] = median_ratio(timings, "one_run", "one_before_run")
        if costs:
            suite["client_build_ms"] = client_costs(bench)
        result["suites"][str(tests)] = suite
    return result


LABELS = {
    "vcr": "VCR.py in-process (`-p recording --record-mode=none --block-network`)",
    "run": "`cassette run -- pytest` (forward)",
    "run_reverse": "`cassette run --reverse openai=… --reverse anthropic=… -- pytest`",
    "plugin": "the plugin, shared scope (`cassette = true`)",
    "plugin_test_scope": "the plugin, `--cassette-scope test`",
    "warm_run": "`cassette run -- pytest` on a warm proxy (`cassette serve --detach`)",
    "warm_plugin": "the plugin on a warm proxy",
    "direct": "no replay: the fake upstream, no proxy",
    "ideal_forward": "the bound: bare mitmproxy, forward, answering from an in-memory table (warm)",
    "ideal_reverse": "the bound: bare mitmproxy, reverse listeners, answering from an in-memory table (warm)",
    "before_run": "before: `cassette run -- pytest`",
    "before_plugin": "before: the plugin, shared scope",
    "before_plugin_test_scope": "before: the plugin, `--cassette-scope test`",
}


def markdown_vcr(results: dict) -> list[str]:
    v = results["vcr"]
    lines = [
        f"**9. Whole suites against VCR.py** ({v['rounds']} interleaved rounds, order rotated; every run passed every "
        f"test, ours with every request a hit; plugin autoload {'on' if v['autoload'] else 'off'}"
        + (f"; before = `{v['before']}`" if v["before"] else "")
        + ")",
    ]
    for tests, s in v["suites"].items():
        med, to_vcr = s["median_s"], s["to_vcr"]
        lines += [
            "",
            f"{tests} tests:",
            "",
            "| system | wall s (median) | / VCR (median of per-round ratios) |",
            "|---|---:|---:|",
        ]
        for name, label in LABELS.items():
            if name in med:
                ratio = 1.0 if name == "vcr" else to_vcr[name]
                lines.append(f"| {label} | {med[name]:.2f} | **{ratio:.3f}** |")
        lines += [
            "",
            f"plugin / `cassette run`: {s['plugin_to_run']:.3f} (shared), {s['plugin_test_scope_to_run']:.3f} (test scope)",
        ]
        if "to_before" in s:
            lines.append("now / before: " + ", ".join(f"{k} {x:.3f}" for k, x in s["to_before"].items()))
        lines += [
            "",
            f"One test re-run alone (`{ONE_TEST}`), against the same test with no proxy ({med['one_direct']:.2f} s):",
            "",
            "| system | wall s | / no proxy |",
            "|---|---:|---:|",
        ]
        labels = {"one_vcr": "VCR.py", "one_run": "`cassette run`, cold", "one_warm_run": "`cassette run` on the warm proxy",
                  "one_warm_plugin": "the plugin on the warm proxy", "one_before_run": "before: `cassette run`"}  # fmt: skip
        for name, ratio in s["one_test_to_direct"].items():
            lines.append(f"| {labels[name]} | {med[name]:.2f} | **{ratio:.3f}** |")
        lines += [
            "",
            "First request and stop (a stdlib client; seconds from the launch of `cassette run`):",
            "",
            "| system | to the command's start | to its first answer | the request's wait | to stop after it exits |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, p in s["probes"].items():
            lines.append(
                f"| {name.removeprefix('probe_')} | {p['to_child']:.3f} | {p['to_answer']:.3f} | {p['request_wait']:.3f} | {p['to_stop']:.3f} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (at least 3)")
    parser.add_argument("--tests", default=",".join(map(str, SIZES)), help="suite sizes, multiples of 6")
    parser.add_argument("--before", metavar="REV", help="also run the routes with this git revision's code")
    parser.add_argument("--autoload", action="store_true", help="keep pytest's plugin autoloading on")
    parser.add_argument("--client-costs", action="store_true", help="also time one SDK client's construction")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="folder for the JSON results")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (suites, cassettes, logs)")
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.tests.split(","))
    folder = Path(tempfile.mkdtemp(prefix="cassette-vcr-"))
    started = datetime.now(UTC).isoformat(timespec="seconds")
    results: dict = {"started": started, "load_average_at_start": os.getloadavg()}
    upstream = FakeUpstream(folder / "upstream").start()
    try:
        results["vcr"] = part_vcr(
            folder, upstream, max(3, args.rounds), sizes, args.before, args.autoload, args.client_costs
        )
    except BaseException:
        print(f"failed; the suites, cassettes and logs are kept in {folder}", file=sys.stderr)
        raise
    finally:
        upstream.stop()
    results["load_average_at_end"] = os.getloadavg()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"vcr-{started.replace(':', '')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print("\n".join(markdown_vcr(results)))
    print(
        f"\nJSON: {out}; load average {results['load_average_at_start'][0]:.1f} → {results['load_average_at_end'][0]:.1f}"
    )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"kept {folder}")


if __name__ == "__main__":
    main()
