"""`cassette prune --test / --drop-test`: keep or drop recordings by the tests that used them, from run reports
that say which test used which cassette; refuses (deleting nothing) when it cannot tell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cassette_proxy.cli import main
from cassette_proxy.core.files.location import cassette_files
from cassette_proxy.core.report import Report

OWN_A = "tests/t.py/test_a/api.openai.com/v1/chat/completions/" + "a" * 32 + ".json"
OWN_B = "tests/t.py/test_b/api.openai.com/v1/chat/completions/" + "b" * 32 + ".json"
SHARED = "api.openai.com/v1/chat/completions/" + "c" * 32 + ".json"
FIXTURE = "api.openai.com/v1/embeddings/" + "d" * 32 + ".json"
STALE = "api.openai.com/v1/chat/completions/" + "e" * 32 + ".json"


@pytest.fixture
def cassettes(tmp_path) -> Path:
    root = tmp_path / "cassettes"
    for name in (OWN_A, OWN_B, SHARED, FIXTURE, STALE):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")
    return root


@pytest.fixture
def report(tmp_path) -> Path:
    """A clean replay run: test_a used its own recording and the shared one, test_b too, a fixture one more."""
    run = Report()
    for test, name in [("t.py::test_a", OWN_A), ("t.py::test_a", SHARED), ("t.py::test_b", OWN_B)]:
        run.used_by(test, name, "hits")
    run.used_by("t.py::test_b", SHARED, "hits")
    run.used_by(None, FIXTURE, "hits")
    path = tmp_path / "report.json"
    run.write(path)
    return path


def prune(capsys, report: Path, root: Path, *args: str) -> tuple[int, list[str]]:
    status = main(["prune", str(report), "--dir", str(root), *args])
    return status, capsys.readouterr().out.splitlines()


def left(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in cassette_files(root)}


def test_without_patterns_only_what_no_test_used_is_listed(capsys, report, cassettes):
    assert prune(capsys, report, cassettes)[1][:-1] == [STALE]


def test_drop_test_lists_what_only_that_test_used(capsys, report, cassettes):
    status, out = prune(capsys, report, cassettes, "--drop-test", "t.py::test_a")
    assert status == 1
    assert out[:-1] == sorted([STALE, OWN_A])  # SHARED stays: test_b used it too
    assert "counting by test: --drop-test t.py::test_a" in out[-1]


def test_test_keeps_only_what_the_matching_tests_used(capsys, report, cassettes):
    status, out = prune(capsys, report, cassettes, "--test", "*::test_b")
    assert status == 1 and out[:-1] == sorted([STALE, OWN_A, FIXTURE])


def test_drop_test_with_delete_removes_the_files_and_their_empty_folders(capsys, report, cassettes):
    status, _ = prune(capsys, report, cassettes, "--drop-test", "t.py::test_a", "--drop-test", "<no test>", "--delete")
    assert status == 0
    assert left(cassettes) == {OWN_B, SHARED}
    assert not (cassettes / "tests" / "t.py" / "test_a").exists()


def test_a_pattern_that_matches_no_test_refuses_and_deletes_nothing(capsys, report, cassettes):
    status, out = prune(capsys, report, cassettes, "--drop-test", "t.py::test_typo", "--delete")
    assert status == 2
    assert "'t.py::test_typo' matches no test of these runs (they ran e.g. <no test>, t.py::test_a" in out[0]
    assert len(left(cassettes)) == 5


def test_a_report_without_tests_refuses_prune_by_test(capsys, tmp_path, cassettes):
    run = Report()
    run.cassettes_used = {SHARED}
    path = tmp_path / "old-report.json"
    data = run.to_json()
    del data["tests"]  # a report from before per-test counts
    path.write_text(json.dumps(data))
    status, out = prune(capsys, path, cassettes, "--test", "*", "--delete")
    assert status == 2 and "does not say which test used which cassette" in out[0]
    assert len(left(cassettes)) == 5
