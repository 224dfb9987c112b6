"""The mitmproxy addon: options and hooks, and nothing else.

Each hook decides what happens to a request and delegates the doing: the key
to core/key.py (facts from the flow: facts.py), lookups and answers to
replay.py, saving to record.py, misses to miss.py, forwarded requests'
failures to upstream.py, repeated requests to sequence.py, the current test and
its rules to control_channel.py. Per-request state is one `FlowState` (state.py).

Every hook fails closed: an exception of ours answers a JSON 500
`cassette_error` (counted, logged with its traceback), never a forwarded
request. The independent seal (seal.py) refuses upstream connections in
replay mode even if this addon forgot a request.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from mitmproxy import ctx, exceptions, http

from ..core import miss, redact
from ..core.atomic_write import remove_stale_temp_files, write_atomic
from ..core.cassette_file import DEFAULT_MAX_SIZE, CassetteError
from ..core.defaults import (
    DEFAULT_DIR,
    DEFAULT_HOSTS,
    DEFAULT_KEY_HEADERS,
    DEFAULT_MODE,
    DEFAULT_REPEATS,
    DIR_VAR,
    MODE_VAR,
    MODES,
    REPEATS,
    REPLAY_TIMING_VAR,
)
from ..core.frameworks import DEFAULT_FRAMEWORKS, PRESETS
from ..core.hints import DEFAULT_STARTER, STARTERS
from ..core.hosts import HostScope, is_loopback
from ..core.key import KEY_CACHE_SIZE, UNKEYABLE_HEADERS, KeyCache, RequestFacts, normal_host, public_url
from ..core.location import MAX_NAME, relative_name, short_name
from ..core.miss import ClosestSearch
from ..core.per_test import DEFAULT_SCOPE, SCOPES, scoped_name
from ..core.printable import logger
from ..core.recipe import RecipeError, make_recipe, stored_request
from ..core.record_statuses import DEFAULT_RECORD_STATUSES, is_client_error, parse_record_statuses
from ..core.report import Report
from ..core.request_worker import BIG_REQUEST_BYTES, closest_in_worker, key_in_worker
from ..core.session_match import DEFAULT_SESSION_IGNORE
from ..core.stream_events import stream_kind
from ..core.token_exchange import parse_endpoints, placeholder
from .control_channel import CONTROL_HOST, TOKEN_VAR, RequestRules, TestControl
from .errors import error_response, json_response
from .facts import request_facts
from .listen_backlog import raise_backlog
from .record import Recorder, RecordTarget
from .replay import DEFAULT_PRELOAD, REPLAY_CACHE_SIZE, Replayer
from .routes import FORWARD, RouteTable, parse_route_names
from .runs import Runs
from .seal import Seal
from .sequence import Sequencer
from .sessions import Sessions, SessionTarget, is_upgrade
from .state import FlowState, new_state, state_of
from .stream_recorder import StreamRecorder
from .telemetry import Telemetry
from .timed_replay import parse_replay_timing
from .upstream import UpstreamGuard

log = logger(__name__)

RULE_OPTIONS = frozenset(
    {"cassette_mode", "cassette_repeats", "cassette_scope", "cassette_ignore", "cassette_key_headers"}
    | {"cassette_ignore_values", "cassette_frameworks", "cassette_record_statuses", "cassette_control_token"}
)
"""The options behind `RequestRules`: what a request follows outside a test, and under a test's own options."""


