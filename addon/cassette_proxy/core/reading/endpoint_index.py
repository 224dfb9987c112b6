"""The cassettes of one endpoint folder and their modification times, kept in memory between misses.

A miss compares the request with the newest recordings of its endpoint. Finding
those by listing and `stat`-ing the folder on every miss made a miss cost grow
with the folder (347 ms at 100,000 cassettes). The index lists and stats the
folder once, then only when the folder itself changed: adding, removing or
renaming a file (our atomic writes rename) changes the folder's modification
time, whichever process did it. On a change only the new or replaced names
(a new inode, read from the listing without a `stat`) are stat-ed.

Pure: no mitmproxy import; thread-safe, since misses are answered in worker threads.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections import OrderedDict
from typing import NamedTuple

RACY_NS = 1_000_000_000
"""A folder changed this recently may change again within the same tick of the file system's clock, leaving its
modification time as it was: its stamp is trusted only once this much time has passed (git's "racy" rule)."""


class Stamp(NamedTuple):
    """What identifies one version of a file: a rewrite by rename is a new inode, an edit in place a new mtime."""

    inode: int
    mtime_ns: int
    size: int


class EndpointIndex:
    """The `*.json` cassettes of one folder (not the `.name.tmp` of a write in progress), newest first on demand."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        """(inode, mtime_ns) of the folder when it was last listed, if old enough to trust (see RACY_NS)."""
        self._files: dict[str, Stamp] = {}
        self._newest: list[tuple[str, Stamp]] | None = None
        self.listings = 0
        """How many times the folder was listed; `stats`: files stat-ed. What the tests observe."""
        self.stats = 0

    def newest(self, count: int) -> list[tuple[str, Stamp]]:
        """The `count` most recently modified cassettes, newest first, with their stamps."""
        with self.lock:
            self._refresh()
            if self._newest is None or len(self._newest) < min(count, len(self._files)):
                ranked = heapq.nlargest(count, self._files.items(), key=lambda item: (item[1].mtime_ns, item[0]))
                self._newest = ranked
            return self._newest[:count]

    def _refresh(self) -> None:
        try:
            status = os.stat(self.folder)
        except OSError:
            self._stamp, self._files, self._newest = None, {}, None
            return
        stamp = (status.st_ino, status.st_mtime_ns)
        if stamp == self._stamp:
            return
        listed_at = time.time_ns()
        try:
            with os.scandir(self.folder) as entries:
                listed = {
                    entry.name: entry.inode()
                    for entry in entries
                    if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file()
                }
        except OSError:
            self._stamp, self._files, self._newest = None, {}, None
            return
        self.listings += 1
        files = {}
        for name, inode in listed.items():
            known = self._files.get(name)
            if known is not None and known.inode == inode:
                files[name] = known
                continue
            try:
                file_status = os.stat(os.path.join(self.folder, name))
                files[name] = Stamp(file_status.st_ino, file_status.st_mtime_ns, file_status.st_size)
            except OSError:
                continue  # removed between the listing and the stat
            self.stats += 1
        self._files, self._newest = files, None
        self._stamp = stamp if listed_at - status.st_mtime_ns > RACY_NS else None


class EndpointIndexes:
    """One `EndpointIndex` per folder, the least recently used dropped past `size` folders."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._indexes: OrderedDict[str, EndpointIndex] = OrderedDict()

    def of(self, folder: str) -> EndpointIndex:
        with self._lock:
            index = self._indexes.get(folder)
            if index is None:
                index = self._indexes[folder] = EndpointIndex(folder)
                while len(self._indexes) > self.size:
                    self._indexes.popitem(last=False)
            else:
                self._indexes.move_to_end(folder)
            return index
