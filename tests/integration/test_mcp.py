"""MCP over streamable HTTP end to end: the `mcp` SDK's own server (SSE answers, its default) on a free loopback
port, its Python client, the TypeScript SDK's client and openai-agents' `MCPServerStreamableHttp`, all through
`cassette run` as a user's suite runs. Every replay runs with the server stopped and a new port in the URL (a
local server a test starts gets a new port each run); its answers carry the server process's random mark, so a
replayed answer is told from a live one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cassette_command import CASSETTE, cassette
from harness import ROOT, SUPPORT, stop, wait_for_file

NODE_CLIENT = ROOT / "tests" / "node" / "mcp" / "client.mjs"
PY_CLIENT = SUPPORT / "mcp_client.py"
AGENTS_CLIENT = SUPPORT / "agents_mcp_client.py"


class McpServer:
    """tests/support/mcp_server.py on a free port, stopped by PID."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        ready, self.log = folder / "server.ready", folder / "server.log"
        self.process = subprocess.Popen(
            [sys.executable, str(SUPPORT / "mcp_server.py"), "--ready-file", str(ready)],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{wait_for_file(ready, self.process, self.log)['port']}/mcp"

    def stop(self) -> None:
        stop(self.process)


@pytest.fixture
def server(tmp_path):
    started = McpServer(tmp_path / "server")
    yield started
    started.stop()


def nowhere() -> str:
    """The URL of a loopback port nothing listens on: where the server would be on the next run."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/mcp"


def run(
    folder: Path, mode: str, *command: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, dict]:
    """`cassette run --strict` over MCP on loopback; the result and the run report."""
    report = folder / f"report-{mode}.json"
    report.unlink(missing_ok=True)
    done = cassette(
        "run", "--mode", mode, "--strict", "--dir", str(folder / "cassettes"), "--hosts", "127.0.0.1",
        "--report", str(report), "--", *command, cwd=cwd or folder, env=env,
    )  # fmt: skip
    return done, json.loads(report.read_text())


def python_client(url: str, *calls: str) -> list[str]:
    return [sys.executable, str(PY_CLIENT), url, *calls]


def output(done: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_python_sdk_records_sse_answers_every_time_and_replays_offline_on_another_port(tmp_path, server):
    for attempt in range(3):  # the answers are SSE: each record must save the whole conversation
        folder = tmp_path / f"run{attempt}"
        folder.mkdir()
        done, report = run(folder, "record", *python_client(server.url, "add", '{"a": 1, "b": 2}'))
        assert done.returncode == 0, done.stderr[-3000:]
        assert report["errors"] == [] and report["counts"]["recorded"] == 6, report
        recorded = [json.loads(p.read_text()) for p in (folder / "cassettes" / "127.0.0.1" / "mcp").iterdir()]
        assert sorted(c["request"]["method"] for c in recorded) == ["DELETE", "GET", "POST", "POST", "POST", "POST"]
    [live] = output(done)
    server.stop()
    replayed, report = run(folder, "replay", *python_client(nowhere(), "add", '{"a": 1, "b": 2}'))
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert output(replayed) == [live] and report["counts"]["hits"] == 6
    changed, report = run(folder, "replay", *python_client(nowhere(), "add", '{"a": 1, "b": 5}'))
    assert changed.returncode == 1 and report["counts"]["misses"] == 1  # --strict fails the run
    [result] = output(changed)
    error = result["calls"][0]["error"]  # what the caller of call_tool sees
    assert error.startswith("MCPError: cassette miss: no recording for POST http://127.0.0.1/mcp"), error
    assert "params.arguments.b: 2 → 5" in error


def test_two_clients_in_one_record_run_each_keep_their_own_session(tmp_path, server):
    first = python_client(server.url, "add", '{"a": 1, "b": 2}')
    second = python_client(server.url, "echo", '{"text": "second"}')
    script = " && ".join(subprocess.list2cmdline(command) for command in (first, second))
    done, report = run(tmp_path, "record", "sh", "-c", script)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = output(done)
    assert "sum" in one["calls"][0]["text"] and "second" in two["calls"][0]["text"], (one, two)
    assert report["errors"] == [], report["errors"]  # no 404 "session not found" for the second session
    assert report["counts"]["recorded"] == 7  # the second session's new call; its initialize is kept as it was
    server.stop()
    for order in ([second, first], [first, second]):  # any replay order, offline
        url = nowhere()
        swapped = [[*command[:2], url, *command[3:]] for command in order]
        replayed, report = run(tmp_path, "replay", "sh", "-c", " && ".join(map(subprocess.list2cmdline, swapped)))
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        assert report["counts"]["misses"] == 0 and report["counts"]["hits"] == 12


def test_the_typescript_sdk_records_replays_and_shows_a_miss_as_the_cassette_message(tmp_path, server):
    # Two clients in one record run: the TypeScript SDK adopts the session id of any answer, a replayed one too.
    node = ["node", str(NODE_CLIENT), server.url, "add", '{"a": 1, "b": 2}']
    other = ["node", str(NODE_CLIENT), server.url, "echo", '{"text": "other"}']
    script = " && ".join(map(subprocess.list2cmdline, (node, other)))
    done, report = run(tmp_path, "record", "sh", "-c", script, cwd=NODE_CLIENT.parent.parent)
    assert done.returncode == 0 and report["errors"] == [], done.stderr[-3000:]
    live, echoed = output(done)
    assert "other" in echoed["calls"][0]["text"]
    server.stop()
    url = nowhere()
    changed = ["add", '{"a": 1, "b": 5}']
    replayed, report = run(tmp_path, "replay", "node", str(NODE_CLIENT), url, "add", '{"a": 1, "b": 2}', *changed,
                           cwd=NODE_CLIENT.parent.parent)  # fmt: skip
    assert replayed.returncode == 1 and report["counts"]["misses"] == 1  # --strict fails the run
    [node_result] = output(replayed)
    assert node_result["calls"][0] == live["calls"][0]
    node_error = node_result["calls"][1]["error"]
    assert "cassette miss: no recording for POST http://127.0.0.1/mcp" in node_error
    assert "params.arguments.b: 2 → 5" in node_error


def test_openai_agents_streamable_http_server_records_and_replays(tmp_path, server):
    command = [sys.executable, str(AGENTS_CLIENT), "http", server.url, "add", '{"a": 2, "b": 3}']
    env = {"OPENAI_AGENTS_DISABLE_TRACING": "1"}
    done, report = run(tmp_path, "record", *command, env=env)
    assert done.returncode == 0 and report["errors"] == [], done.stderr[-3000:]
    [live] = output(done)
    assert '"sum": 5' in live["text"]
    server.stop()
    command[3] = nowhere()
    replayed, report = run(tmp_path, "replay", *command, env=env)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert output(replayed) == [live] and report["counts"]["misses"] == 0


def test_openai_agents_stdio_server_through_cassette_mcp_in_a_run(tmp_path):
    """MCPServerStdio spawns `cassette mcp -- python mcp_server.py --stdio` with the SDK's stripped environment:
    `cassette mcp` still takes the run's mode and folder, and the run's report counts its requests."""
    started = tmp_path / "server.started"
    server = [sys.executable, str(SUPPORT / "mcp_server.py"), "--stdio", "--started-file", str(started)]
    agent = [sys.executable, str(AGENTS_CLIENT), "stdio", CASSETTE, "mcp", "--", *server, "--"]
    env = {"OPENAI_AGENTS_DISABLE_TRACING": "1"}
    done, report = run(tmp_path, "record", *agent, "add", '{"a": 2, "b": 3}', env=env)
    assert done.returncode == 0, done.stderr[-3000:]  # --strict: a stdio-only run is not silent
    [live] = output(done)
    assert '"sum": 5' in live["text"] and report["counts"]["recorded"] >= 2 and report["errors"] == []
    assert list((tmp_path / "cassettes" / "stdio").iterdir()), "recorded under the run's folder"
    started.unlink()
    replayed, report = run(tmp_path, "replay", *agent, "add", '{"a": 2, "b": 3}', env=env)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert output(replayed) == [live] and not started.exists()  # answered without starting the server
    missed, report = run(tmp_path, "replay", *agent, "add", '{"a": 2, "b": 4}', env=env)
    assert missed.returncode != 0 and report["counts"]["misses"] == 1
    assert "cassette miss: no recording for POST stdio://" in missed.stderr
    assert "params.arguments.b: 3 → 4" in missed.stderr
