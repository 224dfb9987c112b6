"""`--ignore`, `--key-header`, `--ignore-value` on `cassette run`/`serve`, and the pytest plugin's settings,
reach the addon: a suite run as users run it, recording with one set of client-made ids and replaying with another."""

from __future__ import annotations

import argparse
import sys

import pytest
from cassette_command import cassette, redirect_args
from cassette_proxy.cli import proxy_flags
from cassette_proxy.launch import launcher
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

AGENT = """
import sys, uuid, httpx
tool_id = "pyd_ai_" + uuid.uuid4().hex  # made up by the client on every run, as pydantic-ai does
reply = httpx.post(
    "https://api.openai.com/v1/chat/completions",
    headers={"authorization": "Bearer " + sys.argv[1]},
    json={"model": "m", "metadata": {"run": uuid.uuid4().hex}, "messages": [
        {"role": "assistant", "tool_calls": [{"id": tool_id, "type": "function"}]},
        {"role": "tool", "tool_call_id": tool_id, "content": "42"}]},
    timeout=30,
)
print(reply.status_code)
sys.exit(0 if reply.status_code == 200 else 1)
"""


def test_run_passes_key_settings_to_the_addon(tmp_path):
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    args = parser.parse_args(["--ignore", "metadata", "--key-header", "X-Tenant", "--ignore-value", "pydantic-ai"])
    settings = proxy_flags.settings_from_arguments(args, {"CASSETTE_MITMDUMP": sys.executable})
    command = launcher.command(settings, tmp_path, 0, [])
    sets = [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]
    assert "cassette_ignore=metadata" in sets
    assert "cassette_ignore_values=pydantic-ai" in sets
    assert [s for s in sets if s.startswith("cassette_key_headers=")] == [
        "cassette_key_headers=anthropic-version", "cassette_key_headers=anthropic-beta",
        "cassette_key_headers=openai-beta", "cassette_key_headers=x-tenant",
    ]  # fmt: skip


def test_cassette_run_records_and_replays_client_made_ids_with_the_flags(tmp_path, https_upstream):
    flags = ["--ignore", "metadata", "--ignore-value", "pydantic-ai"]
    agent = [sys.executable, "-c", AGENT, FAKE_OPENAI_KEY]
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream)}
    recorded = cassette("run", "--mode", "record", *flags, "--", *agent, cwd=tmp_path, env=env)
    assert recorded.returncode == 0, recorded.stderr
    https_upstream.stop()

    replayed = cassette("run", "--strict", *flags, "--", *agent, cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert "1 hits, 0 misses" in replayed.stderr
    without = cassette("run", "--strict", "--", *agent, cwd=tmp_path, env=env)
    assert without.returncode != 0 and "0 hits, 1 misses" in without.stderr  # the ids and metadata count again


def test_the_pytest_plugin_reads_key_settings_from_ini_and_options(pytester, monkeypatch, https_upstream):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\ncassette_ignore_values =\n    pydantic-ai\n")
    pytester.makepyfile(
        test_agent=f"""
import subprocess, sys

def test_agent():
    assert subprocess.run([sys.executable, "-c", {AGENT!r}, "{FAKE_OPENAI_KEY}"]).returncode == 0
"""
    )
    pytester.runpytest_subprocess("--cassette-mode=record", "--cassette-ignore=metadata").assert_outcomes(passed=1)
    replayed = pytester.runpytest_subprocess("--cassette-ignore=metadata")
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["cassette: replay: 1 hits, 0 misses*"])
    assert https_upstream.count == 1


@pytest.mark.parametrize("flag", ["--ignore=model.name", "--ignore-value=x*"])
def test_a_bad_key_setting_stops_cassette_run_naming_the_option(tmp_path, flag):
    result = cassette("run", flag, "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert result.returncode == 2
    assert ("cassette_ignore" if "ignore=" in flag else "cassette_ignore_values") in result.stderr


def test_run_passes_allowed_hosts_to_the_addon(tmp_path):
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    args = parser.parse_args(["--allow-host", "cdn.example.com", "--allow-host", "*.images.example"])
    settings = proxy_flags.settings_from_arguments(args, {"CASSETTE_MITMDUMP": sys.executable})
    command = launcher.command(settings, tmp_path, 0, [])
    sets = [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]
    assert [s for s in sets if s.startswith("cassette_allow_hosts=")] == [
        "cassette_allow_hosts=cdn.example.com",
        "cassette_allow_hosts=*.images.example",
    ]
