"""Routes: a local model server through `--reverse` replays across runs, listeners can have a fixed port,
and the summary and report count requests per route (so a silently bypassed reverse route shows).

The "local server" is the fake upstream on 127.0.0.1 answering Ollama's `/api/chat` (NDJSON) and
OpenAI-compatible `/v1/chat/completions`, reached with no redirect addon: the way Ollama, vLLM or LM
Studio are reached.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from cassette_command import cassette, redirect_args
from harness import FakeUpstream, free_port

LOCAL_CLIENT = """
import json, os, sys, httpx
base = os.environ["OLLAMA_BASE_URL"]
proxy = os.environ["HTTP_PROXY"]
chat = {"model": "llama3.2", "messages": [{"role": "user", "content": "local hello"}], "stream": False}
# 1. As most clients do: honour NO_PROXY (the launcher keeps 127.0.0.1:<listener port> in it).
direct = httpx.post(base + "/v1/chat/completions", json=chat, timeout=30)
# 2. A client that ignores NO_PROXY: sends the listener's URL through the forward proxy.
with httpx.Client(proxy=proxy, trust_env=False, timeout=30) as forced:
    detour = forced.post(base + "/v1/chat/completions", json={**chat, "messages": [{"role": "user", "content": "via proxy"}]})
    # 3. Ollama's own NDJSON stream, also through the forward proxy.
    with forced.stream("POST", base + "/api/chat", json={**chat, "stream": True, "messages": [{"role": "user", "content": "stream me"}]}) as r:
        streamed = "".join(json.loads(line)["message"]["content"] for line in r.iter_lines() if line)
print(direct.status_code, detour.status_code, r.status_code)
print(direct.json()["choices"][0]["message"]["content"], "|", detour.json()["choices"][0]["message"]["content"], "|", streamed)
print("no_proxy", os.environ["NO_PROXY"])
"""


def cassette_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.json"))


def test_local_server_through_reverse_records_once_and_replays_offline_across_runs(tmp_path):
    local = FakeUpstream(tmp_path / "local").start()  # plain HTTP on 127.0.0.1, like Ollama on :11434
    route = f"ollama={local.url}"
    folder = tmp_path / "cassettes"
    command = ["--dir", str(folder), "--reverse", route, "--", sys.executable, "-c", LOCAL_CLIENT]
    try:
        recorded = cassette("run", "--mode", "record", "--strict", *command, cwd=tmp_path)
        served = local.count
    finally:
        local.stop()
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert recorded.stdout.splitlines()[:2] == ["200 200 200", "echo: local hello | echo: via proxy | echo: stream me"]
    assert "0 hits, 0 misses, 3 recorded" in recorded.stderr
    assert "cassette: routes: forward 0, ollama 3" in recorded.stderr
    assert served == 3  # the proxy never called itself
    port = local.url.rsplit(":", 1)[1]
    files = cassette_files(folder)
    assert len(files) == 3
    assert all(name.startswith(f"127.0.0.1_{port}/") for name in files), files  # keyed by the server, not the listener
    # The server is gone, and its port stays taken (bound, not listening: connections are refused), so that a
    # run's random listener port cannot be the server's old one: new random listener ports each run.
    with socket.socket() as gone:
        gone.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        gone.bind(("127.0.0.1", int(port)))
        for _ in range(2):
            replayed = cassette("run", "--strict", *command, cwd=tmp_path)
            assert replayed.returncode == 0, replayed.stdout + replayed.stderr
            assert replayed.stdout.splitlines()[:2] == recorded.stdout.splitlines()[:2]
            assert "cassette: replay: 3 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough" in replayed.stderr
            assert "cassette: routes: forward 0, ollama 3" in replayed.stderr
            listener = replayed.stdout.split("no_proxy ")[1].split(",")[-1].strip()
            assert listener.startswith("127.0.0.1:") and listener != f"127.0.0.1:{port}"
    assert cassette_files(folder) == files


def test_a_fixed_listener_port_gives_a_stable_base_url(tmp_path):
    port = free_port()
    script = "import os; print(os.environ['OLLAMA_BASE_URL'])"
    for _ in range(2):
        result = cassette(
            "run",
            "--reverse",
            f"ollama=http://localhost:11434@{port}",
            "--",
            sys.executable,
            "-c",
            script,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"http://127.0.0.1:{port}"


def test_a_taken_fixed_port_fails_at_once_naming_route_and_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cassette("run", "--reverse", f"ollama=http://localhost:11434@{port}", "--", "true", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"--reverse ollama=…@{port}: port {port} on 127.0.0.1 is not free" in result.stderr
    assert "pick another port, or leave @PORT out" in result.stderr


BOTH_ROUTES = """
import os, httpx
body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "which route"}]}
base_url = os.environ.pop("OPENAI_BASE_URL")  # what a conftest does: the SDK's default host, the forward proxy
print(httpx.post("https://api.openai.com/v1/chat/completions", json=body, timeout=30).status_code)
print(httpx.post(base_url + "/chat/completions", json={**body, "n": 2}, timeout=30).status_code)
"""


def test_report_counts_each_route_so_a_bypassed_reverse_route_shows(tmp_path, https_upstream):
    report = tmp_path / "report.json"
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    run = cassette(
        "run", "--mode", "record", "--reverse", "openai=https://api.openai.com", "--reverse", "anthropic=https://api.anthropic.com",
        "--report", str(report), "--", sys.executable, "-c", BOTH_ROUTES, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["200", "200"]
    assert "cassette: routes: forward 1, openai 1, anthropic 0" in run.stderr
    assert json.loads(report.read_text())["routes"] == {"forward": 1, "openai": 1, "anthropic": 0}
