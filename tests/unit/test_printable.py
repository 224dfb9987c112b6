"""Control characters never reach a terminal or a log raw (core/printable.py): what is escaped, and where."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from cassette_proxy.core.output import PrintableStream, logger
from cassette_proxy.core.printable import printable
from cassette_proxy.core.report import ErrorEntry, ErrorKind, Report

PACKAGE = Path(__file__).resolve().parents[2] / "addon" / "cassette_proxy"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("/v1/\x1b]0;pwned\x07", "/v1/\\x1b]0;pwned\\x07"),  # a terminal title set by a request path
        ("ok\rforged", "ok\\x0dforged"),
        ("one\ntwo", "one\\x0atwo"),
        ("\x9b31m", "\\x9b31m"),  # C1 CSI
        ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override
        ("\udcff", "\\udcff"),  # a lone surrogate (surrogateescape of a 0xff byte)
        ("\x00\x7f", "\\x00\\x7f"),
        ("tab\tkept, é and 日本 too", "tab\tkept, é and 日本 too"),
    ],
)
def test_control_characters_become_visible_escapes(raw, shown):
    assert printable(raw) == shown


def test_newlines_are_kept_only_when_asked():
    assert printable("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"


def test_the_run_summary_escapes_what_clients_sent():
    report = Report()
    report.missed({"method": "GET", "url": "https://api.openai.com/v1/\x1b]0;pwned\x07", "cassette": "x/\x1b.json"})
    report.error(ErrorEntry(ErrorKind.INVALID, "a\rb"))
    summary = report.summary()
    assert "\x1b" not in summary and "\r" not in summary and "\x07" not in summary
    assert "https://api.openai.com/v1/\\x1b]0;pwned\\x07" in summary
    assert len(summary.splitlines()) == 3  # one line per entry: a newline in a message cannot forge another


def test_a_logger_escapes_messages_and_tracebacks():
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    log = logger("cassette_proxy.tests.printable")
    log.addHandler(handler)
    try:
        log.warning("cassette miss: GET %s", "/v1/\x1b]0;pwned\x07\nforged line")
        try:
            raise ValueError("bad \x1b[2J path")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "cassette miss: GET /v1/\\x1b]0;pwned\\x07\\x0aforged line" in text
    assert "ValueError: bad \\x1b[2J path" in text


def test_every_logger_of_the_package_is_made_by_output_logger():
    made_elsewhere = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "getLogger(" in path.read_text(encoding="utf-8") and path.name != "output.py"
    ]
    assert made_elsewhere == []


def test_a_printable_stream_escapes_everything_written_through_it():
    out = io.StringIO()
    stream = PrintableStream(out)
    print("file:", "x\x1b]0;t\x07.json", file=stream)  # type: ignore[arg-type]
    assert out.getvalue() == "file: x\\x1b]0;t\\x07.json\n"
