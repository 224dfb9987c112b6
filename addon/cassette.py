"""The mitmproxy addon: `mitmdump -s addon/cassette.py`.

Options and hooks only; what a key is, what a file holds and what a miss says
live in their own modules.
"""

import asyncio
import contextlib
import fnmatch
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

if __name__ != "cassette_proxy.cassette" and "cassette_proxy" not in sys.modules:
    # Loaded by path (`mitmdump -s addon/cassette.py`): import the sibling
    # modules as the `cassette_proxy` package, so the script always runs with
    # the code beside it, installed or not.
    _spec = importlib.util.spec_from_file_location(
        "cassette_proxy",
        Path(__file__).with_name("__init__.py"),
        submodule_search_locations=[str(Path(__file__).parent)],
    )
    sys.modules["cassette_proxy"] = _package = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_package)

from cassette_proxy import __version__, redact, store
from cassette_proxy import miss as misses
from cassette_proxy import recipe as recipes
from cassette_proxy.key import KeyCache, RequestFacts
from cassette_proxy.modes import MODES
from cassette_proxy.record_statuses import DEFAULT_RECORD_STATUSES, is_client_error, parse_record_statuses
from cassette_proxy.report import Report
from cassette_proxy.scope import DEFAULT_HOSTS
from cassette_proxy.streaming import StreamRecorder, TimedReplayServer, TimedStream, parse_replay_timing, stream_kind
from cassette_proxy.upstream import UpstreamGuard
from mitmproxy import ctx, exceptions, http
from mitmproxy import version as mitmproxy_version
from mitmproxy.net import encoding
from mitmproxy.net.http import status_codes

log = logging.getLogger("cassette")

REPEATS = ("reuse", "sequence")


def header_values(fields: Sequence[tuple[bytes, bytes]], names: Collection[bytes]) -> dict[str, str]:
    """The request's values of the named headers (lower-case bytes), repeated ones folded with ", " as
    `Headers[name]` folds them.

    One pass over the raw fields, decoding only the wanted ones: each `Headers` lookup scans every
    field, and copying them all (`dict(flow.request.headers)`) was the largest cost of a hit (see benchmarks/).
    """
    found: dict[str, list[str]] = {}
    for raw_name, raw_value in fields:
        name = raw_name.lower()
        if name in names:
            found.setdefault(name.decode("utf-8", "surrogateescape"), []).append(
                raw_value.decode("utf-8", "surrogateescape")
            )
    return {name: ", ".join(values) for name, values in found.items()}


@dataclass
class Pending:
    """A request sent upstream whose response may become a cassette."""

    key: str
    path: Path
    relative: str
    request: dict
    existed: bool


