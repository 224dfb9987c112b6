"""The pytest plugin as a user meets it: a suite in a temp folder, run by a real pytest in a subprocess."""

from __future__ import annotations

import json
import textwrap

import pytest
from cassette_command import redirect_args
from harness import FAKE_OPENAI_KEY
from inner_pytest import every_installed_plugin, only_plugins

pytest_plugins = ["pytester"]

APP_TEST = """
from openai import OpenAI

client = OpenAI(api_key="{key}", max_retries=0)  # created at import: the proxy must already run


def ask(prompt):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}])
    return reply.choices[0].message.content
{tests}
"""
ONE_TEST = """

def test_{name}():
    assert ask("{prompt}") == "echo: {prompt}"
"""


def write_suite(pytester: pytest.Pytester, prompts: dict[str, str]) -> None:
    pytester.makeini("[pytest]\ncassette = true\n")
    tests = "".join(ONE_TEST.format(name=name, prompt=prompt) for name, prompt in prompts.items())
    pytester.makepyfile(test_app=APP_TEST.format(key=FAKE_OPENAI_KEY, tests=tests))


@pytest.fixture
def suite_env(monkeypatch, https_upstream):
    """The environment of the inner pytest: forwarded traffic reaches the fake upstream, no CASSETTE_MODE."""
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    only_plugins(monkeypatch)
    return https_upstream


def test_records_with_cassette_mode_option_then_replays_by_default(pytester, suite_env, monkeypatch):
    """Among every plugin installed, found by its entry point: the suite as a user runs it."""
    every_installed_plugin(monkeypatch)
    write_suite(pytester, {"greeting": "hello plugin"})
    recorded = pytester.runpytest_subprocess("--cassette-mode=record")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["cassette: record: 0 hits, 0 misses, 1 recorded, 1 upstream, 0 passthrough"])
    assert len(list((pytester.path / "cassettes").rglob("*.json"))) == 1

    replayed = pytester.runpytest_subprocess()
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["cassette: replay: 1 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])
    assert suite_env.count == 1


def test_cassette_mode_variable_records(pytester, suite_env, monkeypatch):
    """The bug this plugin replaces: `CASSETTE_MODE=record pytest` must record."""
    write_suite(pytester, {"greeting": "hello from the environment"})
    monkeypatch.setenv("CASSETTE_MODE", "record")
    recorded = pytester.runpytest_subprocess()
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["cassette: record: 0 hits, 0 misses, 1 recorded, 1 upstream, 0 passthrough"])
    assert suite_env.count == 1


def test_changed_prompt_fails_the_test_through_the_sdk_exception(pytester, suite_env):
    write_suite(pytester, {"greeting": "hello plugin"})
    pytester.runpytest_subprocess("--cassette-mode=record").assert_outcomes(passed=1)
    write_suite(pytester, {"greeting": "hello plugin, reworded"})
    changed = pytester.runpytest_subprocess()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*openai.ConflictError*", "cassette: replay: 0 hits, 1 misses*"])
    assert suite_env.count == 1


