"""Nothing silent: a run the proxy saw nothing of says why, and `cassette run -- pytest` runs one proxy, not two."""

from __future__ import annotations

import sys
import textwrap

import pytest
from cassette_command import cassette, redirect_args
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

AROUND_THE_PROXY = f"""
import openai
client = openai.OpenAI(api_key="{FAKE_OPENAI_KEY}", max_retries=0)  # OPENAI_BASE_URL: a local server, straight
print(client.chat.completions.create(model="m", messages=[{{"role": "user", "content": "hi"}}]).choices[0].message.content)
"""


def test_a_record_run_that_recorded_nothing_says_why_and_fails_strict(tmp_path, http_upstream):
    """The client reached its server directly (loopback is in NO_PROXY): it worked, and nothing was recorded."""
    env = {"OPENAI_BASE_URL": f"{http_upstream.url}/v1"}
    result = cassette("run", "--mode", "record", "--strict", "--", sys.executable, "-c", AROUND_THE_PROXY,
                      cwd=tmp_path, env=env)  # fmt: skip
    assert result.stdout.strip() == "echo: hi"  # the suite passed
    assert result.returncode == 1
    assert (
        "cassette: warning: no request for a controlled host reached the proxy in this record run: nothing was "
        "recorded or replayed." in result.stderr
    )
    assert f"OPENAI_BASE_URL={http_upstream.url}/v1 sends clients straight to a local server" in result.stderr
    assert "--strict: failing the run for no request for a controlled host reached the proxy" in result.stderr
    assert not (tmp_path / "cassettes").exists()


MISS_MESSAGE = """
import httpx
reply = httpx.post("https://api.openai.com/v1/chat/completions", json={"model": "m", "messages": []}, timeout=30)
print(reply.status_code, reply.json()["error"]["message"])
"""


def test_a_replay_miss_says_what_to_type_in_cassette_run_words(tmp_path):
    result = cassette("run", "--", sys.executable, "-c", MISS_MESSAGE, cwd=tmp_path)
    assert result.stdout.startswith(
        "409 cassette miss: no recording for POST https://api.openai.com/v1/chat/completions"
    )
    assert result.stdout.strip().endswith(
        "To record it: `cassette run --mode record -- …` (records only what is missing)."
    )
    assert "reached the proxy" not in result.stderr  # a miss is not silence
    # The one warning: replay from a folder that does not exist (no cassette was ever recorded here).
    assert [line for line in result.stderr.splitlines() if "warning" in line] == [
        "cassette: warning: the cassette folder cassettes does not exist: in replay every request to a controlled "
        "host will miss (pass --dir, or record first with --mode record)"
    ]


SUITE = f"""
from openai import OpenAI

client = OpenAI(api_key="{FAKE_OPENAI_KEY}", max_retries=0)


def test_greeting():
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "nested"}}])
    assert reply.choices[0].message.content == "echo: nested"
"""


@pytest.fixture
def plugin_suite(pytester, https_upstream, monkeypatch):
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\n")
    pytester.makepyfile(test_app=SUITE)
    return pytester


def test_cassette_run_around_a_plugin_suite_runs_one_proxy(plugin_suite, https_upstream):
    env = {"CASSETTE_MITMDUMP_ARGS": redirect_args(https_upstream), "PYTEST_ADDOPTS": "-p no:cacheprovider"}
    pytest_command = [sys.executable, "-m", "pytest", "-q"]
    recorded = cassette("run", "--mode", "record", "--", *pytest_command, cwd=plugin_suite.path, env=env)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "cassette: using the proxy of the enclosing `cassette run` (http://127.0.0.1:" in recorded.stdout
    assert "cassette: record:" not in recorded.stdout  # the plugin prints no summary of its own
    assert "cassette: record: 0 hits, 0 misses, 1 recorded, 1 upstream" in recorded.stderr

    replayed = cassette("run", "--strict", "--", *pytest_command, cwd=plugin_suite.path, env=env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "cassette: replay: 1 hits, 0 misses" in replayed.stderr
    assert https_upstream.count == 1


def test_a_suite_whose_settings_the_outer_proxy_lacks_is_stopped_with_the_flags_to_pass(plugin_suite, https_upstream):
    plugin_suite.makeini("[pytest]\ncassette = true\ncassette_dir = tests/cassettes\ncassette_ignore =\n    user\n")
    result = cassette("run", "--", sys.executable, "-m", "pytest", "-q", cwd=plugin_suite.path)
    assert result.returncode != 0
    output = textwrap.dedent(result.stdout + result.stderr)
    assert "this pytest runs inside `cassette run`, whose proxy serves it (one proxy, not two)" in output
    assert (
        f"dir: '{plugin_suite.path / 'tests' / 'cassettes'}' in the suite, '{plugin_suite.path / 'cassettes'}'"
        in output
    )
    assert "ignore: ['user'] in the suite, [] in `cassette run` (--ignore)" in output
