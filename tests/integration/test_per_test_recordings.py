"""Per-test recordings through the pytest plugin, as a user meets them: a suite in a temp folder, run by a real
pytest in a subprocess, a real mitmdump, the real openai SDK. The fake upstream numbers its answers, so identical
requests get different answers when recorded: which recording a test replays is visible in what it gets."""

from __future__ import annotations

import json

import pytest
from cassette_command import redirect_args
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

SUITE = """
import json, pathlib
import pytest
from openai import OpenAI

pytestmark = {marker}

client = OpenAI(api_key="{key}", max_retries=0, default_headers={{"x-fake-numbered": "1"}})
RESULTS = pathlib.Path(__file__).with_name("results.jsonl")


def ask(prompt="same question"):
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}])
    return reply.choices[0].message.content


def keep(name, answers):
    with RESULTS.open("a") as out:
        out.write(json.dumps([name, answers]) + "\\n")


@pytest.fixture(scope="session")
def warm_up():
    # A session fixture: outside any test, so it counts on its own, whichever test first needs it.
    keep("warm_up", [ask()])


def test_a():
    keep("test_a", [ask(), ask()])


def test_b(warm_up):
    keep("test_b", [ask(), ask()])
"""


def answer(n: int) -> str:
    return f"#{n} echo: same question"


@pytest.fixture
def suite(pytester, monkeypatch, https_upstream):
    """Write the suite with a module marker; run it; read what each test got (and forget it for the next run)."""
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    only_plugins(monkeypatch)
    pytester.makeini("[pytest]\ncassette = true\n")

    class Suite:
        upstream = https_upstream

        def write(self, marker: str) -> None:
            pytester.makepyfile(test_app=SUITE.format(marker=marker, key=FAKE_OPENAI_KEY))

        def run(self, *args: str, passed: int = 2, **outcomes: int) -> tuple[dict, pytest.RunResult]:
            results = pytester.path / "results.jsonl"
            results.unlink(missing_ok=True)
            run = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
            run.assert_outcomes(passed=passed, **outcomes)
            got = {}
            for line in results.read_text().splitlines() if results.exists() else []:
                name, answers = json.loads(line)
                got[name] = answers
            return got, run

        def cassettes(self) -> list[str]:
            root = pytester.path / "cassettes"
            return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json"))

    return Suite()


SEQUENCE = 'pytest.mark.cassette(repeats="sequence")'


