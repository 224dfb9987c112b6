"""`cassette mcp -- SERVER_COMMAND` as an MCP client spawns it: newline-delimited JSON-RPC through its stdin and
stdout, a small stdio server behind it (tests/support/stdio_echo_server.py) that logs what reached it. Record
keeps each request with the server's lines up to its response; replay answers them without starting the server;
a miss is the JSON-RPC error of the request; secrets never reach the disk. With openai-agents' MCPServerStdio
inside `cassette run`: tests/integration/test_mcp.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cassette_proxy.core.sessions.mcp_stdio import answer_lines, server_name, valid_name

CASSETTE = str(Path(sys.executable).with_name("cassette"))
SERVER = Path(__file__).resolve().parent.parent / "support" / "stdio_echo_server.py"
SECRET = "sk-fake-openai-DO-NOT-STORE-0123456789abcdef"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}


def converse(tmp_path: Path, mode: str, *messages: dict, server_args: tuple[str, ...] = ()) -> tuple[list[dict], dict]:
    """One client session: the messages written to `cassette mcp`'s stdin, what it wrote back, its report."""
    report = tmp_path / f"report-{mode}.json"
    report.unlink(missing_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith("CASSETTE_")}
    done = subprocess.run(
        [CASSETTE, "mcp", "--mode", mode, "--dir", str(tmp_path / "cassettes"), "--name", "echo",
         "--report", str(report), "--", sys.executable, str(SERVER), str(tmp_path / "server.log"), *server_args],
        input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], json.loads(report.read_text())


def server_log(tmp_path: Path) -> list[str]:
    path = tmp_path / "server.log"
    return path.read_text().splitlines() if path.exists() else []


def test_record_keeps_each_answer_and_replay_gives_it_back_without_starting_the_server(tmp_path):
    call = {**CALL, "params": {**CALL["params"], "arguments": {"a": 1, "token": SECRET}}}
    live, report = converse(tmp_path, "record", INITIALIZE, INITIALIZED, call)
    assert [m.get("method") or m["id"] for m in live] == ["notifications/progress", 0, "notifications/progress", 1]
    assert report["counts"]["recorded"] == 2 and report["errors"] == []
    assert json.loads(server_log(tmp_path)[2]) == INITIALIZED  # notifications reach the live server
    files = sorted((tmp_path / "cassettes" / "stdio" / "echo").iterdir())
    assert len(files) == 2 and not any(SECRET in path.read_text() for path in files)
    (tmp_path / "server.log").unlink()

    replayed, report = converse(tmp_path, "replay", INITIALIZE, INITIALIZED, call)
    assert replayed[:3] == live[:3]
    assert replayed[3]["result"]["pid"] == live[3]["result"]["pid"]  # the recorded server's: nothing ran live
    assert replayed[3]["result"]["echo"]["arguments"]["token"] == "[REDACTED:openai-key]"  # as stored
    assert server_log(tmp_path) == []  # never started
    assert report["counts"]["hits"] == 2 and report["counts"]["misses"] == 0


def test_a_miss_is_the_jsonrpc_error_of_the_request_with_what_changed(tmp_path):
    converse(tmp_path, "record", INITIALIZE, CALL)
    changed = {**CALL, "params": {"name": "add", "arguments": {"a": 1, "b": 5}}}
    replayed, report = converse(tmp_path, "replay", INITIALIZE, changed)
    error = replayed[-1]
    assert error["id"] == 1 and error["error"]["code"] == -32001
    message = error["error"]["message"]
    assert message.startswith("cassette miss: no recording for POST stdio://echo/")
    assert "params.arguments.b: 2 → 5" in message and "`cassette mcp --mode record -- …`" in message
    assert error["error"]["data"]["cassette"].startswith("stdio/echo/")
    assert report["counts"]["misses"] == 1 and report["misses"][0]["url"] == "stdio://echo/"


def test_record_mode_opens_the_session_live_and_keeps_the_recorded_initialize(tmp_path):
    converse(tmp_path, "record", INITIALIZE, CALL)
    initialize = next(p for p in (tmp_path / "cassettes" / "stdio" / "echo").iterdir() if "initialize" in p.read_text())
    before = initialize.read_bytes()
    (tmp_path / "server.log").unlink()
    new_call = {**CALL, "id": 2, "params": {"name": "add", "arguments": {"a": 7}}}
    _, report = converse(tmp_path, "record", INITIALIZE, CALL, new_call)
    reached = [json.loads(line).get("method") for line in server_log(tmp_path)[1:]]
    assert reached == ["initialize", "tools/call"]  # the recorded call replayed, the new one live in a live session
    assert initialize.read_bytes() == before
    assert report["counts"] == {**report["counts"], "hits": 1, "recorded": 1, "overwritten": 0}


def test_a_request_the_server_never_answers_is_not_saved_and_is_reported(tmp_path):
    _, report = converse(tmp_path, "record", INITIALIZE, CALL, server_args=("--silent-for", "tools/call"))
    assert report["counts"]["recorded"] == 1
    [error] = report["errors"]
    assert error["type"] == "stream_incomplete" and "gave no response to request 1" in error["message"]


def test_the_server_name_leaves_folders_out_and_a_given_name_is_checked():
    assert server_name(["/usr/bin/python3", "/home/me/tools/weather.py", "--units", "metric"]) == (
        "python3-weather.py-units-metric"
    )
    assert valid_name("weather-server") == "weather-server"
    with pytest.raises(ValueError, match="--name 'Weather Server'"):
        valid_name("Weather Server")


def test_a_replayed_response_carries_the_id_of_the_request_it_answers():
    recorded = {"response": {"body_format": "events", "body": [
        {"ms": 0, "text": '{"jsonrpc":"2.0","method":"notifications/progress"}\n'},
        {"ms": 3, "text": '{"jsonrpc":"2.0","id":1,"result":{}}\n'},
    ]}}  # fmt: skip
    lines = answer_lines(recorded, "call-9")
    assert json.loads(lines[0]) == {"jsonrpc": "2.0", "method": "notifications/progress"}
    assert json.loads(lines[1])["id"] == "call-9"


def test_stopped_by_its_client_it_still_writes_its_report_and_stops_the_server(tmp_path):
    report = tmp_path / "report.json"
    log = tmp_path / "server.log"
    process = subprocess.Popen(
        [CASSETTE, "mcp", "--mode", "record", "--dir", str(tmp_path / "cassettes"), "--name", "echo",
         "--report", str(report), "--", sys.executable, str(SERVER), str(log)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["method"] == "notifications/progress"
    assert json.loads(process.stdout.readline())["id"] == 0
    process.send_signal(signal.SIGTERM)  # what an MCP client does to a server that does not exit at once
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert json.loads(report.read_text())["counts"]["recorded"] == 1
    server_pid = int(log.read_text().split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)
