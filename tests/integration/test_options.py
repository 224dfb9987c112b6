"""Options through a real mitmdump: a bad `--set` value stops it at start with the message, as a user sees it, and the
ready file a launcher waits for. Every value the addon refuses, and where the mode comes from, are checked
in-process: tests/addon/test_option_validation.py."""

import json
import subprocess

import forkserver
import pytest
from harness import ADDON, Proxy, mitmdump_path


def run_mitmdump(tmp_path, *sets: str) -> subprocess.CompletedProcess:
    args = [mitmdump_path(), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={tmp_path / 'conf'}",
            "-s", str(ADDON)]  # fmt: skip
    for item in sets:
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("cassette_mode=replya", "cassette_mode: 'replya' is not a mode; use one of replay, record, update, off"),
        ("cassette_key_headers=Authorization", "cassette_key_headers: 'authorization' carries a credential"),
    ],
)
def test_a_bad_option_value_stops_mitmdump_with_a_clear_message(tmp_path, setting, message):
    result = run_mitmdump(tmp_path, setting)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_the_ready_file_names_the_pid_the_mode_from_the_environment_and_every_listener(tmp_path):
    proxy = Proxy(tmp_path, tmp_path / "cassettes", modes=["regular", "reverse:https://api.openai.com"])
    proxy.start({"CASSETTE_MODE": "record"})
    try:
        ready = json.loads((tmp_path / "proxy.ready").read_text())
        assert ready["pid"] == proxy.process.pid
        assert ready["mode"] == "record"  # mitmdump's own environment sets the default mode
        assert sorted(entry["mode"] for entry in ready["listen"]) == ["regular", "reverse:https://api.openai.com"]
        assert all(entry["host"] == "127.0.0.1" and entry["port"] > 0 for entry in ready["listen"])
    finally:
        proxy.stop()


@pytest.mark.parametrize("env", [{}, {"SSLKEYLOGFILE": "keys.log"}], ids=["forked", "exec-d"])
def test_a_harness_proxy_that_fails_to_start_says_so_forked_or_exec_d(tmp_path, env):
    """The harness's proxies (forkserver.py) report an exit as a process of their own would: its code and its log. A
    TLS key log, which mitmproxy reads as it is imported, makes the proxy exec'd instead."""
    proxy = Proxy(tmp_path, tmp_path / "cassettes", cassette_mode="replya")
    with pytest.raises(RuntimeError, match="process exited with 1 before it was ready") as failed:
        proxy.start(env)
    assert isinstance(proxy.process, forkserver.Forked) == (not env)
    assert proxy.process.returncode == 1
    assert "'replya' is not a mode" in str(failed.value)