class Cassette:
    def __init__(self) -> None:
        self.report = Report()
        self.replays = store.ReplayCache()
        self.sequence: dict[str, int] = {}
        """cassette_repeats=sequence: how many times this run has seen each key."""
        self.timed_replay = TimedReplayServer()
        self.writing = threading.Condition()
        self.writes_in_flight = 0
        self.upstream = UpstreamGuard(self.report)
        """Called from this addon's hooks rather than registered as a child addon: mitmproxy walks every
        child on every event of every flow, a cost each hit paid for nothing."""

    def load(self, loader) -> None:
        loader.add_option(
            "cassette_mode",
            str,
            os.environ.get("CASSETTE_MODE", "replay"),
            "replay: answer from disk only, a miss answers 409; record: replay what exists, forward and save "
            "what is missing; update: forward everything in scope and overwrite; off: plain passthrough. "
            "Defaults to $CASSETTE_MODE, else replay.",
        )
        loader.add_option(
            "cassette_dir",
            str,
            os.environ.get("CASSETTE_DIR", "cassettes"),
            "Folder holding the cassettes (one JSON file per interaction). Defaults to $CASSETTE_DIR, else ./cassettes.",
        )
        loader.add_option(
            "cassette_hosts",
            Sequence[str],
            list(DEFAULT_HOSTS),
            "Hosts under cassette control, as globs (`*` for all); traffic to other hosts passes through untouched.",
        )
        loader.add_option(
            "cassette_ignore",
            Sequence[str],
            [],
            "JSON body fields left out of the key, as dotted paths: a number for one list item, `*` for every "
            "item or field (e.g. metadata.trace_id, messages.*.id, messages.0.name). Empty: every field counts.",
        )
        loader.add_option(
            "cassette_key_headers",
            Sequence[str],
            list(recipes.DEFAULT_KEY_HEADERS),
            "Request headers that are part of the key because they change what the API does.",
        )
        loader.add_option(
            "cassette_ignore_values",
            Sequence[str],
            [],
            "Volatile values by shape: regular expressions (or presets: pydantic-ai) whose matches inside any JSON "
            "string value are keyed as numbered placeholders (pyd_ai_…#1), e.g. client-made tool-call ids.",
        )
        loader.add_option(
            "cassette_record_statuses",
            Sequence[str],
            list(DEFAULT_RECORD_STATUSES),
            "Upstream statuses saved as cassettes (numbers, or classes such as 2xx); others pass through unsaved. "
            "The default keeps deterministic client errors, never 401/403/408/409/429/5xx.",
        )
        loader.add_option(
            "cassette_upstream_timeout",
            int,
            120,
            "Seconds a recorded request may wait for the upstream's response headers (and for its connection); "
            "then the client gets 504 cassette_upstream_error and nothing is saved.",
        )
        loader.add_option(
            "cassette_report",
            str | None,
            None,
            "Write a JSON run report (hits, misses, recorded, upstream, passthrough, errors) to this path on shutdown.",
        )
        loader.add_option(
            "cassette_ready_file",
            str | None,
            None,
            'Once the proxy listens, write {"pid": ..., "listen": [...]} to this path atomically; '
            "how a launcher learns the port of `-p 0`.",
        )
        loader.add_option(
            "cassette_redact",
            Sequence[str],
            [],
            "Redaction rules applied to what a cassette stores (never to the key or to what the client gets), on top "
            "of the built-in secret rules: a rule name (email, phone, card, pii) or /[target/]regex/replacement, "
            "e.g. /request.body.messages.*.content/acct_[0-9]+/[REDACTED:account].",
        )
        loader.add_option(
            "cassette_repeats",
            str,
            "reuse",
            "reuse: identical requests always get the same recorded response; sequence: the n-th identical request "
            "of a run records and replays the n-th response (<key>.json, <key>.2.json, ...), repeating the last one "
            "past the end.",
        )
        loader.add_option(
            "cassette_replay_timing",
            str,
            os.environ.get("CASSETTE_REPLAY_TIMING", "none"),
            "How a replayed stream (SSE, NDJSON) is paced: none sends all its events at once; recorded waits the "
            "recorded time before each event; a number is a speed factor (2 = twice as fast, 0.5 = half as fast). "
            "Defaults to $CASSETTE_REPLAY_TIMING, else none.",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        if "cassette_mode" in updated:
            if opts.cassette_mode not in MODES:
                raise exceptions.OptionsError(
                    f"cassette_mode: {opts.cassette_mode!r} is not a mode; use one of {', '.join(MODES)}"
                )
            self.report.mode = self.mode = opts.cassette_mode
        if "cassette_redact" in updated:
            try:
                self.redact_rules = redact.parse_rules(opts.cassette_redact)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_redact: {e}") from None
        if "cassette_repeats" in updated:
            if opts.cassette_repeats not in REPEATS:
                raise exceptions.OptionsError(
                    f"cassette_repeats: {opts.cassette_repeats!r} is not a choice; use one of {', '.join(REPEATS)}"
                )
            self.repeats = opts.cassette_repeats
        if updated & {"cassette_ignore", "cassette_key_headers", "cassette_ignore_values"}:
            try:
                self.recipe = recipes.make_recipe(
                    opts.cassette_ignore, opts.cassette_key_headers, opts.cassette_ignore_values
                )
            except recipes.RecipeError as e:
                raise exceptions.OptionsError(str(e)) from None
            self.key_headers, self.ignore = self.recipe.key_headers, self.recipe.paths
            self.read_headers = frozenset(h.encode() for h in [*self.key_headers, "content-type", "content-encoding"])
            self.keys = KeyCache(self.key_headers, self.ignore, self.recipe.patterns)
        if "cassette_record_statuses" in updated:
            try:
                self.record_statuses = parse_record_statuses(opts.cassette_record_statuses)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_record_statuses: {e}") from None
        if "cassette_hosts" in updated:
            if not opts.cassette_hosts or any(not h.strip() for h in opts.cassette_hosts):
                raise exceptions.OptionsError(
                    f"cassette_hosts: {list(opts.cassette_hosts)!r} must list host globs (`*` for every host)"
                )
            # One regular expression for every glob: the scope is checked on every request.
            self.hosts = re.compile("|".join(fnmatch.translate(h.strip().lower()) for h in opts.cassette_hosts))
        if "cassette_upstream_timeout" in updated and not opts.cassette_upstream_timeout > 0:
            raise exceptions.OptionsError(
                f"cassette_upstream_timeout: {opts.cassette_upstream_timeout!r} must be a whole number of seconds above 0"
            )
        if "cassette_dir" in updated:
            self.root = Path(opts.cassette_dir).expanduser().resolve()
            self.root_prefix = f"{self.root}{os.sep}"
            if self.root.exists() and not self.root.is_dir():
                raise exceptions.OptionsError(f"cassette_dir: {opts.cassette_dir!r} exists and is not a folder")
        for name in ("cassette_report", "cassette_ready_file"):
            value = getattr(opts, name)
            if name in updated and value and not Path(value).expanduser().resolve().parent.is_dir():
                raise exceptions.OptionsError(f"{name}: the folder of {value!r} does not exist")
        if "cassette_replay_timing" in updated:
            try:
                self.replay_speed = parse_replay_timing(opts.cassette_replay_timing)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_replay_timing: {e}") from None
        if opts.connection_strategy != "lazy":
            # With `eager`, mitmproxy connects upstream before any hook runs: an
            # offline replay would fail before the addon could answer.
            opts.connection_strategy = "lazy"

    def running(self) -> None:
        for stale in store.remove_stale_temp_files(self.root):
            log.warning(f"removed {stale}: a partial cassette left by a proxy that was killed while writing")
        if not ctx.options.cassette_ready_file:
            return
        listen = []
        for server in ctx.master.addons.get("proxyserver").servers:
            mode = f"{server.mode.type_name}:{server.mode.data}" if server.mode.data else server.mode.type_name
            for host, port, *_ in server.listen_addrs:
                entry = {"mode": mode, "host": host, "port": port}
                if entry not in listen:  # reverse https listens on TCP and UDP alike
                    listen.append(entry)
        ready = {"pid": os.getpid(), "mode": ctx.options.cassette_mode, "listen": listen}
        store.write_atomic(Path(ctx.options.cassette_ready_file), json.dumps(ready).encode())

    def done(self) -> None:
        with self.writing:
            self.writing.wait_for(lambda: self.writes_in_flight == 0, timeout=30)
        if ctx.options.cassette_report:
            self.report.write(Path(ctx.options.cassette_report))

    def in_scope(self, host: str) -> bool:
        return self.hosts.match(host.lower()) is not None

    async def request(self, flow: http.HTTPFlow) -> None:
        if flow.response or flow.error or not flow.live:
            return
        mode = self.mode  # options are read in configure(): ctx.options costs microseconds on every request
        if mode == "off" or not self.in_scope(flow.request.host):
            self.report.passthrough += 1
            return
        req = flow.request
        headers = header_values(req.headers.fields, self.read_headers)
        body = req.get_content(strict=False) if "content-encoding" in headers else req.raw_content
        facts = RequestFacts(
            method=req.method,
            scheme=req.scheme,
            host=req.host,
            port=req.port,
            path=urlsplit(req.path).path or "/",
            query=list(req.query.items(multi=True)) if "?" in req.path else [],  # parsing rebuilds the whole URL
            headers=headers,
            body=body or b"",
            content_type=headers.get("content-type", ""),
        )
        key = self.keys.key(facts)
        relative = store.relative_name(facts.scheme, facts.host, facts.port, facts.path, key)
        if self.repeats == "sequence":
            relative = self._next_in_sequence(key, relative, mode)
        path = self.root_prefix + relative
        if mode != "update":
            try:
                replay = self.replays.load(path)
            except FileNotFoundError:
                replay = None
            except (OSError, store.CassetteError) as e:
                self._answer_unusable_cassette(flow, path, e)
                return
            if replay is not None:
                await self._replay(flow, replay, relative)
                return
        if mode == "replay":
            await self._answer_miss(flow, key, Path(path), relative, facts)
            return
        flow.metadata["cassette"] = Pending(
            key=key,
            path=Path(path),
            relative=relative,
            request=recipes.stored_request(facts, self.key_headers),
            existed=os.path.exists(path),
        )
        # The stream is kept as it passes through, so it must be plain text; the key ignores this header.
        req.headers["accept-encoding"] = "identity"
        self.report.upstream += 1
        self.upstream.forward(flow)

    def _next_in_sequence(self, key: str, first: str, mode: str) -> str:
        """The n-th identical request uses the n-th recording; past the last one, replay keeps answering with it."""
        n = self.sequence.get(key, 0) + 1
        if mode == "replay" and n > 1 and not os.path.exists(self.root_prefix + store.repeat_path(first, n)):
            n -= 1
        self.sequence[key] = n
        return store.repeat_path(first, n)

    async def _replay(self, flow: http.HTTPFlow, replay: store.Replay, relative: str) -> None:
        recorded = replay.cassette["response"]
        if recorded.get("body_format") == "events" and self.replay_speed is not None:
            await self._route_to_timed_replay(flow, recorded)
        else:
            # The constructor, not `Response.make`: the headers come ready, content-length included,
            # which saves `make` converting them and looking them up again on every hit.
            status = recorded["status"]
            now = time.time()
            reason = status_codes.RESPONSES.get(status, "").encode()
            flow.response = http.Response(
                b"HTTP/1.1", status, reason, replay.header_fields, replay.body, None, now, now
            )
        flow.metadata["cassette_outcome"] = "hit"
        self.report.hits += 1
        if is_client_error(recorded["status"]):
            self.report.client_errors["hits"] += 1
        self.report.cassettes_used.add(relative)

    async def _route_to_timed_replay(self, flow: http.HTTPFlow, recorded: dict) -> None:
        """Send the flow to the in-proxy server that plays the events at their offsets.

        A response made here would reach the client in one piece; only a
        response from a server can be streamed over time (see streaming.py).
        """
        await self.timed_replay.start()
        stream = TimedStream(recorded["status"], recorded.get("headers", {}), recorded["body"], self.replay_speed)
        req = flow.request
        req.scheme, req.host, req.port = "http", "127.0.0.1", self.timed_replay.port
        req.path = self.timed_replay.register(stream)
        flow.metadata["cassette_timed_replay"] = True

    async def _answer_miss(self, flow: http.HTTPFlow, key: str, path: Path, relative: str, facts: RequestFacts) -> None:
        request = recipes.stored_request(facts, self.key_headers)
        # Redacted like the recordings it is compared with: the diff shows real changes, and no secret.
        request["body"] = redact.redacted(request["body"], ("request", "body"), self.redact_rules)
        # Reading up to MAX_CANDIDATES files: off the event loop, which serves every other client.
        nearest = await asyncio.to_thread(misses.closest, path.parent, self.root, request, self.recipe)
        method, url = request["method"], request["url"]
        error = misses.miss_body(key, method, url, relative, ctx.options.cassette_mode, nearest)
        flow.response = http.Response.make(409, json.dumps(error, ensure_ascii=False, indent=2), misses.ERROR_HEADERS)
        flow.metadata["cassette_outcome"] = "miss"
        self.report.misses.append({"key": key, "method": method, "url": url, "cassette": relative})
        log.warning(f"cassette miss: {method} {url} key={key} (would be {relative})")

    def _answer_unusable_cassette(self, flow: http.HTTPFlow, path: str, error: Exception) -> None:
        """A broken file must not look like a miss: a re-record would paper over it."""
        message = f"cassette unusable: {error}. Fix or delete the file, then run again."
        body = misses.error_body("cassette_invalid", message, cassette=path)
        flow.response = http.Response.make(500, json.dumps(body, ensure_ascii=False), misses.ERROR_HEADERS)
        flow.metadata["cassette_outcome"] = "error"
        self.report.errors.append({"type": "cassette_invalid", "cassette": path, "message": str(error)})
        log.error(message)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Never buffer SSE or NDJSON (recorded, timed replay, passthrough); while recording, keep a timed copy."""
        self.upstream.responseheaders(flow)
        if "cassette_outcome" in flow.metadata and "cassette_timed_replay" not in flow.metadata:
            return  # answered here, whole
        if flow.response is None or callable(flow.response.stream):
            return  # another addon already transforms this stream
        kind = stream_kind(flow.response.headers.get("content-type", ""))
        if not kind:
            return
        pending = flow.metadata.get("cassette")
        if isinstance(pending, Pending):
            started = flow.response.timestamp_start or time.time()
            recorder = StreamRecorder(
                kind, started, on_complete=lambda rec, first: self._save_stream(flow, pending, rec, first)
            )
            flow.response.stream = flow.metadata["cassette_stream"] = recorder
        else:
            flow.response.stream = True

    async def response(self, flow: http.HTTPFlow) -> None:
        pending = flow.metadata.get("cassette")
        if not isinstance(pending, Pending) or flow.response is None or "cassette_stream" in flow.metadata:
            return  # a stream is saved by its recorder
        body = store.body_fields(
            flow.response.get_content(strict=False) or b"", flow.response.headers.get("content-type", "")
        )
        writing = self._save(flow, pending, body)
        if writing and (failure := await writing):
            flow.response.headers["x-cassette-error"] = failure

    def error(self, flow: http.HTTPFlow) -> None:
        """A recorded stream cut off before it was complete: no cassette, and an error in the report."""
        pending = flow.metadata.get("cassette")
        recorder = flow.metadata.get("cassette_stream")
        self.upstream.error(flow)
        if not isinstance(pending, Pending) or recorder is None or recorder.saved_events is not None:
            return
        reason = (
            f"cassette not saved: the stream from {pending.request['url']} was cut off before its end "
            f"({flow.error.msg if flow.error else 'no reason given'})"
        )
        self.report.errors.append({"type": "stream_incomplete", "cassette": pending.relative, "message": reason})
        log.warning(reason)

    def _save_stream(self, flow: http.HTTPFlow, pending: Pending, recorder: StreamRecorder, first: bool) -> None:
        """Called by the recorder, inside mitmproxy's stream handling, once the stream is complete."""
        content_encoding = flow.response.headers.get("content-encoding", "identity").lower()
        body = None
        if content_encoding == "identity":
            with contextlib.suppress(UnicodeDecodeError):
                body = store.events_fields(recorder.events())
        if body is None:
            # Compressed despite `accept-encoding: identity`, or not UTF-8: stored whole, without timing.
            try:
                data = encoding.decode(recorder.body, content_encoding)
            except ValueError:
                data = recorder.body
            body = store.body_fields(data, flow.response.headers.get("content-type", ""))
        self._save(flow, pending, body, count=first)

    def _save(self, flow: http.HTTPFlow, pending: Pending, body: dict, count: bool = True) -> asyncio.Future | None:
        """Hand the cassette to a worker thread at once; the future says why the write failed, if it did."""
        status = flow.response.status_code
        if status not in self.record_statuses:
            log.warning(
                f"cassette not saved: upstream answered {status} for {pending.request['url']} "
                "(not in cassette_record_statuses)"
            )
            return None
        response = {
            "status": status,
            "headers": store.stored_headers(list(flow.response.headers.items(multi=True))),
            **body,
        }
        cassette = store.new_cassette(
            pending.key,
            pending.request,
            response,
            {"cassette_proxy": __version__, "mitmproxy": mitmproxy_version.VERSION},
            self.recipe.to_json(),
        )
        with self.writing:
            self.writes_in_flight += 1
        return asyncio.get_running_loop().run_in_executor(None, self._write, pending, cassette, count)

    def _write(self, pending: Pending, cassette: dict, count: bool) -> str | None:
        """Write (and count, unless it rewrites a cassette this run already counted) one cassette, in a worker thread.

        It counts itself, and `done()` waits for it, because a proxy stopped
        right after a client's last read (a test suite ending) cancels the
        hooks still awaiting: the report must still include the cassette.
        """
        stored = redact.redact(cassette, self.redact_rules)
        if stored["request"] != cassette["request"]:
            # The stored request no longer gives its key: `cassette rekey` must know not to trust it.
            stored["keyed_with"] = {**stored["keyed_with"], "request_redacted": True}
        try:
            store.write_atomic(pending.path, store.dumps(stored))
        except OSError as e:
            reason = f"cassette not saved to {pending.path}: {e.strerror or e}"
            log.error(reason)
            with self.writing:  # worker threads share the report: count under the lock
                self.report.errors.append(
                    {"type": "cassette_write_failed", "cassette": pending.relative, "message": reason}
                )
            return reason
        else:
            with self.writing:
                if count and pending.existed:
                    self.report.overwritten += 1
                elif count:
                    self.report.recorded += 1
                if count and is_client_error(cassette["response"]["status"]):
                    self.report.client_errors["recorded"] += 1
                self.report.cassettes_used.add(pending.relative)
            log.info(f"cassette recorded: {pending.request['method']} {pending.request['url']} ({pending.relative})")
            return None
        finally:
            with self.writing:
                self.writes_in_flight -= 1
                self.writing.notify_all()


addons = [Cassette()]