def test_xdist_workers_each_run_their_own_proxy(pytester, suite_env):
    prompts = {f"prompt_{i}": f"parallel {i}" for i in range(6)}
    write_suite(pytester, prompts)
    pytester.makeconftest(
        textwrap.dedent(
            """
            import json, os, pathlib

            def pytest_runtest_teardown(item):
                worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
                with open(pathlib.Path(__file__).with_name("proxies.jsonl"), "a") as log:
                    log.write(json.dumps([worker, os.environ["HTTPS_PROXY"]]) + "\\n")
            """
        )
    )
    recorded = pytester.runpytest_subprocess("-n", "2", "--cassette-mode=record")
    recorded.assert_outcomes(passed=6)
    recorded.stdout.fnmatch_lines(["cassette: record: 0 hits, 0 misses, 6 recorded, 6 upstream, 0 passthrough"])
    proxies = {tuple(json.loads(line)) for line in (pytester.path / "proxies.jsonl").read_text().splitlines()}
    workers = {worker for worker, _ in proxies}
    assert workers == {"gw0", "gw1"}
    assert len({url for _, url in proxies}) == 2  # one proxy per worker, each on its own port

    replayed = pytester.runpytest_subprocess("-n", "2")
    replayed.assert_outcomes(passed=6)
    replayed.stdout.fnmatch_lines(["cassette: replay: 6 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])


def test_fixtures_give_the_proxy_url_reverse_base_urls_and_a_subprocess_environment(pytester, suite_env):
    """Without `cassette = true` the suite opts in by asking for a fixture."""
    pytester.makeini(
        "[pytest]\ncassette_reverse =\n    openai=https://api.openai.com\n    anthropic=https://api.anthropic.com\n"
    )
    pytester.makepyfile(
        test_fixtures=f"""
        import subprocess, sys
        import httpx

        BODY = {{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": "fixtures"}}]}}
        CHILD = f"import httpx; print(httpx.post('https://api.openai.com/v1/chat/completions', json={{BODY!r}}).json()['choices'][0]['message']['content'])"


        def test_subprocess_goes_through_the_proxy(cassette_env, cassette_proxy_url):
            assert cassette_env["HTTPS_PROXY"] == cassette_proxy_url
            out = subprocess.run([sys.executable, "-c", CHILD], env=cassette_env, capture_output=True, text=True)
            assert out.stdout.strip() == "echo: fixtures", out.stderr


        def test_reverse_base_url_reaches_the_same_cassette(cassette_base_urls):
            reply = httpx.post(cassette_base_urls["openai"] + "/chat/completions", json=BODY,
                               headers={{"authorization": "Bearer {FAKE_OPENAI_KEY}"}})
            assert reply.json()["choices"][0]["message"]["content"] == "echo: fixtures"
            assert cassette_base_urls["anthropic"].startswith("http://127.0.0.1:")
        """
    )
    result = pytester.runpytest_subprocess("--cassette-mode=record")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["cassette: record: 1 hits, 0 misses, 1 recorded, 1 upstream, 0 passthrough"])


def test_a_bare_client_takes_the_reverse_route_the_suite_configured(pytester, suite_env):
    """No fixture, no base URL in code: the plugin sets OPENAI_BASE_URL before collection."""
    pytester.makeini("[pytest]\ncassette = true\ncassette_reverse =\n    openai=https://api.openai.com\n")
    pytester.makepyfile(
        test_app=f"""
        import os
        from openai import OpenAI

        client = OpenAI(api_key="{FAKE_OPENAI_KEY}", max_retries=0)  # at import: before any fixture runs


        def test_greeting():
            assert str(client.base_url).startswith("http://127.0.0.1:") and client.base_url.path == "/v1/"
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "hi"}}])
            assert reply.choices[0].message.content == "echo: hi"


        def test_a_miss_says_what_to_type():
            import openai, pytest
            with pytest.raises(openai.ConflictError) as missed:
                client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": "new"}}])
            assert "To record it: `pytest --cassette-mode=record`" in missed.value.message
        """
    )
    recorded = pytester.runpytest_subprocess("--cassette-mode=record", "-k", "greeting")
    recorded.assert_outcomes(passed=1, deselected=1)
    recorded.stdout.fnmatch_lines(["cassette: routes: forward 0, openai 1"])

    replayed = pytester.runpytest_subprocess()
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["cassette: replay: 1 hits, 1 misses*", "cassette: routes: forward 0, openai 2"])


BUNDLE_TEST = """
import os, re

def test_the_clients_trust_the_proxy_ca_alone():
    bundle = open(os.environ["SSL_CERT_FILE"]).read()
    assert len(re.findall("BEGIN CERTIFICATE", bundle)) == 1
"""


def test_in_replay_the_session_gives_clients_the_proxy_ca_alone(pytester, suite_env, monkeypatch):
    """As `cassette run` does: a new SDK client then parses one certificate, not the system's ~145."""
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    pytester.makeini("[pytest]\ncassette = true\n")
    pytester.makepyfile(test_bundle=BUNDLE_TEST)
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_cassette_dir_as_two_words_outside_the_suite_is_refused_not_a_moved_rootdir(pytester, monkeypatch):
    """pytest chooses its rootdir before it knows plugins' options, and took the folder for a test path: the test
    ids (and test-scope folders) moved between record and replay. One word works; two words say so."""
    only_plugins(monkeypatch)
    outside = pytester.path.parent / f"{pytester.path.name}-cassettes"
    outside.mkdir()
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    pytester.makepyfile(test_app="def test_a():\n    pass\n")
    two_words = pytester.runpytest_subprocess("--cassette-dir", str(outside))
    assert two_words.ret == pytest.ExitCode.USAGE_ERROR
    two_words.stderr.fnmatch_lines([f"*--cassette-dir {outside}: as two words, pytest reads*--cassette-dir={outside}"])
    pytester.runpytest_subprocess(f"--cassette-dir={outside}").assert_outcomes(passed=1)
    (pytester.path / "cassettes").mkdir()
    pytester.runpytest_subprocess("--cassette-dir", "cassettes").assert_outcomes(passed=1)  # inside: no harm
