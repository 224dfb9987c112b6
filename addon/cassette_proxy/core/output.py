"""The doors out: every log record and everything the CLI prints, escaped (printable.py) and scrubbed of every
registered secret (secrets/scrub.py). Every logger of the package is made here (a test checks)."""

from __future__ import annotations

import logging
from typing import Any, TextIO

from .printable import printable
from .secrets.scrub import scrub


class PrintableRecords(logging.Filter):
    """Escapes a log record's message (one line, whatever it holds) and its traceback before any handler formats it,
    and takes every registered secret out of both."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(printable(record.getMessage())), ()
        if record.exc_info and not record.exc_text:
            traceback = logging.Formatter().formatException(record.exc_info)
            record.exc_text = scrub(printable(traceback, keep_newlines=True))
        return True


_RECORDS = PrintableRecords()


def logger(name: str) -> logging.Logger:
    """The module's logger, escaping what it logs: every logger of the package is made here (a test checks)."""
    found = logging.getLogger(name)
    if _RECORDS not in found.filters:
        found.addFilter(_RECORDS)
    return found


class PrintableStream:
    """A text stream (stdout, stderr) that escapes control characters in everything written to it, newlines kept,
    and takes every registered secret out."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(scrub(printable(text, keep_newlines=True)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
