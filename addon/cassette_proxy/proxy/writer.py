"""The one writer of recordings: HTTP cassettes (record.py) and WebSocket sessions (sessions.py) alike.

Every recording is made the same way here: one `recorded_with`, the run's
`keyed_with`, one redaction (`redact.as_stored`), one atomic write
(core/files/atomic_write.py), one error entry when the write fails. Every write
runs in a worker thread through `submit`, which counts it: a run's end waits
for all of them before its report is taken, whether the proxy stops (`wait_idle`
in the addon's `done`) or a warm proxy's run ends over the control channel
(`drained`, proxy/runs.py), so a recording finished just before the end is
counted in that run, never in the next.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mitmproxy import version as mitmproxy_version

from .. import __version__
from ..core.files.atomic_write import write_atomic, write_new
from ..core.files.cassette_file import dumps, large_json_as_text, new_cassette
from ..core.output import logger
from ..core.report import ErrorEntry, ErrorKind, Report
from ..core.secrets import redact

log = logger(__name__)

T = TypeVar("T")

RECORDED_WITH = {"cassette_proxy": __version__, "mitmproxy": mitmproxy_version.VERSION}
"""What every recording says it was made with."""

WAIT_SECONDS = 30
"""How long a run's end waits for the writes still in flight before it reports without them (and says so)."""


class Writer:
    """Builds, redacts and writes every recording in a worker thread, counting the writes in flight."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.redact_rules: tuple[redact.Rule, ...] = ()
        self.keyed_with: dict = {}
        """The key settings every cassette records it was keyed with (recipe.to_json())."""
        self.in_flight = 0
        self.idle = threading.Condition()
        """Notified as each write ends: `wait_idle` waits for `in_flight` to reach 0."""
        self._pending: set[asyncio.Future[Any]] = set()
        """The writes in flight as the event loop knows them, for `drained` (touched on the loop only)."""

    def configure(self, redact_rules: tuple[redact.Rule, ...], keyed_with: dict) -> None:
        """The run's options, as options.py parsed them."""
        self.redact_rules, self.keyed_with = redact_rules, keyed_with

    # -- what is written ---------------------------------------------------------------------------------------

    def cassette(self, key: str, request: dict, response: dict, keyed_with: dict | None = None) -> dict:
        """A new recording, before redaction: what it was made with and keyed with filled in (`keyed_with`: the
        key settings of a test whose own ignore paths keyed it; None: the run's)."""
        return new_cassette(
            key, request, response, RECORDED_WITH, self.keyed_with if keyed_with is None else keyed_with
        )

    def stored(self, cassette: dict, **extra: Any) -> bytes:
        """The bytes of `cassette` as it is written: redacted by the run's rules, then `extra` (fields redacted by
        their own owner, such as a session's frames) added."""
        stored = redact.as_stored(cassette, self.redact_rules)
        return dumps(large_json_as_text({**stored, **extra}))

    @staticmethod
    def write(path: Path, data: bytes, exclusive: bool = False) -> bool:
        """`data` at `path`, whole or not at all; with `exclusive` only if no file is there (False: another writer
        took the name)."""
        if exclusive:
            return write_new(path, data)
        write_atomic(path, data)
        return True

    def write_failed(self, path: Path, relative: str, error: OSError) -> str:
        """A recording that could not be written: in the log and the report, the same way for every kind."""
        message = f"cassette not saved to {path}: {error.strerror or error}"
        log.error(message)
        self.report.error(ErrorEntry(ErrorKind.WRITE_FAILED, message, cassette=relative))
        return message

    # -- in flight ---------------------------------------------------------------------------------------------

    def submit(self, job: Callable[[], T]) -> asyncio.Future[T]:
        """Run `job` (which writes and counts one recording) in a worker thread, counted until it ends.

        It counts itself, and a run's end waits for it, because a proxy stopped
        right after a client's last read (a test suite ending) cancels the
        hooks still awaiting: the report must still include the recording.
        Called on the event loop."""
        with self.idle:
            self.in_flight += 1
        future = asyncio.get_running_loop().run_in_executor(None, self._run, job)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    def _run(self, job: Callable[[], T]) -> T:
        try:
            return job()
        finally:
            with self.idle:
                self.in_flight -= 1
                self.idle.notify_all()

    def wait_idle(self, timeout: float = WAIT_SECONDS) -> bool:
        """Block until every write submitted so far has ended (the proxy's shutdown); False after `timeout`."""
        with self.idle:
            done = self.idle.wait_for(lambda: self.in_flight == 0, timeout=timeout)
        if not done:
            self._late()
        return done

    async def drained(self, timeout: float = WAIT_SECONDS) -> bool:
        """Wait, without holding up the event loop, until every write submitted so far has ended (a run's end on a
        proxy that goes on serving); False after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._pending:
            left = deadline - loop.time()
            if left <= 0:
                self._late()
                return False
            await asyncio.wait(set(self._pending), timeout=left)
        return True

    def _late(self) -> None:
        message = (
            f"{self.in_flight} recording(s) still being written after {WAIT_SECONDS} s: this run's report does not "
            "count them"
        )
        log.error(f"cassette: {message}")
        self.report.error(ErrorEntry(ErrorKind.WRITE_FAILED, message))
