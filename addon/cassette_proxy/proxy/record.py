"""Record: a forwarded request's response becomes a cassette, written by a worker thread.

Every write goes through the one `Writer` (writer.py), which WebSocket sessions
share: it counts the writes in flight that a run's end waits for; the run report
counts through its own thread-safe methods.
A response that is not saved (a status not worth keeping, a failed write, a
stream cut off) is an error entry in the report, so the next replay's miss
is explained before it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mitmproxy import http
from mitmproxy.net import encoding

from ..core.files.cassette_file import LARGE_JSON_BYTES, body_fields, events_fields, stored_headers, text_fields
from ..core.keys.key import RequestFacts
from ..core.output import logger
from ..core.record_statuses import is_client_error
from ..core.report import ErrorEntry, ErrorKind, Report
from ..core.secrets import redact
from ..core.sessions.mcp import SESSION_GONE_STATUS, McpRequest, id_key
from ..core.workers.request_worker import write_in_worker
from .stream_recorder import StreamRecorder
from .writer import Writer

log = logger(__name__)


CLIENT_LEFT = ("Client disconnected", "stream reset by client")
"""How mitmproxy's error starts when the client closed its connection (HTTP/1) or reset its stream (HTTP/2)."""


def client_left(flow: http.HTTPFlow) -> bool:
    """The flow ended because the client went away, not because the upstream failed."""
    return flow.error is not None and flow.error.msg.startswith(CLIENT_LEFT)


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
    writes the cassette from these facts (core/workers/request_worker.py), off the event loop and the GIL."""
    mcp: McpRequest | None = None
    """An MCP request (core/sessions/mcp.py): its SSE answer is complete at its JSON-RPC response, its GET stream when the
    client leaves it, and a 404 for its session id is never saved."""
    keyed_with: dict | None = None
    """The key settings its key was computed under when they are not the run's (a test's own ignore paths:
    `Recipe.with_ignore`), so the cassette says what keyed it; None: the run's."""
    keep_existing: bool = False
    """Sent upstream although its cassette may exist (what keeps an MCP session whole on the server in record mode:
    `mcp.McpRequest.keeps_session`): an existing cassette is kept, not rewritten."""


