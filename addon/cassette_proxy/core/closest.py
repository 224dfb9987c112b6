"""The recordings nearest to a missed request, and what changed since: the diff a miss answers with.

A bare "no match" invites a blind re-record; a field-level diff against the
nearest recorded requests shows the prompt edit that caused the miss. Pure: no
mitmproxy import; thread-safe (misses are answered in worker threads).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .cassette_file import CassetteError, load
from .diff import differences
from .endpoint_index import EndpointIndexes, Stamp

MAX_CANDIDATES = 200
"""Cassettes of the same endpoint compared on a miss (newest first); bounds the miss path on large folders."""

MAX_CLOSEST = 3
MAX_DIFFERENCES = 8


MAX_CACHED_REQUEST_BYTES = 256 * 1024
"""Candidate cassettes up to this size keep their parsed request in memory between misses."""


class ClosestSearch:
    """Finds the recordings nearest to a missed request; what it read stays in memory for the next miss.

    The folder's listing comes from an `EndpointIndex` (re-read only when the
    folder changed), and the requests of up to MAX_CANDIDATES small candidates
    are kept parsed, keyed by their file's inode, mtime and size: a miss after
    the first stats MAX_CANDIDATES files and reads none that has not changed,
    however large the folder.
    """

    def __init__(self) -> None:
        self.indexes = EndpointIndexes()
        self._requests: OrderedDict[tuple[str, Stamp], dict] = OrderedDict()
        self._lock = threading.Lock()

    def closest(self, endpoint_dir: Path, root: Path, method: str, body: Any) -> list[dict]:
        """The recorded requests of the same endpoint nearest to this one, with what differs."""
        ranked = []
        folder = str(endpoint_dir)
        for name, _ in self.indexes.of(folder).newest(MAX_CANDIDATES):
            request = self._request(os.path.join(folder, name))
            if request is None:
                continue
            diff = differences(request.get("body"), body)
            if request.get("method") != method:
                diff.insert(0, f"method: {request.get('method')} → {method}")
            ranked.append((len(diff), name, diff))
        ranked.sort(key=lambda item: item[0])
        return [
            {
                "cassette": (endpoint_dir / name).relative_to(root).as_posix(),
                "differences": diff[:MAX_DIFFERENCES]
                + ([f"… and {len(diff) - MAX_DIFFERENCES} more"] if len(diff) > MAX_DIFFERENCES else []),
            }
            for _, name, diff in ranked[:MAX_CLOSEST]
        ]

    def _request(self, path: str) -> dict | None:
        # A stat per candidate (a bounded cost): an edit in place keeps the folder's mtime and the
        # file's inode, but not its mtime and size.
        try:
            status = os.stat(path)
        except OSError:
            return None
        stamp = Stamp(status.st_ino, status.st_mtime_ns, status.st_size)
        with self._lock:
            request = self._requests.get((path, stamp))
            if request is not None:
                self._requests.move_to_end((path, stamp))
                return request
        try:
            request = load(Path(path))["request"]
        except (OSError, CassetteError):
            return None
        if stamp.size <= MAX_CACHED_REQUEST_BYTES:
            with self._lock:
                self._requests[(path, stamp)] = request
                while len(self._requests) > MAX_CANDIDATES * 4:
                    self._requests.popitem(last=False)
        return request
