"""The run report: exact counts of what the proxy did, for launchers, CI gates and pruning."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .store import write_atomic


@dataclass
class Report:
    mode: str = "replay"
    hits: int = 0
    misses: list[dict] = field(default_factory=list)
    recorded: int = 0
    overwritten: int = 0
    upstream: int = 0
    passthrough: int = 0
    errors: list[dict] = field(default_factory=list)
    client_errors: dict[str, int] = field(default_factory=lambda: {"hits": 0, "recorded": 0})
    """Recorded 4xx answers (`cassette_record_statuses`) among `hits` and `recorded`: a suite's error-handling
    tests, counted apart so a summary does not pass them off as successes."""
    cassettes_used: set[str] = field(default_factory=set)
    """Cassettes this run read or wrote (relative paths): what `cassette prune` keeps."""

    def to_json(self) -> dict:
        data = asdict(self)
        data["cassettes_used"] = sorted(self.cassettes_used)
        data["counts"] = {
            "hits": self.hits,
            "misses": len(self.misses),
            "recorded": self.recorded,
            "overwritten": self.overwritten,
            "upstream": self.upstream,
            "passthrough": self.passthrough,
            "errors": len(self.errors),
        }
        return data

    def write(self, path: Path) -> None:
        write_atomic(path, (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8"))
