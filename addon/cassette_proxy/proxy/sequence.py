"""`cassette_repeats=sequence`: a test's n-th identical request records and replays the n-th recording.

Counted per test (the test the proxy was told of, control_channel.py), so a test
gets the same recordings whether it runs alone, after others, or beside them on
another xdist worker; requests outside any test have a counter of their own.
A test's counters start again when the test starts (a rerun counts from 1).
"""

from __future__ import annotations

import os

from ..core.files.location import repeat_path


class Sequencer:
    def __init__(self) -> None:
        self.seen: dict[str | None, dict[str, int]] = {}
        """How many times each test (None: outside any test) has sent each key."""

    def next(self, key: str, first: str, root_prefix: str, replaying: bool, test: str | None = None) -> str:
        """The relative path of this request's recording; past the last one, replay keeps answering with it."""
        seen = self.seen.get(test)
        if seen is None:
            seen = self.seen[test] = {}
        n = seen.get(key, 0) + 1
        if replaying and n > 1 and not os.path.exists(root_prefix + repeat_path(first, n)):
            n -= 1
        seen[key] = n
        return repeat_path(first, n)

    def start(self, test: str, resume: bool = False) -> None:
        """A test starts: its count begins at 1, unless it resumes after a fixture of a wider scope."""
        if not resume:
            self.seen.pop(test, None)

    def reset(self) -> None:
        """A new run on this proxy: every count begins at 1 again (proxy/runs.py)."""
        self.seen.clear()
