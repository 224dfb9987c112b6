"""`cassette_repeats=sequence`: the n-th identical request of a run records and replays the n-th recording."""

from __future__ import annotations

import os

from ..core.location import repeat_path


class Sequencer:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        """How many times this run has seen each key."""

    def next(self, key: str, first: str, root_prefix: str, replaying: bool) -> str:
        """The relative path of this request's recording; past the last one, replay keeps answering with it."""
        n = self.seen.get(key, 0) + 1
        if replaying and n > 1 and not os.path.exists(root_prefix + repeat_path(first, n)):
            n -= 1
        self.seen[key] = n
        return repeat_path(first, n)
