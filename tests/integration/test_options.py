"""Option handling, through a real mitmdump: mitmproxy enforces no choices and ignores typos, so we validate."""

import json
import subprocess

import pytest
from harness import ADDON, Proxy, mitmdump_path


def run_mitmdump(tmp_path, *sets: str, env: dict | None = None) -> subprocess.CompletedProcess:
    args = [mitmdump_path(), "--listen-host", "127.0.0.1", "-p", "0", "--set", f"confdir={tmp_path / 'conf'}",
            "-s", str(ADDON)]  # fmt: skip
    for item in sets:
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("cassette_mode=replya", "cassette_mode: 'replya' is not a mode; use one of replay, record, update, off"),
        ("cassette_ignore=messages..id", "cassette_ignore: invalid ignore path 'messages..id'"),
        ("cassette_hosts=", "cassette_hosts"),
        ("cassette_report=/no/such/folder/report.json", "cassette_report: the folder of '/no/such/folder/report.json'"),
    ],
)
def test_a_bad_option_value_stops_mitmdump_with_a_clear_message(tmp_path, setting, message):
    result = run_mitmdump(tmp_path, setting)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_a_cassette_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    result = run_mitmdump(tmp_path, f"cassette_dir={tmp_path / 'file'}")
    assert result.returncode != 0
    assert "is not a folder" in result.stdout + result.stderr


def started_mode(tmp_path, env: dict, **options) -> str:
    proxy = Proxy(tmp_path, tmp_path / "cassettes", **options).start(env)
    try:
        return proxy.ready["mode"]
    finally:
        proxy.stop()


def test_the_environment_sets_the_default_mode(tmp_path):
    assert started_mode(tmp_path, {"CASSETTE_MODE": "record"}) == "record"


def test_an_explicit_set_wins_over_the_environment(tmp_path):
    assert started_mode(tmp_path, {"CASSETTE_MODE": "record"}, cassette_mode="update") == "update"


def test_the_default_mode_is_replay(tmp_path, monkeypatch):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    assert started_mode(tmp_path, {}) == "replay"


def test_the_ready_file_names_the_pid_and_every_listener(tmp_path):
    proxy = Proxy(tmp_path, tmp_path / "cassettes", modes=["regular", "reverse:https://api.openai.com"]).start()
    try:
        ready = json.loads((tmp_path / "proxy.ready").read_text())
        assert ready["pid"] == proxy.process.pid
        assert sorted(entry["mode"] for entry in ready["listen"]) == ["regular", "reverse:https://api.openai.com"]
        assert all(entry["host"] == "127.0.0.1" and entry["port"] > 0 for entry in ready["listen"])
    finally:
        proxy.stop()
