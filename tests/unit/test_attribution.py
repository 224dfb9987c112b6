"""Which test a request belongs to (core/traffic/attribution.py): the carriers, and the verdict when several tests run."""

from __future__ import annotations

import pytest
from cassette_proxy.core.report import Report
from cassette_proxy.core.traffic.attribution import (
    Carried,
    attribute,
    carried,
    decode_tests,
    encode_tests,
    without_member,
)


@pytest.mark.parametrize(
    "tests",
    [(), ("a.test.js > adds",), ("t.py::test_x[1,2]", "ünïcode test, with a comma"), ("%41 literal",)],
)
def test_the_header_value_round_trips_any_test_ids(tests):
    value = encode_tests(tests)
    assert value.isascii() and "\n" not in value
    assert decode_tests(value) == tests


@pytest.mark.parametrize(
    ("baggage", "member", "rest"),
    [
        ("cassette-test=a%20b", "a%20b", ""),
        ("userId=7,cassette-test=t.py%3A%3Atest_a;p=1, other=x", "t.py%3A%3Atest_a", "userId=7,other=x"),
        ("userId=7", None, "userId=7"),
        ("cassette-testing=1", None, "cassette-testing=1"),
        (" cassette-test = x ", "x", ""),
    ],
)
def test_the_baggage_member_is_found_and_taken_out(baggage, member, rest):
    assert without_member(baggage) == (member, rest)


def test_the_preloads_header_wins_over_baggage():
    assert carried("a", "b") == Carried(("a",), "x-cassette-test")
    assert carried(None, "b") == Carried(("b",), "baggage")
    assert carried(None, None) is None
    assert carried("", None) == Carried((), "x-cassette-test")


@pytest.mark.parametrize(
    ("carrier", "running", "runners", "test"),
    [
        (Carried(("b",), "x-cassette-test"), {"a", "b"}, 2, "b"),
        (Carried(("z",), "baggage"), {"a"}, 1, "z"),  # announced to another proxy: still its own test
        (Carried((), "x-cassette-test"), {"a", "b"}, 2, None),  # the process is between tests
        (None, set(), 3, None),
        (None, {"a"}, 1, "a"),  # a serial runner, its subprocess: the one current test
    ],
)
def test_a_request_belongs_to_its_carriers_test_or_the_one_serial_test(carrier, running, runners, test):
    assert attribute(carrier, running, runners).test == test
    assert attribute(carrier, running, runners).problem is None


@pytest.mark.parametrize(
    ("carrier", "running", "runners", "named"),
    [
        (None, {"a", "b"}, 2, "2 test(s) run now (a, b) from 2 runners"),
        (None, {"a"}, 2, "1 test(s) run now (a) from 2 runners"),  # the other worker is between tests
        (None, {"a", "b"}, 1, "2 test(s) run now (a, b) from 1 runners"),
        (Carried(("a", "b"), "x-cassette-test"), {"a", "b"}, 1, "ran 2 tests at once (a, b)"),
    ],
)
def test_an_ambiguous_request_names_no_test_and_says_why(carrier, running, runners, named):
    found = attribute(carrier, running, runners)
    assert found.test is None
    assert named in found.problem


def test_notices_are_in_the_summary_and_survive_the_report_file_and_a_merge():
    report = Report()
    report.test_notice("end of t::a in runner 12, which was not running there (its current test: t::b)")
    assert "cassette: test announcements: end of t::a in runner 12" in report.summary()
    read = Report.from_json(report.to_json())
    assert Report.merged([read, read]).test_notices == report.test_notices * 2