def test_shared_sequences_count_per_test_alone_together_reordered_and_in_parallel(suite):
    suite.write(SEQUENCE)
    got, run = suite.run("--cassette-mode=record")
    # test_b and the fixture count from 1 like test_a did: they replay its two recordings, nothing more is sent.
    assert got == {"test_a": [answer(1), answer(2)], "warm_up": [answer(1)], "test_b": [answer(1), answer(2)]}
    assert suite.upstream.count == 2
    assert len(suite.cassettes()) == 2
    run.stdout.fnmatch_lines(["cassette: record: 3 hits, 0 misses, 2 recorded, 2 upstream, 0 passthrough"])

    expected = {"test_a": [answer(1), answer(2)], "test_b": [answer(1), answer(2)]}
    alone, _ = suite.run("test_app.py::test_b", passed=1)
    assert alone == {"warm_up": [answer(1)], "test_b": expected["test_b"]}
    reordered, _ = suite.run("test_app.py::test_b", "test_app.py::test_a")
    assert reordered == {"warm_up": [answer(1)], **expected}
    parallel, run = suite.run("-n", "2")
    assert {name: parallel[name] for name in expected} == expected
    run.stdout.fnmatch_lines(["cassette: replay: 5 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])
    assert suite.upstream.count == 2


def test_test_scope_gives_identical_requests_of_each_test_their_own_answers(suite):
    suite.write('[pytest.mark.cassette(repeats="sequence", scope="test")]')
    recorded, _ = suite.run("--cassette-mode=record")
    # Requests outside any test stay shared: the fixture records its own answer between the tests' recordings.
    assert recorded == {"test_a": [answer(1), answer(2)], "warm_up": [answer(3)], "test_b": [answer(4), answer(5)]}
    names = suite.cassettes()
    assert len(names) == 5
    assert sum(name.startswith("tests/test_app.py/test_a/api.openai.com/v1/chat/completions/") for name in names) == 2
    assert sum(name.startswith("tests/test_app.py/test_b/api.openai.com/v1/chat/completions/") for name in names) == 2
    assert sum(name.startswith("api.openai.com/v1/chat/completions/") for name in names) == 1

    expected = {name: recorded[name] for name in ("test_a", "test_b")}
    alone, _ = suite.run("test_app.py::test_b", passed=1)
    assert alone["test_b"] == expected["test_b"]
    reordered, _ = suite.run("test_app.py::test_b", "test_app.py::test_a")
    assert {name: reordered[name] for name in expected} == expected
    parallel, _ = suite.run("-n", "2")
    assert {name: parallel[name] for name in expected} == expected
    assert suite.upstream.count == 5


def test_cassette_scope_option_and_a_renamed_test_says_what_it_lost(suite, pytester):
    suite.write("[]")
    suite.run("--cassette-mode=record", "--cassette-scope=test")
    assert any(name.startswith("tests/test_app.py/test_a/") for name in suite.cassettes())
    source = pytester.path / "test_app.py"
    source.write_text(source.read_text().replace("def test_a():", "def test_a_renamed():"))
    _, run = suite.run("--cassette-scope=test", passed=1, failed=1)
    run.stdout.fnmatch_lines(
        [
            "*in the test scope of test test_app.py::test_a_renamed (its recordings live under "
            "tests/test_app.py/test_a_renamed/; a renamed test loses them*",
            "cassette: 1 test(s) failed on cassette misses:",
            "cassette:   test_app.py::test_a_renamed (1 miss)",
        ]
    )


def test_a_replay_marker_keeps_one_test_from_recording_and_the_summary_names_it(suite, pytester):
    suite.write("[]")
    source = pytester.path / "test_app.py"
    source.write_text(
        source.read_text().replace("def test_a():", '@pytest.mark.cassette(mode="replay")\ndef test_a():')
    )
    got, run = suite.run("--cassette-mode=record", "-rN", passed=1, failed=1)
    assert got == {"warm_up": [answer(1)], "test_b": [answer(1), answer(1)]}  # reuse: the run's default
    assert suite.upstream.count == 1
    run.stdout.fnmatch_lines(
        [
            "*openai.ConflictError*",
            "cassette: miss POST https://api.openai.com/v1/chat/completions (would be *) in test test_app.py::test_a",
            "cassette: 1 test(s) failed on cassette misses:",
            "cassette:   test_app.py::test_a (1 miss)",
        ]
    )


def test_the_report_names_the_test_of_every_hit_miss_and_recording(suite, pytester):
    suite.write(SEQUENCE)
    suite.run("--cassette-mode=record")
    pytester.makeconftest(
        """
        import json, pathlib, pytest
        from cassette_proxy.core.report import Report
        from cassette_proxy.pytest_plugin import REPORTS

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(session):
            report = Report.merged(session.config.stash[REPORTS])
            pathlib.Path(__file__).with_name("report.json").write_text(json.dumps(report.to_json()))
        """
    )
    report_path = pytester.path / "report.json"
    suite.run()
    tests = json.loads(report_path.read_text())["tests"]
    assert {name: (entry["hits"], entry["misses"], entry["recorded"]) for name, entry in tests.items()} == {
        "test_app.py::test_a": (2, 0, 0),
        "test_app.py::test_b": (2, 0, 0),
        "<no test>": (1, 0, 0),
    }
    assert all(len(entry["cassettes"]) == (1 if name == "<no test>" else 2) for name, entry in tests.items())


def test_a_bad_marker_fails_its_test_with_a_clear_message(suite, pytester):
    suite.write("[]")
    source = pytester.path / "test_app.py"
    source.write_text(
        source.read_text().replace("def test_a():", '@pytest.mark.cassette(repeats="sequential")\ndef test_a():')
    )
    run = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_app.py::test_a")
    run.stdout.fnmatch_lines(["*repeats 'sequential' is not a choice; use one of reuse, sequence*"])
    assert run.ret != 0