class Recorder:
    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        """The one writer (writer.py): redaction, `recorded_with`, the atomic write, the writes in flight."""
        self.report: Report = writer.report
        self.redact_specs: tuple[str, ...] = ()
        """The rules as cassette_redact gave them, for a worker process to parse alike."""
        self.statuses: frozenset[int] = frozenset()
        """cassette_record_statuses: the upstream statuses saved as cassettes."""

    def configure(self, redact_specs: tuple[str, ...], statuses: frozenset[int]) -> None:
        """The run's options, as options.py parsed them (the writer has the redaction rules and `keyed_with`)."""
        self.redact_specs = redact_specs
        self.statuses = statuses

    def not_recorded(self, target: RecordTarget, reason: str, message: str, status: int | None = None) -> None:
        """A forwarded request whose response will not be on disk: the next replay of it will miss."""
        url = redact.loggable_url(target.request["url"])
        entry = ErrorEntry(ErrorKind.NOT_RECORDED, message, target.relative, url, status=status, reason=reason)
        self.report.error(entry)
        log.warning(message)

    def save_whole(self, response: http.Response, target: RecordTarget) -> asyncio.Future[str | None] | None:
        content = response.get_content(strict=False) or b""
        if len(content) > LARGE_JSON_BYTES and not redact.needs_structure(self.writer.redact_rules):
            # Stored as its text, as received, built in the writer thread: parsing a 50 MB JSON answer here (and
            # encoding it again there) held the event loop for seconds (benchmarks/record_big.py). Redaction
            # applies to the text, credential fields included (redact._redacted_json_fields).
            return self.save(response, target, lambda: text_fields(content))
        return self.save(response, target, body_fields(content, response.headers.get("content-type", "")))

    def stream(self, response: http.Response, target: RecordTarget, kind: str) -> StreamRecorder:
        """The live recorder of a streamed answer to save: every chunk passes through, the timed events are kept."""
        started = response.timestamp_start or time.time()
        awaiting = {id_key(rpc_id) for rpc_id in target.mcp.ids} if target.mcp and target.mcp.ids else None
        return StreamRecorder(
            kind,
            started,
            awaiting=awaiting,
            on_complete=lambda rec, first: self.save_stream(response, target, rec, first),
        )

    def left_open(self, response: http.Response, target: RecordTarget, recorder: StreamRecorder) -> None:
        """The client left a stream that has no end of its own (MCP's GET stream, at session end): the complete
        events it received are the recording."""
        recorder.saved_events = len(recorder.events())
        self.save_stream(response, target, recorder, True)

    def cut_off(self, flow: http.HTTPFlow, target: RecordTarget) -> None:
        """A stream being recorded ended before it was complete: no cassette, and an error in the report."""
        reason = (
            f"cassette not saved: the stream from {redact.loggable_url(target.request['url'])} was cut off "
            f"before its end ({flow.error.msg if flow.error else 'no reason given'})"
        )
        self.report.error(ErrorEntry(ErrorKind.STREAM_INCOMPLETE, reason, cassette=target.relative))
        log.warning(reason)

    def save_stream(self, response: http.Response, target: RecordTarget, recorder: StreamRecorder, first: bool) -> None:
        """Called by the stream recorder, inside mitmproxy's stream handling, once the stream is complete."""
        content_encoding = response.headers.get("content-encoding", "identity").lower()
        body = None
        if content_encoding == "identity":
            with contextlib.suppress(UnicodeDecodeError):
                body = events_fields(recorder.events(), recorder.body_format)
        if body is None:
            # Compressed despite `accept-encoding: identity`, or not UTF-8: stored whole, without timing.
            try:
                decoded = encoding.decode(recorder.body, content_encoding)
            except ValueError:
                decoded = recorder.body
            data = decoded if isinstance(decoded, bytes) else recorder.body  # bytes in, bytes out
            body = body_fields(data, response.headers.get("content-type", ""))
        self.save(response, target, body, count=first)

    def save(
        self, response: http.Response, target: RecordTarget, body: dict | Callable[[], dict], count: bool = True
    ) -> asyncio.Future[str | None] | None:
        """Hand the cassette to a worker thread at once; the future says why the write failed, if it did.
        `body`: the stored body's fields, or what makes them (in the thread)."""
        status = response.status_code
        if target.keep_existing and target.path.exists():
            self.report.used_by(target.test, target.relative)
            log.info(
                f"cassette kept: {target.request['method']} {redact.loggable_url(target.request['url'])} "
                f"({target.relative}) was sent live to open a session, and its recording stays as it was"
            )
            return None
        if status == SESSION_GONE_STATUS and target.mcp is not None and target.mcp.session is not None:
            if count:
                self.not_recorded(
                    target,
                    "mcp session not found",
                    f"cassette not saved: the MCP server answered 404 for {target.request['method']} "
                    f"{redact.loggable_url(target.request['url'])}: it does not know the request's Mcp-Session-Id "
                    "(it ended or restarted the session). That answer is about this run's session, never a "
                    "recording: the next replay of this request will miss; record the conversation again",
                    status,
                )
            return None
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
        head = {"status": status, "headers": stored_headers(list(response.headers.items(multi=True)))}

        def build() -> dict:
            fields = body() if callable(body) else body
            return self.writer.cassette(target.key, target.request, {**head, **fields}, target.keyed_with)

        return self.writer.submit(lambda: self._write(target, build, count))

    def _write(self, target: RecordTarget, build: Callable[[], dict], count: bool) -> str | None:
        """Write (and count, unless it rewrites a cassette this run already counted) one cassette, in a worker
        thread (the writer's, which a run's end waits for)."""
        try:
            cassette = build()
            if target.big_request is not None:
                write_in_worker(cassette, target.big_request, self.redact_specs, target.path)
            else:
                self.writer.write(target.path, self.writer.stored(cassette))
        except OSError as e:
            return self.writer.write_failed(target.path, target.relative, e)
        client_error = is_client_error(cassette["response"]["status"])
        self.report.recorded_cassette(target.test, target.relative, target.existed, client_error, count)
        url = redact.loggable_url(target.request["url"])
        log.info(f"cassette recorded: {target.request['method']} {url} ({target.relative})")
        return None