class Cassette:
    def __init__(self) -> None:
        self.report = Report()
        self.recorder = Recorder(self.report)
        self.lock = self.recorder.lock
        """Every change to the report takes it: worker threads write cassettes and count them too."""
        self.replayer = Replayer()
        self.preloading: asyncio.Task | None = None
        self.sequencer = Sequencer()
        self.control = TestControl()
        self.control.on_start = self.sequencer.start
        self.runs = Runs(self.report, self.recorder, self.sequencer, self.control)
        """Runs reusing this proxy (a warm `cassette serve`): each its own report and counters."""
        self.closest = ClosestSearch()
        self.seal = Seal()
        self.routes = RouteTable()
        """The reverse listeners, known once the servers run (running())."""
        self.telemetry = Telemetry(self.report, self.lock)
        self.upstream = UpstreamGuard(self.report, self.lock)
        """Called from this addon's hooks rather than registered as a child addon: mitmproxy walks every
        child on every event of every flow, a cost each hit paid for nothing."""
        self.sessions = Sessions(self.report, self.lock)
        """WebSocket sessions, recorded and replayed (sessions.py); driven from the hooks like the guard."""

    def load(self, loader) -> None:
        loader.add_option(
            "cassette_mode",
            str,
            os.environ.get(MODE_VAR) or DEFAULT_MODE,
            "replay: answer from disk only, a miss answers 409; record: replay what exists, forward and save "
            "what is missing; update: forward everything in scope and overwrite; off: plain passthrough. "
            f"Defaults to ${MODE_VAR}, else {DEFAULT_MODE}.",
            choices=MODES,
        )
        loader.add_option(
            "cassette_dir",
            str,
            os.environ.get(DIR_VAR) or DEFAULT_DIR,
            f"Folder holding the cassettes (one JSON file per interaction). Defaults to ${DIR_VAR}, else ./{DEFAULT_DIR}.",
        )
        loader.add_option(
            "cassette_hosts",
            Sequence[str],
            list(DEFAULT_HOSTS),
            "Hosts under cassette control, as globs (`*` for all), or HOST/PATH for some paths of a host "
            "(chatgpt.com/backend-api/codex/*); traffic to others passes through untouched (in replay mode only to "
            "loopback hosts and those in cassette_allow_hosts).",
        )
        loader.add_option(
            "cassette_allow_hosts",
            Sequence[str],
            [],
            "Hosts outside cassette_hosts that a replay run may still reach (globs), e.g. an image CDN the suite "
            "downloads from; any other non-loopback host answers 403 cassette_offline in replay mode.",
        )
        loader.add_option(
            "cassette_token_endpoints",
            Sequence[str],
            [],
            "More OAuth token endpoints, as HOST/PATH globs (e.g. sts.example.com/oauth2/token), on top of Google's and "
            "Microsoft's: never stored; in replay mode answered with a placeholder token.",
        )
        loader.add_option(
            "cassette_telemetry",
            bool,
            True,
            "Answer the known telemetry sinks (openai-agents' traces, LangSmith, Langfuse, Logfire) offline in replay "
            "mode, and in every mode never record, key or miss them; false treats them as any other request.",
        )
        loader.add_option(
            "cassette_telemetry_sinks",
            Sequence[str],
            [],
            "More telemetry sinks, as HOST/PATH globs (e.g. otel-collector.example.com/v1/traces): answered like the "
            "known ones (an empty OTLP success), on top of them.",
        )
        loader.add_option(
            "cassette_started_by",
            str,
            DEFAULT_STARTER,
            "How this proxy was started, so that hints name what the user types: mitmdump (--set options), run "
            "(`cassette run`), serve (`cassette serve`), pytest (the plugin). The launcher and the plugin set it.",
            choices=STARTERS,
        )
        loader.add_option(
            "cassette_routes",
            Sequence[str],
            [],
            "Names of the reverse listeners, NAME=PORT (the launcher sets them): the report counts requests per route.",
        )
        loader.add_option(
            "cassette_allow_clients",
            Sequence[str],
            [],
            "Networks (CIDR) whose clients may use the proxy besides this machine's, e.g. 172.16.0.0/12 for a "
            "docker-compose test stack; every other non-loopback client is refused.",
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
            list(DEFAULT_KEY_HEADERS),
            "Request headers that are part of the key because they change what the API does.",
        )
        loader.add_option(
            "cassette_ignore_values",
            Sequence[str],
            [],
            "Volatile values by shape: regular expressions whose matches inside any JSON string value are keyed as "
            "numbered placeholders (pyd_ai_…#1), e.g. client-made tool-call ids; on top of cassette_frameworks.",
        )
        loader.add_option(
            "cassette_frameworks",
            Sequence[str],
            list(DEFAULT_FRAMEWORKS),
            "Framework presets: the values these agent frameworks make up on every run are keyed as numbered "
            f"placeholders, so their runs replay ({'; '.join(f'{p.name}: {p.invents}' for p in PRESETS.values())}). "
            "All by default; list the ones to keep, or set it empty (--set cassette_frameworks=) for none.",
        )
        loader.add_option(
            "cassette_session_ignore",
            Sequence[str],
            list(DEFAULT_SESSION_IGNORE),
            "Fields of a WebSocket session's client messages left out of matching, as cassette_ignore paths (which "
            "apply too); by default event_id, the id OpenAI Realtime clients make up for each event.",
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
            DEFAULT_REPEATS,
            "reuse: identical requests always get the same recorded response; sequence: the n-th identical request "
            "of a run records and replays the n-th response (<key>.json, <key>.2.json, ...), repeating the last one "
            "past the end.",
            choices=REPEATS,
        )
        loader.add_option(
            "cassette_max_size",
            int,
            DEFAULT_MAX_SIZE,
            "The largest cassette file, in bytes, the proxy reads (checked before reading); a larger one answers "
            "500 cassette_invalid. Default 256 MiB, far above any real response.",
        )
        loader.add_option(
            "cassette_preload",
            int,
            DEFAULT_PRELOAD,
            "In replay and record modes, how many cassettes (each below 1 MB) a worker process reads and checks as "
            "the proxy starts, so that their first request is answered from memory (a run sees most requests once); "
            "0: none. Any file changed afterwards is read again.",
        )
        loader.add_option(
            "cassette_replay_timing",
            str,
            os.environ.get(REPLAY_TIMING_VAR) or "none",
            "How a replayed stream (SSE, NDJSON) is paced: none sends all its events at once; recorded waits the "
            "recorded time before each event; a number is a speed factor (2 = twice as fast, 0.5 = half as fast). "
            f"Defaults to ${REPLAY_TIMING_VAR}, else none.",
        )

        loader.add_option(
            "cassette_scope",
            str,
            DEFAULT_SCOPE,
            "shared: one recording per distinct request, whichever test sent it; test: a test's recordings live under "
            "tests/<module>/<test>/ and only that test replays them (needs a runner that announces its tests, "
            "e.g. the pytest plugin). Requests outside any test are always shared.",
            choices=SCOPES,
        )
        loader.add_option(
            "cassette_control_token",
            str,
            os.environ.get(TOKEN_VAR, ""),
            f"The secret a test runner sends to http://{CONTROL_HOST}/ to announce its tests; set by the launcher "
            f"through ${TOKEN_VAR} (never logged). Empty: every control request is refused.",
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
                self.redact_rules = self.recorder.redact_rules = redact.parse_rules(opts.cassette_redact)
                self.redact_specs = self.recorder.redact_specs = list(opts.cassette_redact)  # a worker's copy
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_redact: {e}") from None
        if "cassette_repeats" in updated:
            if opts.cassette_repeats not in REPEATS:
                raise exceptions.OptionsError(
                    f"cassette_repeats: {opts.cassette_repeats!r} is not a choice; use one of {', '.join(REPEATS)}"
                )
            self.repeats = opts.cassette_repeats
        for name in ("cassette_hosts", "cassette_allow_hosts"):
            hosts = getattr(opts, name)
            if name in updated and any(not h.strip() for h in hosts):
                raise exceptions.OptionsError(f"{name}: {list(hosts)!r} must list host globs (`*` for every host)")
        if "cassette_hosts" in updated:
            if not opts.cassette_hosts:
                raise exceptions.OptionsError("cassette_hosts: [] must list host globs (`*` for every host)")
            self.hosts = HostScope(opts.cassette_hosts)
        if "cassette_allow_hosts" in updated:
            self.allowed_hosts = HostScope(opts.cassette_allow_hosts)
        if updated & {"cassette_ignore", "cassette_key_headers", "cassette_ignore_values", "cassette_frameworks"}:
            try:
                # What the preload worker builds its recipe from: the same inputs, so the same keys by construction.
                self.recipe_options = {
                    "ignore": list(opts.cassette_ignore),
                    "key_headers": list(opts.cassette_key_headers),
                    "ignore_values": list(opts.cassette_ignore_values),
                    "frameworks": list(opts.cassette_frameworks),
                }
                self.recipe = make_recipe(**self.recipe_options)
            except RecipeError as e:
                raise exceptions.OptionsError(str(e)) from None
            if refused := sorted(UNKEYABLE_HEADERS.intersection(self.recipe.key_headers)):
                raise exceptions.OptionsError(
                    f"cassette_key_headers: {refused[0]!r} carries a credential or changes on every request "
                    "(AWS SigV4): as a key header it would be stored in every cassette and never match; remove it"
                )
            self.key_headers, self.ignore = self.recipe.key_headers, self.recipe.paths
            self.read_headers = frozenset(h.encode() for h in [*self.key_headers, "content-type", "content-encoding"])
            self.keys = KeyCache(
                self.key_headers, self.ignore, self.recipe.patterns, size=KEY_CACHE_SIZE + max(opts.cassette_preload, 0)
            )
            self.recorder.keyed_with = self.recipe.to_json()
        if "cassette_record_statuses" in updated:
            try:
                self.recorder.statuses = parse_record_statuses(opts.cassette_record_statuses)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_record_statuses: {e}") from None
        if "cassette_upstream_timeout" in updated and not opts.cassette_upstream_timeout > 0:
            raise exceptions.OptionsError(
                f"cassette_upstream_timeout: {opts.cassette_upstream_timeout!r} must be a whole number of seconds above 0"
            )
        if "cassette_dir" in updated:
            self.root = Path(opts.cassette_dir).expanduser().resolve()
            self.root_prefix = f"{self.root}{os.sep}"
            if self.root.exists() and not self.root.is_dir():
                raise exceptions.OptionsError(f"cassette_dir: {opts.cassette_dir!r} exists and is not a folder")
        if "cassette_max_size" in updated and not opts.cassette_max_size > 0:
            raise exceptions.OptionsError(
                f"cassette_max_size: {opts.cassette_max_size!r} must be a number of bytes above 0"
            )
        if updated & {"cassette_dir", "cassette_max_size"}:
            self.replayer.cache.root, self.replayer.cache.max_size = self.root, opts.cassette_max_size
        if "cassette_preload" in updated:
            if opts.cassette_preload < 0:
                raise exceptions.OptionsError(f"cassette_preload: {opts.cassette_preload!r} must be 0 or more")
            self.replayer.cache.size = REPLAY_CACHE_SIZE + opts.cassette_preload
            self.keys.size = KEY_CACHE_SIZE + opts.cassette_preload
        for name in ("cassette_report", "cassette_ready_file"):
            value = getattr(opts, name)
            if name in updated and value and not Path(value).expanduser().resolve().parent.is_dir():
                raise exceptions.OptionsError(f"{name}: the folder of {value!r} does not exist")
        if "cassette_token_endpoints" in updated:
            try:
                self.token_endpoints = parse_endpoints(opts.cassette_token_endpoints)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_token_endpoints: {e}") from None
        if updated & {"cassette_telemetry", "cassette_telemetry_sinks"}:
            self.telemetry.configure(opts.cassette_telemetry, list(opts.cassette_telemetry_sinks))
        if "cassette_started_by" in updated:
            if opts.cassette_started_by not in STARTERS:
                raise exceptions.OptionsError(
                    f"cassette_started_by: {opts.cassette_started_by!r} is not a choice; use one of {', '.join(STARTERS)}"
                )
            self.started_by = opts.cassette_started_by
        if "cassette_routes" in updated:
            try:
                self.route_names = parse_route_names(opts.cassette_routes)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_routes: {e}") from None
        if "cassette_replay_timing" in updated:
            try:
                self.replayer.speed = parse_replay_timing(opts.cassette_replay_timing)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_replay_timing: {e}") from None
        self.seal.configure(updated)
        self.sessions.configure(updated, self.recorder.keyed_with, self.recorder.redact_rules)
        if "cassette_scope" in updated:
            if opts.cassette_scope not in SCOPES:
                raise exceptions.OptionsError(
                    f"cassette_scope: {opts.cassette_scope!r} is not a choice; use one of {', '.join(SCOPES)}"
                )
            self.scope = opts.cassette_scope
        if updated & RULE_OPTIONS:
            rules = RequestRules(
                None, self.mode, self.repeats, self.scope, self.ignore, self.keys, self.recorder.statuses
            )
            self.control.configure(opts.cassette_control_token, rules)
        if opts.connection_strategy != "lazy":
            # With `eager`, mitmproxy connects upstream before any hook runs: an
            # offline replay would fail before the addon could answer.
            opts.connection_strategy = "lazy"

    def running(self) -> None:
        raise_backlog(ctx.master.addons.get("proxyserver"))
        for stale in remove_stale_temp_files(self.root):
            log.warning(f"removed {stale}: a partial cassette left by a proxy that was killed while writing")
        self.routes = RouteTable.of_servers(ctx.master.addons.get("proxyserver").servers, self.route_names)
        self.report.routes = dict.fromkeys(self.routes.names(), 0)
        if ctx.options.cassette_mode in ("replay", "record") and ctx.options.cassette_preload:
            self.preloading = asyncio.get_running_loop().create_task(self._preload(ctx.options.cassette_preload))
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
        write_atomic(Path(ctx.options.cassette_ready_file), json.dumps(ready).encode())

    async def _preload(self, limit: int) -> None:
        began = time.monotonic()
        try:
            # The key cache of now: one made later (other key settings) must not get keys made with these.
            loaded = await self.replayer.preload(limit, self.recipe_options, self.keys.remember)
        except Exception as e:  # the cache stays as it was: every cassette is still read on its first request
            log.warning(
                f"cassette: preloading the cassettes failed ({type(e).__name__}: {e}); each is read on its first request"
            )
            return
        if loaded:
            keys = self.replayer.preloaded_keys
            log.info(
                f"cassette: preloaded {loaded} cassettes ({keys} request keys) in {time.monotonic() - began:.2f} s"
            )

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            await self.sessions.ended(flow)
        except Exception as e:
            self.sessions.failed(flow, e)

    def done(self) -> None:
        self.sessions.done()
        self.replayer.stop_preload()
        if self.preloading is not None:
            self.preloading.cancel()
        self.recorder.wait_idle()
        if ctx.options.cassette_report:
            with self.lock:
                self.report.write(Path(ctx.options.cassette_report))

    # The seal's hooks, called from here like the upstream guard's (see __init__).
    def client_connected(self, client) -> None:
        self.seal.client_connected(client)

    def server_connect(self, data) -> None:
        self.seal.server_connect(data)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        self.seal.http_connect(flow)

    async def request(self, flow: http.HTTPFlow) -> None:
        self.seal.request(flow)
        if flow.response or flow.error or not flow.live:
            return
        try:
            await self._request(flow)
        except Exception as e:
            self.own_error(flow, "request", e)
        finally:
            self.seal.request(flow)

    async def _request(self, flow: http.HTTPFlow) -> None:
        state = new_state(flow)
        host = normal_host(flow.request.host)  # once per request: the scope, the token check and the key use it
        if host == CONTROL_HOST:  # the test runner's channel: never counted or keyed
            state.outcome = "control"
            self.control.answer(flow)
            return
        route = self.routes.route(flow)  # a detour through the forward proxy is undone before keying
        if route != FORWARD:
            host = normal_host(flow.request.host)  # the route's upstream
        # Options are read in configure() (ctx.options costs microseconds on every request): the run's, or the
        # current test's (control_channel.py).
        rules = self.control.rules
        mode = rules.mode
        with self.lock:
            self.report.routes[route] = self.report.routes.get(route, 0) + 1
        if mode != "off" and self.token_endpoints.matches(flow.request.method, host, flow.request.path):
            self._token_exchange(flow, state, mode)
            return
        if mode != "off" and (sink := self.telemetry.match(flow.request, host)):
            self.telemetry.handle(flow, state, mode, sink)
            return
        if mode == "off" or not self.hosts.covers(host, flow.request.path):
            if mode == "replay" and not is_loopback(host) and host not in self.allowed_hosts:
                self._answer_offline(flow, state, host)
                return
            state.outcome = "passthrough"
            with self.lock:
                self.report.passed_through(host)
            return
        facts = request_facts(flow.request, self.read_headers, host)
        big = len(facts.body) >= BIG_REQUEST_BYTES  # keyed, diffed and stored off the event loop (request_worker)
        key = await key_in_worker(facts, rules.keys) if big else rules.keys.key(facts)
        name = relative_name(facts.scheme, facts.host, facts.port, facts.path, key)
        relative = scoped_name(name, rules.test, rules.scope)
        if len(relative) > MAX_NAME:  # too long for the file system: a readable prefix and a hash (location.py)
            relative = scoped_name(short_name(name), rules.test, rules.scope)
        if rules.repeats == "sequence":
            relative = self.sequencer.next(key, relative, self.root_prefix, mode == "replay", rules.test)
        path = self.root_prefix + relative
        if mode != "update":
            try:
                if is_upgrade(flow.request) and await self.sessions.replay(
                    flow, state, SessionTarget(key, path, relative, public_url(facts)), rules, self.replayer.speed
                ):
                    self.seal.exempt.add(self.sessions.address)
                    return
                replay = await self.replayer.load(path)
            except (OSError, CassetteError) as e:
                self._answer_unusable_cassette(flow, state, path, e)
                return
            if replay is not None:
                await self.replayer.answer(flow, state, replay)
                if state.timed_replay:
                    self.seal.exempt.add(("127.0.0.1", self.replayer.timed.port))
                state.outcome = "hit"
                with self.lock:
                    self.report.hits += 1
                    if is_client_error(replay.cassette["response"]["status"]):
                        self.report.client_errors["hits"] += 1
                    self.report.used_by(rules.test, relative, "hits")
                return
        if mode == "replay":
            await self._answer_miss(flow, state, key, Path(path), relative, facts, rules)
            return
        state.target = RecordTarget(
            key=key,
            path=Path(path),
            relative=relative,
            request=stored_request(facts._replace(body=b"") if big else facts, self.key_headers),
            existed=os.path.exists(path),
            test=rules.test,
            statuses=rules.statuses,
            big_request=facts if big else None,
        )
        state.outcome = "forwarded"
        # The stream is kept as it passes through, so it must be plain text; the key ignores this header.
        flow.request.headers["accept-encoding"] = "identity"
        with self.lock:
            self.report.upstream += 1
        self.upstream.forward(flow)

    def _token_exchange(self, flow: http.HTTPFlow, state: FlowState, mode: str) -> None:
        """Never stored nor logged with its token; in replay answered here, so client libraries refresh offline."""
        state.outcome = "token_exchange"
        with self.lock:
            self.report.token_exchanges += 1
        if mode == "replay":
            request = flow.request
            body = request.get_content(strict=False) or b""
            headers, answer = placeholder(request.host, request.path, body, request.headers.get("content-type", ""))
            flow.response = http.Response.make(200, answer, headers)

    def own_error(self, flow: http.HTTPFlow, hook: str, error: Exception) -> None:
        """A bug of ours: the client gets a JSON 500 it will not retry, the report and the log say what broke."""
        what = f"{type(error).__name__}: {redact.redacted(str(error), ('log',), redact.SECRET_RULES)}"[:300]
        message = (
            f"cassette_error: the cassette addon failed in its {hook} hook ({what}); the request was not forwarded. "
            "This is a bug in Cassette Proxy: please report it with the proxy log."
        )
        log.error(message, exc_info=True)
        state = state_of(flow) or new_state(flow)
        state.target = None  # nothing is saved from a flow our code could not follow
        state.outcome = "error"
        with self.lock:
            self.report.errors.append({"type": "cassette_error", "hook": hook, "message": message})
        if flow.live and not (flow.response is not None and hook == "responseheaders" and flow.response.stream):
            flow.response = error_response(500, "cassette_error", message)
        if flow.intercepted:
            flow.resume()

    def _answer_offline(self, flow: http.HTTPFlow, state: FlowState, host: str) -> None:
        method, url = (
            flow.request.method,
            f"{flow.request.scheme}://{host}{flow.request.path.split('?', 1)[0]}",
        )  # no query: no secret
        outside = (
            f"{host} is" if host not in self.hosts else f"{url} is (cassette_hosts names only some paths of {host})"
        )
        message = (
            f"cassette_offline: replay mode does not reach the network, and {outside} outside cassette_hosts; "
            f"refused {method} {url}. Add the host to cassette_hosts to record it, or to cassette_allow_hosts "
            "(`cassette run --allow-host`) to let it through."
        )
        flow.response = error_response(403, "cassette_offline", message, host=host)
        state.outcome = "offline"
        with self.lock:
            self.report.offline.append({"host": host, "method": method, "url": url})
        log.warning(message)

    async def _answer_miss(
        self,
        flow: http.HTTPFlow,
        state: FlowState,
        key: str,
        path: Path,
        relative: str,
        facts: RequestFacts,
        rules: RequestRules,
    ) -> None:
        if len(facts.body) >= BIG_REQUEST_BYTES:  # parsed, redacted and compared by a worker process
            request = stored_request(facts._replace(body=b""), self.key_headers)
            nearest = await closest_in_worker(
                facts, self.key_headers, self.redact_specs, self.recipe_options, path.parent, self.root
            )
        else:
            request = stored_request(facts, self.key_headers)
            # Redacted like the recordings it is compared with: the diff shows real changes, and no secret.
            request["body"] = redact.redacted(request["body"], ("request", "body"), self.redact_rules)
            # Up to MAX_CANDIDATES recordings to compare (read once, then kept): off the event loop.
            nearest = await asyncio.to_thread(self.closest.closest, path.parent, self.root, request, self.recipe)
        method, url = request["method"], redact.loggable_url(request["url"])  # on disk: no secret in any URL
        error = miss.miss_body(
            key, method, url, relative, rules.mode, nearest, rules.scope, rules.test, self.started_by
        )
        flow.response = json_response(409, error, indent=2)
        state.outcome = "miss"
        # The redacted body and the closest recordings let `cassette view` show the miss's diff side by side
        # (not a big body's: the report would hold megabytes; its closest recordings still name the differences).
        entry = {"key": key, "method": method, "url": url, "cassette": relative, "closest": nearest}
        body = {} if len(facts.body) >= BIG_REQUEST_BYTES else {"body": request["body"]}
        with self.lock:
            self.report.missed({**entry, "test": rules.test, "scope": rules.scope, **body})
        in_test = f" in test {rules.test}" if rules.test else ""
        log.warning(f"cassette miss: {method} {url} key={key} (would be {relative}){in_test}")

    def _answer_unusable_cassette(self, flow: http.HTTPFlow, state: FlowState, path: str, error: Exception) -> None:
        """A broken file must not look like a miss: a re-record would paper over it."""
        # The path once: an OSError's own text repeats it (`[Errno 13] Permission denied: '<path>'`).
        problem = f"{path}: {error.strerror}" if isinstance(error, OSError) and error.strerror else str(error)
        message = f"cassette unusable: {problem}. Fix or delete the file, then run again."
        flow.response = error_response(500, "cassette_invalid", message, cassette=path)
        state.outcome = "error"
        with self.lock:
            self.report.errors.append({"type": "cassette_invalid", "cassette": path, "message": problem})
        log.error(message)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Never buffer SSE or NDJSON (recorded, timed replay, passthrough); while recording, keep a timed copy."""
        try:
            self._responseheaders(flow)
        except Exception as e:
            self.own_error(flow, "responseheaders", e)

    def _responseheaders(self, flow: http.HTTPFlow) -> None:
        self.upstream.responseheaders(flow)
        state = state_of(flow)
        if state is not None and state.answered_here:
            return  # answered here, whole
        if flow.response is None or callable(flow.response.stream):
            return  # another addon already transforms this stream
        kind = stream_kind(flow.response.headers.get("content-type", ""))
        if not kind:
            return
        target = state.target if state is not None else None
        if target is not None:
            started = flow.response.timestamp_start or time.time()
            recorder = StreamRecorder(
                kind, started, on_complete=lambda rec, first: self.recorder.save_stream(flow, target, rec, first)
            )
            flow.response.stream = state.recorder = recorder
        else:
            flow.response.stream = True

    async def response(self, flow: http.HTTPFlow) -> None:
        try:
            state = state_of(flow)
            if state is None or state.target is None or flow.response is None or state.recorder is not None:
                return  # nothing to save here; a stream is saved by its recorder
            if flow.response.status_code == 101:  # a WebSocket session follows: recorded as one, never as a 101
                self.sessions.upgraded(flow, state, self.control.rules)
                return
            writing = self.recorder.save_whole(flow, state.target)
            if writing and (failure := await writing):
                flow.response.headers["x-cassette-error"] = failure
        except Exception as e:
            self.own_error(flow, "response", e)

    def error(self, flow: http.HTTPFlow) -> None:
        """A recorded stream cut off before it was complete: no cassette, and an error in the report."""
        try:
            self.upstream.error(flow)
            state = state_of(flow)
            if (
                state is None
                or state.target is None
                or state.recorder is None
                or state.recorder.saved_events is not None
            ):
                return
            target = state.target
            reason = (
                f"cassette not saved: the stream from {redact.loggable_url(target.request['url'])} was cut off before its end "
                f"({flow.error.msg if flow.error else 'no reason given'})"
            )
            self.recorder.add_error({"type": "stream_incomplete", "cassette": target.relative, "message": reason})
            log.warning(reason)
        except Exception:
            log.exception("cassette: error while handling a failed flow")
            with self.lock:
                self.report.errors.append({"type": "cassette_error", "hook": "error", "message": "see the proxy log"})
