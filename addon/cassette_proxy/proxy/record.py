"""Record: a forwarded request's response becomes a cassette, written by a worker thread.

Every write goes through one `Recorder`: one lock for the report it shares
with the event loop, one count of writes in flight that shutdown waits for.
A response that is not saved (a status not worth keeping, a failed write, a
stream cut off) is an error entry in the report, so the next replay's miss
is explained before it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mitmproxy import http
from mitmproxy import version as mitmproxy_version
from mitmproxy.net import encoding

from .. import __version__
from ..core import redact
from ..core.atomic_write import write_atomic
from ..core.cassette_file import (
    LARGE_JSON_BYTES,
    body_fields,
    dumps,
    events_fields,
    large_json_as_text,
    new_cassette,
    stored_headers,
    text_fields,
)
from ..core.key import RequestFacts
from ..core.printable import logger
from ..core.record_statuses import is_client_error
from ..core.report import Report
from ..core.request_worker import write_in_worker
from .stream_recorder import StreamRecorder

log = logger(__name__)


@dataclass
class RecordTarget:
    """A request sent upstream whose response may become a cassette."""

    key: str
    path: Path
    relative: str
    request: dict
    existed: bool
    test: str | None = None
    """The test that sent the request (None: outside any test), for the report."""
    statuses: frozenset[int] | None = None
    """The statuses saved for this request (a test's `record_statuses`); None: the run's."""
    big_request: RequestFacts | None = None
    """A request body above BIG_REQUEST_BYTES: `request` lacks its body, and a worker process builds, redacts and
    writes the cassette from these facts (core/request_worker.py), off the event loop and the GIL."""


class Recorder:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.lock = threading.Condition()
        """Guards the report (worker threads and the event loop both count into it) and `in_flight`."""
        self.in_flight = 0
        self.redact_rules: tuple[redact.Rule, ...] = ()
        self.redact_specs: list[str] = []
        """The rules as cassette_redact gave them, for a worker process to parse alike."""
        self.statuses: frozenset[int] = frozenset()
        """cassette_record_statuses: the upstream statuses saved as cassettes."""
        self.keyed_with: dict = {}
        """The key settings every cassette records it was keyed with (recipe.to_json())."""

    def count(self, **changes: int) -> None:
        with self.lock:
            for name, n in changes.items():
                setattr(self.report, name, getattr(self.report, name) + n)

    def add_error(self, entry: dict) -> None:
        with self.lock:
            self.report.errors.append(entry)

    def not_recorded(self, target: RecordTarget, reason: str, message: str, status: int | None = None) -> None:
        """A forwarded request whose response will not be on disk: the next replay of it will miss."""
        url = redact.loggable_url(target.request["url"])
        entry = {"type": "not_recorded", "reason": reason, "cassette": target.relative, "url": url}
        if status is not None:
            entry["status"] = status
        self.add_error({**entry, "message": message})
        log.warning(message)

    def save_whole(self, flow: http.HTTPFlow, target: RecordTarget) -> asyncio.Future | None:
        content = flow.response.get_content(strict=False) or b""
        if len(content) > LARGE_JSON_BYTES and not redact.needs_structure(self.redact_rules):
            # Stored as its text, as received, built in the writer thread: parsing a 50 MB JSON answer here (and
            # encoding it again there) held the event loop for seconds (benchmarks/record_big.py). Redaction
            # applies to the text, credential fields included (redact._redacted_json_fields).
            return self.save(flow, target, lambda: text_fields(content))
        return self.save(flow, target, body_fields(content, flow.response.headers.get("content-type", "")))

    def save_stream(self, flow: http.HTTPFlow, target: RecordTarget, recorder: StreamRecorder, first: bool) -> None:
        """Called by the stream recorder, inside mitmproxy's stream handling, once the stream is complete."""
        content_encoding = flow.response.headers.get("content-encoding", "identity").lower()
        body = None
        if content_encoding == "identity":
            with contextlib.suppress(UnicodeDecodeError):
                body = events_fields(recorder.events(), recorder.body_format)
        if body is None:
            # Compressed despite `accept-encoding: identity`, or not UTF-8: stored whole, without timing.
            try:
                data = encoding.decode(recorder.body, content_encoding)
            except ValueError:
                data = recorder.body
            body = body_fields(data, flow.response.headers.get("content-type", ""))
        self.save(flow, target, body, count=first)

    def save(
        self, flow: http.HTTPFlow, target: RecordTarget, body: dict | Callable[[], dict], count: bool = True
    ) -> asyncio.Future | None:
        """Hand the cassette to a worker thread at once; the future says why the write failed, if it did.
        `body`: the stored body's fields, or what makes them (in the thread)."""
        status = flow.response.status_code
        if status not in (self.statuses if target.statuses is None else target.statuses):
            if count:
                self.not_recorded(
                    target,
                    f"status {status}",
                    f"cassette not saved: upstream answered {status} for {target.request['method']} "
                    f"{redact.loggable_url(target.request['url'])} (not in cassette_record_statuses); "
                    "the next replay of this request will miss",
                    status,
                )
            return None
        head = {"status": status, "headers": stored_headers(list(flow.response.headers.items(multi=True)))}
        recorded_with = {"cassette_proxy": __version__, "mitmproxy": mitmproxy_version.VERSION}

        def build() -> dict:
            fields = body() if callable(body) else body
            return new_cassette(target.key, target.request, {**head, **fields}, recorded_with, self.keyed_with)

        with self.lock:
            self.in_flight += 1
        return asyncio.get_running_loop().run_in_executor(None, self._write, target, build, count)

    def _write(self, target: RecordTarget, build: Callable[[], dict], count: bool) -> str | None:
        """Write (and count, unless it rewrites a cassette this run already counted) one cassette, in a worker thread.

        It counts itself, and `wait_idle()` waits for it, because a proxy stopped
        right after a client's last read (a test suite ending) cancels the
        hooks still awaiting: the report must still include the cassette.
        """
        try:
            cassette = build()
            if target.big_request is not None:
                write_in_worker(cassette, target.big_request, self.redact_specs, target.path)
            else:
                write_atomic(target.path, dumps(large_json_as_text(redact.as_stored(cassette, self.redact_rules))))
        except OSError as e:
            reason = f"cassette not saved to {target.path}: {e.strerror or e}"
            log.error(reason)
            with self.lock:
                self.report.errors.append(
                    {"type": "cassette_write_failed", "cassette": target.relative, "message": reason}
                )
            return reason
        else:
            with self.lock:
                if count and target.existed:
                    self.report.overwritten += 1
                elif count:
                    self.report.recorded += 1
                if count and is_client_error(cassette["response"]["status"]):
                    self.report.client_errors["recorded"] += 1
                self.report.used_by(target.test, target.relative, "recorded" if count else None)
            url = redact.loggable_url(target.request["url"])
            log.info(f"cassette recorded: {target.request['method']} {url} ({target.relative})")
            return None
        finally:
            with self.lock:
                self.in_flight -= 1
                self.lock.notify_all()

    def wait_idle(self, timeout: float = 30) -> None:
        with self.lock:
            self.lock.wait_for(lambda: self.in_flight == 0, timeout=timeout)
