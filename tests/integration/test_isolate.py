"""`cassette run --isolate`: the command in a network namespace of its own, the proxy its only way out
(launch/isolate.py). A Python client connecting straight to a listener on this machine's 127.0.0.1, and a
Node 20 client without undici (`https.request`, which ignores the proxy variables) are refused at once, while
the SDK's proxied request hits its cassette. Nothing here leaves loopback: names cannot resolve in the namespace,
and the one run without --isolate only reaches the test's own listener."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest
import samples
from cassette_command import CASSETTE, cassette
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

CLIENTS = """
import json, os, socket, subprocess, sys
import openai
port, isolated = int(sys.argv[2]), sys.argv[3] == "isolated"
out = {}
client = openai.OpenAI(api_key=sys.argv[1], max_retries=0)
out["sdk"] = client.chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}]).choices[0].message.content
try:
    socket.create_connection(("127.0.0.1", port), timeout=30).close()
    out["python"] = "connected"
except OSError as e:
    out["python"] = type(e).__name__
node = '''
const [target, port] = process.argv.slice(1);
const request = target === "host" ? require("http").request({host: "127.0.0.1", port: Number(port), path: "/"})
  : require("https").request("https://api.openai.com/v1/models");
request.setTimeout(30000, () => request.destroy(new Error("timeout")));
request.on("socket", (socket) => socket.on("connect", () => { console.log("connected"); process.exit(0); }));
request.on("error", (e) => { console.log(e.code || e.message); process.exit(0); });
request.end();
'''
if isolated:  # never a real address without the namespace
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=30).close()  # TEST-NET-1: no one's host
        out["python_address"] = "connected"
    except OSError as e:
        out["python_address"] = type(e).__name__
targets = ["host", "provider"] if isolated else ["host"]
for target in targets:
    out["node_" + target] = subprocess.run(["node", "-e", node, target, str(port)], capture_output=True,
                                           text=True, timeout=60).stdout.strip()
print(json.dumps(out))
"""


@pytest.fixture
def host_listener():
    """A listener on this machine's 127.0.0.1 that counts who reached it."""
    reached: list[int] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def accept() -> None:
            while True:
                try:
                    connection, _ = listener.accept()
                except OSError:
                    return
                reached.append(1)
                connection.close()

        threading.Thread(target=accept, daemon=True).start()
        yield listener.getsockname()[1], reached


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no warm proxy of the machine's user
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    samples.write(tmp_path / "cassettes", samples.chat("one", "first"))
    return tmp_path


def clients(folder, port: int, *flags: str) -> tuple[dict, str]:
    """What each client got, and `cassette run`'s summary."""
    isolated = "isolated" if "--isolate" in flags else "not"
    result = cassette(
        "run", *flags, "--", sys.executable, "-c", CLIENTS, FAKE_OPENAI_KEY, str(port), isolated, cwd=folder
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_isolated_clients_that_go_around_the_proxy_are_refused_while_proxied_requests_hit(folder, host_listener):
    if not shutil.which("node"):
        pytest.fail("this test needs Node 20 (Debian's nodejs): scripts/install-test-tools")
    port, reached = host_listener
    # The same clients without the namespace reach the listener: what --isolate takes away.
    plain, summary = clients(folder, port)
    assert plain == {"sdk": "first", "python": "connected", "node_host": "connected"}
    assert len(reached) == 2 and "--isolate" not in summary
    isolated, summary = clients(folder, port, "--isolate")
    assert isolated == {
        "sdk": "first",
        "python": "ConnectionRefusedError",
        "python_address": "ConnectionRefusedError",
        "node_host": "ECONNREFUSED",
        "node_provider": "EAI_AGAIN",  # no name resolves: the resolver's datagrams are refused, at once
    }
    assert len(reached) == 2
    assert "cassette: replay: 1 hits, 0 misses" in summary
    # The namespace's only route out counted what tried to leave (another loopback port is the namespace's own).
    escapes = next(line for line in summary.splitlines() if line.startswith("cassette: --isolate: refused"))
    assert "192.0.2.1:443 (1)" in escapes and ":53 (udp)" in escapes, escapes


def test_where_the_kernel_refuses_namespaces_the_run_fails_naming_the_fallback(folder):
    # A user namespace whose limit of nested user namespaces is 0, as in a container that disables them.
    shell = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"'
    command = [sys.executable, "-c", "open('ran', 'w')"]
    result = subprocess.run(
        ["unshare", "--user", "--map-root-user", "sh", "-c", shell, "sh", CASSETTE, "run", "--isolate",
         "--", *command],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "CASSETTE_MODE"},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "--isolate: the kernel refused a user and network namespace" in result.stderr
    assert "No space left on device" in result.stderr and "Run without --isolate" in result.stderr
    assert not (folder / "ran").exists()


SUITE = """
import socket
import openai

def test_the_sdk_hits():
    client = openai.OpenAI(api_key="{key}", max_retries=0)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "one"}}])
    assert answer.choices[0].message.content == "first"

def test_a_direct_connection_to_the_host_is_refused():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=30).close()
    except ConnectionRefusedError:
        return
    raise AssertionError("reached this machine's listener")
"""


def test_the_plugin_runs_its_session_isolated(pytester, monkeypatch, folder, host_listener):
    port, reached = host_listener
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\ncassette_isolate = true\n")
    samples.write(pytester.path / "cassettes", samples.chat("one", "first"))
    pytester.makepyfile(test_suite=SUITE.format(key=FAKE_OPENAI_KEY, port=port))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert reached == []
    assert "cassette: replay: 1 hits, 0 misses" in result.stderr.str()


def test_a_port_let_through_is_reached_directly(folder, host_listener):
    """--isolate-port: a service of this machine (a database) the suite needs, and only that."""
    port, reached = host_listener
    connect = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=30).close()"
    result = cassette(
        "run", "--isolate", "--isolate-port", str(port), "--", sys.executable, "-c", connect, str(port), cwd=folder
    )
    assert result.returncode == 0, result.stderr
    assert len(reached) == 1
    refused = cassette("run", "--isolate-port", str(port), "--", "true", cwd=folder)
    assert refused.returncode == 2 and "it needs --isolate" in refused.stderr


ASK = """
import os, sys
import openai
client = openai.OpenAI(api_key=sys.argv[1], max_retries=0)
print(client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}])
      .choices[0].message.content, os.environ.get("OPENAI_BASE_URL", "-"))
"""


@pytest.mark.parametrize("setup", ["reverse route", "warm proxy"])
def test_an_isolated_run_reaches_reverse_routes_and_warm_proxies(folder, setup):
    """Every port of the proxy is relayed, a reverse route's too; a warm proxy serves an isolated run as any."""
    flags = ["--reverse", "openai=https://api.openai.com", "--only-reverse"] if setup == "reverse route" else []
    if setup == "warm proxy":
        assert cassette("serve", "--detach", cwd=folder).returncode == 0
    try:
        result = cassette("run", "--isolate", *flags, "--", sys.executable, "-c", ASK, FAKE_OPENAI_KEY, cwd=folder)
    finally:
        if setup == "warm proxy":
            cassette("serve", "--stop", cwd=folder)
    assert result.returncode == 0, result.stderr
    answer, base_url = result.stdout.split()
    assert answer == "first"
    assert (base_url != "-") is (setup == "reverse route")
    assert ("using the warm proxy" in result.stderr) is (setup == "warm proxy")
