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
    token_exchanges: int = 0
    """Requests to an OAuth token endpoint: answered with a placeholder in replay, passed through otherwise, never stored."""
    errors: list[dict] = field(default_factory=list)
    cassettes_used: set[str] = field(default_factory=set)
    """Cassettes this run read or wrote (relative paths): what `cassette prune` keeps."""
    routes: dict[str, int] = field(default_factory=dict)
    """Requests per route: `forward` and each reverse listener's name, listed even when no request took it."""

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
            "token_exchanges": self.token_exchanges,
            "errors": len(self.errors),
        }
        return data

    def write(self, path: Path) -> None:
        write_atomic(path, (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8"))
