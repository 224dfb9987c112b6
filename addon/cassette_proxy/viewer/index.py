"""The cassette folder as the viewer reads it: one small summary per cassette, kept between runs, and one cassette in
full when it is opened; an unreadable file says why."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path, PurePosixPath

from ..core.files.atomic_write import write_atomic
from ..core.files.cassette_file import load, parse
from ..core.files.safe_read import CassetteError, read_limited
from ..core.files.session_file import is_session
from ..core.reading.conversation import Conversation, conversation_of, first_line, kind_tag
from ..core.reading.session_conversation import session_conversation

SNIPPET = 240
"""Characters of the last user message and of the answer's first line kept in the index."""


def cassette_ids(root: Path) -> dict[str, os.stat_result]:
    """Every cassette under the folder, as its `/`-separated path relative to it, with its stat; no temp files."""
    found: dict[str, os.stat_result] = {}
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((Path(entry.path), f"{prefix}{entry.name}/"))
                    elif entry.name.endswith(".json") and not entry.is_dir():
                        # A symlink out of the folder, a fifo: listed, and refused by the read with the reason.
                        found[prefix + entry.name] = _stat(entry)
        except OSError:
            continue
    return found


def _stat(entry: os.DirEntry) -> os.stat_result:
    """The entry's target's stat (a change to the file a symlink names is seen), its own for a broken link."""
    try:
        return entry.stat()
    except OSError:
        return entry.stat(follow_symlinks=False)


def conversation_in(cassette: dict) -> Conversation:
    """A WebSocket session is read by its own reader (session_conversation.py), every other cassette by conversation.py."""
    return session_conversation(cassette) if is_session(cassette) else conversation_of(cassette)


def summary_of(cassette_id: str, cassette: dict, size: int) -> dict:
    """What the start page lists for one cassette: small, so the index of a big folder stays small."""
    conversation = conversation_in(cassette)
    host, _, path = conversation.url.split("://", 1)[-1].split("?", 1)[0].partition("/")
    answer = conversation.answer
    return {
        "id": cassette_id,
        "key": str(cassette.get("key", "")),
        "recorded_at": str(cassette.get("recorded_at", "")),
        "size": size,
        "method": conversation.method,
        "host": host,
        "endpoint": "/" + path,
        "shape": conversation.shape,
        "model": conversation.model,
        "tag": kind_tag(cassette, conversation),
        "status": answer.status,
        "streamed": answer.streamed,
        "finish_reason": answer.finish_reason,
        "last_user": conversation.last_user_message[:SNIPPET],
        "answer": first_line(answer.text or next((p.text for p in answer.parts), ""))[:SNIPPET],
    }


def unreadable_summary(cassette_id: str, problem: str, size: int) -> dict:
    return {"id": cassette_id, "size": size, "error": problem, "host": cassette_id.split("/", 1)[0], "endpoint": ""}


def resolve_id(root: Path, cassette_id: str) -> Path | None:
    """The entry a cassette id names under the folder (no `..`, no absolute path), or None; what it holds is checked
    by the read (`safe_read.read_limited`: inside the folder, a regular file, size-bounded), which says why not."""
    relative = PurePosixPath(cassette_id)
    if relative.is_absolute() or ".." in relative.parts or relative.suffix != ".json" or "\\" in cassette_id:
        return None
    path = root / relative
    return path if os.path.lexists(path) and not path.is_dir() else None


SUMMARY_FORMAT = 3
"""Bumped when `summary_of` changes, so summaries cached by an older version are read again (3: the `tag` of an
MCP call or a Responses WebSocket turn; 2: WebSocket sessions, which an older version listed as unreadable)."""


