"""A pytest-recording suite moved to the proxy with no edit: its tests read the `vcr` fixture (what they sent, what
came back, how often a recording played), with pytest-recording absent, or present and `--disable-recording`; the
plugin's own `--cassette-strict`; and the plugin inside `cassette run` from an environment with no mitmdump."""

from __future__ import annotations

import os
import shutil
import sys

from cassette_command import cassette, redirect_args
from harness import FAKE_OPENAI_KEY
from inner_pytest import RECORDING, only_plugins

pytest_plugins = ["pytester"]

SUITE = f"""
import json, os

import openai
import pytest

client = openai.OpenAI(api_key="{FAKE_OPENAI_KEY}", max_retries=0)


def ask(prompt):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}])
    return reply.choices[0].message.content


@pytest.mark.vcr
def test_reads_what_it_sent_and_what_came_back(vcr):
    assert ask("first") == "echo: first"
    [request] = vcr.requests
    assert request.method == "POST" and request.uri == "https://api.openai.com/v1/chat/completions"
    assert request.path == "/v1/chat/completions" and request.host == "api.openai.com"
    assert json.loads(request.body)["messages"] == [{{"role": "user", "content": "first"}}]
    assert request.headers["Content-Type"] == "application/json"
    assert "authorization" not in request.headers  # never the key
    [response] = vcr.responses
    assert response["status"]["code"] == 200 and response["status"]["message"] == "OK"
    assert json.loads(response["body"]["string"])["choices"][0]["message"]["content"] == "echo: first"
    assert vcr.responses_of(request) == [response]
    assert vcr.data == [(request, response)]
    replaying = vcr.record_mode == "none"
    assert (vcr.play_count, vcr.all_played) == ((1, True) if replaying else (0, False))


@pytest.mark.default_cassette("shared.yaml")
@pytest.mark.vcr
def test_counts_every_play_of_one_recording(vcr):
    assert ask("twice") == ask("twice") == "echo: twice"
    assert len(vcr.requests) == 1
    assert vcr.play_count == (2 if vcr.record_mode == "none" else 1)


@pytest.mark.vcr
def test_sees_its_recordings_before_it_sends_anything(vcr):
    \"\"\"langchain_tests' test_stream_time: `if not vcr.responses` decides whether to benchmark.\"\"\"
    before = len(vcr.responses)
    assert ask("story") == "echo: story"
    assert before == (1 if vcr.record_mode == "none" else 0)
    assert vcr.play_count == before


def test_swallows_a_miss():
    try:
        ask(os.environ.get("PROMPT", "stable"))
    except openai.ConflictError:
        pass  # as agent frameworks do: only the strict switch sees it
"""

TESTS = 4


def test_a_pytest_recording_suite_reads_vcr_through_the_proxy(pytester, https_upstream, monkeypatch):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:cacheprovider")
    pytester.makeini("[pytest]\ncassette = true\ncassette_scope = test\naddopts = --strict-markers\n")
    pytester.makepyfile(test_app=SUITE)
    pytester.makeconftest("def pytest_recording_configure(config, vcr):\n    raise AssertionError('never called')\n")

    only_plugins(monkeypatch)  # pytest-recording not installed: `vcr` is the plugin's, its markers known
    recorded = pytester.runpytest_subprocess("--cassette-mode=record")
    recorded.assert_outcomes(passed=TESTS)
    recorded.stdout.fnmatch_lines(["cassette: record: 1 hits, 0 misses, 4 recorded, 4 upstream*"])

    only_plugins(monkeypatch, RECORDING)  # installed and turned off, as a suite moving to the proxy runs it
    replayed = pytester.runpytest_subprocess("--disable-recording", "-n", "2")
    replayed.assert_outcomes(passed=TESTS)
    replayed.stdout.fnmatch_lines(["cassette: replay: 5 hits, 0 misses, 0 recorded, 0 upstream*"])

    only_plugins(monkeypatch)  # not installed: the suite's own command line (`--record-mode=none`) still runs
    pytester.makeconftest(
        "def pytest_recording_configure(config, vcr):\n    raise AssertionError('never called')\n\n\n"
        "def pytest_configure(config):\n    assert config.getoption('record_mode') == 'none'  # conftests read it\n"
    )
    bare = pytester.runpytest_subprocess("--record-mode=none", "--disable-recording")
    bare.assert_outcomes(passed=TESTS)
    bare.stdout.fnmatch_lines(["cassette: replay: 5 hits, 0 misses, 0 recorded, 0 upstream*"])

    pytester.makeconftest("def pytest_recording_configure(config, vcr):\n    raise AssertionError('never called')\n")

    only_plugins(monkeypatch, RECORDING)
    monkeypatch.setenv("PROMPT", "reworded")  # the swallowed miss: passes, and fails the session only when strict
    lenient = pytester.runpytest_subprocess("--disable-recording")
    lenient.assert_outcomes(passed=TESTS)
    assert lenient.ret == 0
    strict = pytester.runpytest_subprocess("--disable-recording", "--cassette-strict")
    strict.assert_outcomes(passed=TESTS)
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(
        [
            "cassette: miss POST https://api.openai.com/v1/chat/completions (would be *) in test "
            "test_app.py::test_swallows_a_miss",
            "cassette: --cassette-strict: failing the session for 1 misses",
        ]
    )

    # `cassette run` around the suite, from an environment without mitmproxy (the README's install): the plugin
    # uses the outer proxy and looks for no mitmdump; `cassette_strict` in the ini fails on the outer report.
    mitmdump = os.environ["CASSETTE_MITMDUMP"]
    assert shutil.which("mitmdump") is None
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\ncassette_scope = test\ncassette_strict = true\n")
    outer = cassette(
        "run", "--mitmdump", mitmdump, "--", sys.executable, "-m", "pytest", "-q",
        cwd=pytester.path, unset=("CASSETTE_MITMDUMP",),
    )  # fmt: skip
    assert "mitmdump not found" not in outer.stdout + outer.stderr
    assert f"{TESTS} passed" in outer.stdout, outer.stdout + outer.stderr
    assert "cassette: --cassette-strict: failing the session for 1 misses" in outer.stdout
    assert "cassette: miss POST https://api.openai.com/v1/chat/completions" in outer.stdout
    assert outer.returncode == 1
    assert https_upstream.count == TESTS


def test_a_suite_that_does_not_use_the_proxy_keeps_pytest_recordings_vcr(pytester, monkeypatch):
    """pytest-recording's `vcr` is autouse: the plugin gives its own only to a suite that opted in, and starts no
    proxy for one that did not."""
    monkeypatch.delenv("CASSETTE_MITMDUMP")  # a proxy start would fail loudly
    only_plugins(monkeypatch, RECORDING)
    pytester.makepyfile(test_app="def test_off(vcr):\n    assert vcr is None  # pytest-recording's, turned off\n")
    pytester.runpytest_subprocess("--disable-recording", "-p", "no:cacheprovider").assert_outcomes(passed=1)
