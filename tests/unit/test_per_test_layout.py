"""Where a test's own recordings live (core/traffic/per_test.py) and how the run report counts per test (core/report.py)."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.report import Report
from cassette_proxy.core.traffic.per_test import NO_TEST, folder_of_test, scoped_name

SHARED = "api.openai.com/v1/chat/completions/" + "a" * 32 + ".json"


@pytest.mark.parametrize(
    ("test_id", "folder"),
    [
        ("tests/test_chat.py::test_reply", "tests/tests/test_chat.py/test_reply"),
        ("tests/test_chat.py::TestAgent::test_loop[gpt-4o]", "tests/tests/test_chat.py/TestAgent.test_loop_gpt-4o"),
        ("test_app.py::test_x[a b/c]", "tests/test_app.py/test_x_a_b_c"),
        ("summarize returns the answer", "tests/summarize_returns_the_answer"),
        ("../../etc/passwd::..", "tests/etc/passwd/_"),
        ("/abs/path.py::t", "tests/abs/path.py/t"),
        ("C:\\suite\\test_x.py::t", "tests/C/suite/test_x.py/t"),
    ],
)
def test_a_test_folder_is_readable_and_never_leaves_the_cassette_folder(test_id, folder):
    assert folder_of_test(test_id) == folder
    assert all(part not in ("", ".", "..") for part in folder.split("/"))


def test_a_long_test_name_is_cut_and_kept_distinct():
    one, two = folder_of_test("t.py::test_x[" + "a" * 300 + "]"), folder_of_test("t.py::test_x[" + "a" * 299 + "b]")
    assert one != two
    assert all(len(part) <= 120 for part in one.split("/"))


def test_only_the_test_scope_inside_a_test_moves_a_recording():
    assert scoped_name(SHARED, "t.py::test_a", "test") == f"tests/t.py/test_a/{SHARED}"
    assert scoped_name(SHARED, "t.py::test_a", "shared") == SHARED
    assert scoped_name(SHARED, None, "test") == SHARED  # outside any test: always shared


def test_the_report_counts_per_test_round_trips_and_merges():
    first, second = Report(), Report()
    first.used_by("t.py::test_a", SHARED, "hits")
    first.missed({"key": "k", "method": "POST", "url": "u", "cassette": "c", "test": "t.py::test_a"})
    second.used_by("t.py::test_a", SHARED, "recorded")
    second.used_by(None, SHARED, "hits")
    read = Report.from_json(json.loads(json.dumps(first.to_json())))
    assert read.tests == {"t.py::test_a": {"hits": 1, "misses": 1, "recorded": 0, "cassettes": {SHARED}}}
    merged = Report.merged([read, second])
    assert merged.tests["t.py::test_a"] == {"hits": 1, "misses": 1, "recorded": 1, "cassettes": {SHARED}}
    assert merged.tests[NO_TEST]["hits"] == 1
    assert merged.tests_with_misses() == {"t.py::test_a": 1}
    assert "in test t.py::test_a" in merged.summary()


def test_a_report_written_before_per_test_counts_still_reads():
    data = Report().to_json()
    del data["tests"]
    assert Report.from_json(data).tests == {}