def default_cache_file(root: Path) -> Path:
    """Where the summaries of a folder are kept between runs: the user's cache folder, never the cassette folder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return base / "cassette-proxy" / "view" / f"{digest}.json"


class Index:
    """One summary per cassette, re-read only for files whose size or modification time changed.

    The summaries outlive the process in `cache_file`: reading and summarising
    10,000 cassettes takes seconds, loading their cached summaries a fraction.
    A refresh runs in the background while the page shows what is ready
    (`snapshot`), so a first start on a big folder lists cassettes at once.
    """

    FIRST_WAIT = 1.0
    """Seconds an index request waits for a running refresh before answering with what is ready."""

    def __init__(self, root: Path, cache_file: Path | None = None) -> None:
        self.root = root
        self.cache_file = cache_file
        self._cache: dict[str, tuple[tuple[int, int], dict]] | None = None
        self._current: dict[str, os.stat_result] = {}
        self._lock = threading.Lock()
        """Guards `_cache` and `_current`, held only for quick updates so a snapshot never waits on a read."""
        self._refreshing = threading.Lock()
        self._refresher: threading.Thread | None = None

    def summaries(self) -> list[dict]:
        """Every summary, up to date: waits for the refresh (the export, and tests)."""
        self.refresh()
        return self.snapshot()[0]

    def refresh(self) -> None:
        with self._refreshing:
            with self._lock:
                if self._cache is None:
                    self._cache = self._load_cache()
            current = cassette_ids(self.root)
            with self._lock:
                gone = self._cache.keys() - current.keys()
                for cassette_id in gone:
                    del self._cache[cassette_id]
                self._current = current
                stale = [
                    (cassette_id, (status.st_mtime_ns, status.st_size))
                    for cassette_id, status in current.items()
                    if (cached := self._cache.get(cassette_id)) is None
                    or cached[0] != (status.st_mtime_ns, status.st_size)
                ]
            for cassette_id, stamp in stale:
                summary = self._read(cassette_id, stamp[1])
                with self._lock:
                    self._cache[cassette_id] = (stamp, summary)
            if gone or stale:
                self._save_cache()

    def refresh_in_background(self, wait: float = FIRST_WAIT) -> None:
        """Start a refresh unless one is running, and give it `wait` seconds to finish."""
        with self._lock:
            if self._refresher is None or not self._refresher.is_alive():
                self._refresher = threading.Thread(target=self.refresh, daemon=True)
                self._refresher.start()
            refresher = self._refresher
        refresher.join(wait)

    def snapshot(self) -> tuple[list[dict], int]:
        """The summaries read so far (a changed file shows its previous summary until re-read), and how many
        cassettes are still to be read."""
        with self._lock:
            ready = [self._cache[i][1] for i in sorted(self._current) if self._cache and i in self._cache]
            return ready, len(self._current) - len(ready)

    def _read(self, cassette_id: str, size: int) -> dict:
        try:
            return summary_of(cassette_id, load(self.root / cassette_id, self.root), size)
        except (OSError, CassetteError) as e:
            return unreadable_summary(cassette_id, str(e), size)

    def _load_cache(self) -> dict[str, tuple[tuple[int, int], dict]]:
        """The summaries a previous run cached; anything unreadable or from another format is ignored."""
        try:
            saved = json.loads(self.cache_file.read_text(encoding="utf-8")) if self.cache_file else None
        except (OSError, ValueError):
            return {}
        if not isinstance(saved, dict) or saved.get("format") != SUMMARY_FORMAT:
            return {}
        entries = saved.get("entries")
        if not isinstance(entries, dict):
            return {}
        return {
            cassette_id: ((entry[0], entry[1]), entry[2])
            for cassette_id, entry in entries.items()
            if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict)
        }

    def _save_cache(self) -> None:
        """Best effort: a cache that cannot be written only makes the next start slower."""
        if self.cache_file is None or self._cache is None:
            return
        with self._lock:
            entries = {cassette_id: [*stamp, summary] for cassette_id, (stamp, summary) in self._cache.items()}
        data = json.dumps({"format": SUMMARY_FORMAT, "root": str(self.root.resolve()), "entries": entries})
        with contextlib.suppress(OSError):
            write_atomic(self.cache_file, data.encode("utf-8"))


def detail(root: Path, cassette_id: str) -> dict:
    """One cassette in full: its conversation and its raw JSON; an unreadable file says why."""
    path = root / cassette_id
    try:
        raw = read_limited(path, root)  # the proxy's checks: nothing outside the folder, nothing unbounded
    except CassetteError as e:
        return {"id": cassette_id, "error": str(e)}
    except OSError as e:
        return {"id": cassette_id, "error": f"cannot read {cassette_id}: {e.strerror or e}"}
    raw_text = raw.decode("utf-8", errors="replace")
    try:
        cassette = parse(path, raw)
    except CassetteError as e:
        return {"id": cassette_id, "error": str(e), "raw": raw_text}
    request = cassette["request"]
    return {
        "id": cassette_id,
        "key": cassette.get("key", ""),
        "recorded_at": cassette.get("recorded_at", ""),
        "recorded_with": cassette.get("recorded_with") or {},
        "request_headers": request.get("headers") if isinstance(request.get("headers"), dict) else {},
        "response_headers": cassette["response"].get("headers") or {},
        "conversation": (conversation := conversation_in(cassette)).to_json(),
        "tag": kind_tag(cassette, conversation),
        "raw": raw_text,
    }
