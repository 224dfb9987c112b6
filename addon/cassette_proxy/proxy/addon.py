"""The mitmproxy addon: options and hooks.

Each hook decides what happens to a request and delegates the doing: the
options to options.py (parsed once into a `RunOptions`), the key to
core/keys/key.py (facts from the flow: facts.py), lookups and hits to replay.py,
saving to record.py, the answers made here (miss, offline, unusable cassette,
token exchange, our own error) to answers.py, forwarded requests' failures to
upstream.py, repeated requests to sequence.py, WebSocket sessions to
sessions.py, telemetry sinks to telemetry.py, the current test and its rules to
control_channel.py. Per-request state is one `FlowState` (state.py); the run
report (core/report.py) counts through its own thread-safe methods.

Every hook fails closed: an exception of ours answers a JSON 500
`cassette_error` (counted, logged with its traceback), never a forwarded
request. The independent seal (seal.py) refuses upstream connections in
replay mode even if this addon forgot a request.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, NamedTuple

from mitmproxy import ctx, exceptions, http

from ..core.defaults import CONTROL_HOST
from ..core.files.atomic_write import remove_stale_temp_files
from ..core.files.location import MAX_NAME, relative_name, short_name
from ..core.files.safe_read import CassetteError
from ..core.files.stream_events import stream_kind
from ..core.keys.hosts import is_loopback
from ..core.keys.key import KEY_CACHE_SIZE, KeyCache, RequestFacts
from ..core.keys.recipe import stored_request
from ..core.keys.url import DEFAULT_PORTS, normal_host, public_url
from ..core.keys.volatile import Replaced
from ..core.output import logger
from ..core.reading.miss import ClosestSearch
from ..core.record_statuses import is_client_error
from ..core.report import ErrorEntry, ErrorKind, Report
from ..core.secrets import redact
from ..core.sessions.mcp import SESSION_HEADER, McpRequest, mcp_request
from ..core.traffic.browser_background import background_of
from ..core.traffic.per_test import scoped_name
from ..core.workers.request_worker import BIG_REQUEST_BYTES, key_in_worker
from . import answers, options
from .control_channel import CurrentTest, RequestRules
from .facts import request_facts
from .listening.listen_backlog import raise_backlog
from .listening.ready_file import write_ready_file
from .listening.routes import FORWARD, RouteTable
from .options import RunOptions
from .played import PlayedLog, PlayedOutcome, PlayedRequest
from .record import Recorder, RecordTarget, client_left
from .replay import REPLAY_CACHE_SIZE, Replayer
from .runs import Runs
from .seal import Seal
from .sequence import Sequencer
from .state import FlowState, Outcome, new_state, state_of
from .telemetry import Telemetry
from .upstream import UpstreamGuard
from .websocket import ws_drop
from .websocket.sessions import Played, Sessions, SessionTarget, is_upgrade
from .writer import Writer

log = logger(__name__)


class Keyed(NamedTuple):
    """A request keyed and named, as the hit and the forward take it."""

    facts: RequestFacts
    key: str
    relative: str
    """Its cassette's path relative to the cassette folder (`_cassette_name`)."""
    rules: RequestRules
    """The rules of its test it was keyed under."""
    presets: tuple[Replaced, ...]
    """What the framework presets keyed as placeholders (core/keys/key.py, `keyed`)."""


def in_session(response: http.Response | None, session: str) -> None:
    """A replayed MCP answer carries the session id of the request it answers, not the recording's: some clients
    (the TypeScript SDK) adopt the id of any answer, and would then send their new requests live with an id the
    server never issued (record mode), or with one session's id in another's conversation."""
    if response is not None and SESSION_HEADER in response.headers:
        response.headers[SESSION_HEADER] = session


def closes_connection(flow: http.HTTPFlow) -> None:
    """This answer ends its connection (`Connection: close`: the client does not pool it, mitmproxy closes its
    side), for a test on an event loop of its own (control_channel.py): no pooled connection outlives the loop.
    Not for HTTP/2 or 3, which have no such header, nor for a 101, whose connection goes on as a WebSocket."""
    response = flow.response
    if response is None or response.status_code == 101 or flow.request.is_http2 or flow.request.is_http3:
        return
    response.headers["connection"] = "close"


class CassetteAddon:
    name = "cassette"
    """The name mitmproxy knows it by (`ctx.master.addons.get("cassette")`)."""

    def __init__(self) -> None:
        self.report = Report()
        self.options: RunOptions | None = None
        """Set by configure(), before mitmproxy delivers any flow."""
        self.keys = KeyCache((), ())
        """The keys of requests this run has seen (core/keys/key.py), for the run's key settings."""
        self.writer = Writer(self.report)
        """The one writer of recordings, HTTP and WebSocket alike (writer.py): every run's end waits for it."""
        self.recorder = Recorder(self.writer)
        self.replayer = Replayer()
        self.preloading: asyncio.Task[None] | None = None
        self.sequencer = Sequencer()
        self.played = PlayedLog(self.writer.wait_idle)
        """What the current test's requests were answered with, when its runner asks (the `vcr` fixture)."""
        self.control = CurrentTest(
            self.report,
            on_start=self._test_started,
            on_played=lambda test: self.played.answer(test, self.writer.redact_rules),
            # Runs reusing this proxy (a warm `cassette serve`): each its own report and counters.
            runs=Runs(self.report, self.writer, self.sequencer),
        )
        self.closest = ClosestSearch()
        self.seal = Seal()
        self.routes = RouteTable()
        """The reverse listeners, known once the servers run (running())."""
        self.telemetry = Telemetry(self.report)
        # The guard, the seal and the sessions are called from this addon's hooks rather than registered as child
        # addons: mitmproxy walks every child on every event of every flow, a cost each hit paid for nothing.
        self.upstream = UpstreamGuard(self.report)
        self.sessions = Sessions(self.writer)

    def _test_started(self, test: str, resume: bool, played: bool) -> None:
        self.sequencer.start(test, resume)
        self.played.start(test, played, resume)

    def load(self, loader: Any) -> None:
        options.declare(loader)
        ws_drop.install()  # a WebSocket side cut off is relayed as cut off, never as a clean 1000 (ws_drop.py)

    def configure(self, updated: set[str]) -> None:
        self.seal.configure(updated)  # the guard reads and checks its own options, whatever happens below
        if updated & options.NAMES:
            try:
                parsed = options.parse_options(ctx.options)
            except ValueError as e:
                raise exceptions.OptionsError(str(e)) from None
            self._apply(parsed)
        if ctx.options.connection_strategy != "lazy":
            # With `eager`, mitmproxy connects upstream before any hook runs: an
            # offline replay would fail before the addon could answer.
            ctx.options.connection_strategy = "lazy"

    def _apply(self, run: RunOptions) -> None:
        """Hand each collaborator its part of the run's options."""
        previous, self.options = self.options, run
        if previous is None or (previous.recipe, previous.preload) != (run.recipe, run.preload):
            self.keys = run.recipe.key_cache(size=KEY_CACHE_SIZE + run.preload)
        self.report.started(run.mode)
        self.writer.configure(run.redact_rules, run.recipe.to_json())
        self.recorder.configure(run.redact_specs, run.record_statuses)
        self.replayer.configure(run.root, run.max_size, REPLAY_CACHE_SIZE + run.preload, run.replay_speed)
        self.telemetry.configure(run.telemetry)
        self.upstream.configure(run.upstream_timeout)
        self.sessions.configure(
            run.root,
            run.max_size,
            run.session_ignore,
            run.started_by,
            run.recipe,
        )
        run_rules = RequestRules(None, run.mode, run.repeats, run.scope, run.recipe, self.keys, run.record_statuses)
        self.control.configure(run.control_token, run_rules, run.unattributed)

    def running(self) -> None:
        run = self._run()
        servers = ctx.master.addons.get("proxyserver")
        raise_backlog(servers)
        for stale in remove_stale_temp_files(run.root):
            log.warning(f"removed {stale}: a partial cassette left by a proxy that was killed while writing")
        self.routes = RouteTable.of_servers(servers.servers, dict(run.route_names))
        self.report.started(run.mode, self.routes.names())
        if run.mode in ("replay", "record") and run.preload:
            preload = self.replayer.preload_logged(run.preload, run.recipe.settings(), self.keys.remember)
            self.preloading = asyncio.get_running_loop().create_task(preload)
        if run.ready_file is not None:
            write_ready_file(run.ready_file, run.mode, servers.servers)

    def done(self) -> None:
        self.sessions.done()
        self.replayer.stop_preload()
        if self.preloading is not None:
            self.preloading.cancel()
        self.writer.wait_idle()  # HTTP recordings and sessions alike: all in this report
        if self.options is not None and self.options.report is not None:
            self.report.write(self.options.report)

    def _run(self) -> RunOptions:
        assert self.options is not None, "mitmproxy configures an addon before it runs"
        return self.options

    # The seal's hooks, called from here like the upstream guard's (see __init__).
    def client_connected(self, client: Any) -> None:
        self.seal.client_connected(client)

    def server_connect(self, data: Any) -> None:
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
        """A request's fate. Each rare case (the control channel, a route, a test's carrier, a token exchange, a
        telemetry sink, MCP, a WebSocket upgrade, a big body, the `vcr` fixture's log) is decided by one cheap
        test, and what the hook computes (the host, the body's size, the upgrade) is computed once."""
        state = new_state(flow)
        request = flow.request
        host = normal_host(request.host)  # once per request: the scope, the token check and the key use it
        if host == CONTROL_HOST:  # the test runner's channel: never counted or keyed
            state.outcome = Outcome.CONTROL
            await self.control.answer(flow)
            return
        route = self.routes.route(flow)  # a detour through the forward proxy is undone before keying
        if route != FORWARD:
            host = normal_host(request.host)  # the route's upstream
        self.report.took_route(route)
        # The rules of the request's own test (control_channel.py), its carrier taken off: once per request.
        verdict = self.control.rules_for(request)
        rules = state.rules = verdict.rules
        run = self._run()
        covered = rules.mode != "off" and run.hosts.covers_normal(host, request.path)
        if rules.mode != "off" and self._answered_aside(flow, state, host, rules.mode, covered):
            return
        if not covered:
            state.outcome = Outcome.PASSTHROUGH
            self.report.passed_through(host)
            return
        if verdict.refusal is not None:  # never filed under a guessed test's folder
            state.outcome = Outcome.ERROR
            self.report.error(answers.unattributed(flow, verdict.refusal))
            return
        if verdict.shared_instead is not None:  # the user asked for the shared scope instead of a refusal
            url = redact.loggable_url(flow.request.pretty_url.split("?", 1)[0])
            self.report.test_notice(f"{flow.request.method} {url} in the shared scope: {verdict.shared_instead}")
        facts = request_facts(request, run.read_headers, host)
        mcp = mcp_request(facts.method, facts.body, request.headers.fields)
        if mcp is not None and is_loopback(host):
            # A local MCP server a test starts listens on a new port each run: its conversations are keyed
            # and stored without the port, so they replay whatever port the server gets.
            facts = facts._replace(port=DEFAULT_PORTS[facts.scheme])
        big = len(facts.body) >= BIG_REQUEST_BYTES  # keyed, diffed and stored off the event loop (request_worker)
        # What the presets replaced comes with the key (core/keys/key.py, `keyed`): not looked for in a big body, whose
        # parse would hold up every other client (`cassette show` lists it).
        key, presets = (await key_in_worker(facts, rules.recipe), ()) if big else rules.keys.keyed(facts)
        upgrade = facts.method == "GET" and is_upgrade(request)
        relative = self._cassette_name(facts, key, rules, upgrade)
        keyed = Keyed(facts, key, relative, rules, presets)
        # In record mode an MCP session is kept whole on the server (core/sessions/mcp.py, `keeps_session`): its new
        # requests then go live with a session id the server issued, never a replayed one.
        keeps_session = rules.mode == "record" and mcp is not None and mcp.keeps_session
        if rules.mode != "update" and not keeps_session and await self._replayed(flow, state, keyed, upgrade):
            if mcp is not None and mcp.session is not None:
                state.mcp_session = mcp.session
                in_session(flow.response, mcp.session)
            return
        if rules.mode == "replay":
            endpoint = Path(run.root_prefix + relative).parent
            entry = await answers.miss(flow, facts, key, relative, endpoint, rules, run, self.closest, big, mcp)
            state.outcome = Outcome.MISS
            self.report.missed(entry)
            return
        self._forward(flow, state, keyed, big, mcp, keep_existing=keeps_session)

    def _answered_aside(self, flow: http.HTTPFlow, state: FlowState, host: str, mode: str, covered: bool) -> bool:
        """Requests never keyed: token exchanges, telemetry, and in replay hosts outside the scope."""
        run = self._run()
        request = flow.request
        if run.token_endpoints.matches(request.method, host, request.path):
            state.outcome = Outcome.TOKEN_EXCHANGE
            self.report.token_exchange()
            if mode == "replay":
                answers.token_exchange(flow)
            return True
        if sink := self.telemetry.match(request, host):
            self.telemetry.handle(flow, state, mode, sink)
            return True
        if not covered and background_of(host) is not None:  # a browser's own traffic (Playwright's chromium)
            state.outcome = Outcome.BROWSER_BACKGROUND
            self.report.browser_request()
            answers.browser_background(flow)
            return True
        if mode == "replay" and not covered and not is_loopback(host) and host not in run.allowed_hosts:
            state.outcome = Outcome.OFFLINE
            self.report.refused(answers.offline(flow, host, run.hosts))
            return True
        return False

    def _cassette_name(self, facts: RequestFacts, key: str, rules: RequestRules, upgrade: bool = False) -> str:
        """Where this request's cassette lives, relative to the cassette folder. The sessions of an upgrade are
        told apart by their conversation, whatever the repeats (sessions.py)."""
        name = relative_name(facts.scheme, facts.host, facts.port, facts.path, key)
        relative = scoped_name(name, rules.test, rules.scope)
        if len(relative) > MAX_NAME:  # too long for the file system: a readable prefix and a hash (location.py)
            relative = scoped_name(short_name(name), rules.test, rules.scope)
        if rules.repeats == "sequence" and not upgrade:
            run = self._run()
            relative = self.sequencer.next(key, relative, run.root_prefix, rules.mode == "replay", rules.test)
        return relative

    async def _replayed(self, flow: http.HTTPFlow, state: FlowState, keyed: Keyed, upgrade: bool) -> bool:
        """Answered from the cassette at `keyed.relative` (or refused, when it cannot be used); False when there is
        none."""
        facts, key, relative, rules, presets = keyed
        run = self._run()
        path = run.root_prefix + relative
        try:
            if upgrade:
                stored = stored_request(facts, run.recipe.key_headers)
                target = SessionTarget(key, path, relative, stored["url"], stored)
                played = await self.sessions.replay(
                    flow, state, target, rules, run.replay_speed, live=rules.mode == "record"
                )
                if played is Played.PLAYED:
                    self.seal.exempt.add(self.sessions.address)
                    return True
                if played is Played.LIVE:  # record mode: a new conversation is known too late to go live then
                    return False
            replay = await self.replayer.load(path)
        except (OSError, CassetteError) as e:
            state.outcome = Outcome.ERROR
            self.report.error(answers.unusable_cassette(flow, path, e))
            return True
        if replay is None:
            return False
        await self.replayer.answer(flow, state, replay)
        if state.timed_replay:
            self.seal.exempt.add(("127.0.0.1", self.replayer.timed.port))
        state.outcome = Outcome.HIT
        self.report.hit(rules.test, relative, is_client_error(replay.cassette["response"]["status"]))
        if self.control.played_wanted:
            self._note_played("hit", flow, facts, path, rules)
        if presets:  # what the framework presets keyed as placeholders: listed in the report, per cassette
            self.report.presets_replaced(relative, [r.to_json() for r in presets])
        return True

    def _forward(
        self,
        flow: http.HTTPFlow,
        state: FlowState,
        keyed: Keyed,
        big: bool,
        mcp: McpRequest | None = None,
        keep_existing: bool = False,
    ) -> None:
        """Record and update modes: send the request upstream; its response may become the cassette at
        `keyed.relative`."""
        facts, key, relative, rules, presets = keyed
        path = self._run().root_prefix + relative
        stored = stored_request(facts._replace(body=b"") if big else facts, self._run().recipe.key_headers)
        state.target = RecordTarget(
            key=key,
            path=Path(path),
            relative=relative,
            request=stored,
            existed=os.path.exists(path),
            test=rules.test,
            statuses=rules.statuses,
            keyed_with=None if rules.recipe is self._run().recipe else rules.recipe.to_json(),
            big_request=facts if big else None,
            mcp=mcp,
            keep_existing=keep_existing,
        )
        state.outcome = Outcome.FORWARDED
        if self.control.played_wanted:
            self._note_played("recorded", flow, facts, path, rules, stored["url"])
        if presets:
            self.report.presets_replaced(relative, [r.to_json() for r in presets])
        # The stream is kept as it passes through, so it must be plain text; the key ignores this header.
        flow.request.headers["accept-encoding"] = "identity"
        self.report.forwarded()
        self.upstream.forward(flow)

    def _note_played(
        self,
        outcome: PlayedOutcome,
        flow: http.HTTPFlow,
        facts: RequestFacts,
        path: str,
        rules: RequestRules,
        url: str | None = None,
    ) -> None:
        """For the current test's `vcr` fixture (played.py): the request as it came, the cassette that answers it;
        `url`: its public URL when the caller has it already (`stored_request`'s)."""
        headers = tuple(flow.request.headers.fields)
        url = url if url is not None else public_url(facts)
        played = PlayedRequest(outcome, facts.method, url, headers, facts.body, facts.content_type, path)
        self.played.add(rules.test, played)

    def own_error(self, flow: http.HTTPFlow, hook: str, error: Exception) -> None:
        """A bug of ours: answered 500 and counted (answers.own_error); never forwarded."""
        self.report.error(answers.own_error(flow, state_of(flow) or new_state(flow), hook, error))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        """Never buffer SSE or NDJSON (recorded, timed replay, passthrough); while recording, keep a timed copy."""
        try:
            self._responseheaders(flow)
        except Exception as e:
            self.own_error(flow, "responseheaders", e)

    def _responseheaders(self, flow: http.HTTPFlow) -> None:
        self.upstream.responseheaders(flow)
        state = state_of(flow)
        # mitmproxy calls this hook for the answers made in `request` too (a hit, a miss): one place for all. The
        # header is never stored (cassette_file.DROPPED_HEADERS), so a recording does not depend on the test.
        if state is not None and state.rules is not None and state.rules.closes:
            closes_connection(flow)
        if state is not None and state.timed_replay and state.mcp_session is not None:
            in_session(flow.response, state.mcp_session)
        if state is not None and state.answered_here:
            return  # answered here, whole
        if flow.response is None or callable(flow.response.stream):
            return  # another addon already transforms this stream
        kind = stream_kind(flow.response.headers.get("content-type", ""))
        if not kind:
            return
        target = state.target if state is not None else None
        if state is not None and target is not None:
            flow.response.stream = state.recorder = self.recorder.stream(flow.response, target, kind)
        else:
            flow.response.stream = True

    async def response(self, flow: http.HTTPFlow) -> None:
        try:
            state = state_of(flow)
            if state is None or state.target is None or flow.response is None or state.recorder is not None:
                return  # nothing to save here; a stream is saved by its recorder
            if flow.response.status_code == 101:  # a WebSocket session follows: recorded as one, never as a 101
                target, state.target = state.target, None
                self.sessions.upgraded(flow, flow.response, target, state.rules or self.control.rules)
                return
            writing = self.recorder.save_whole(flow.response, state.target)
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
            mcp = state.target.mcp
            if mcp is not None and mcp.server_stream and flow.response is not None and client_left(flow):
                self.recorder.left_open(flow.response, state.target, state.recorder)
                return
            self.recorder.cut_off(flow, state.target)
        except Exception:
            log.exception("cassette: error while handling a failed flow")
            self.report.error(ErrorEntry(ErrorKind.OWN_ERROR, "see the proxy log", hook="error"))

    async def websocket_message(self, flow: http.HTTPFlow) -> None:
        """Record mode on a Responses WebSocket connection: a recorded turn answered here, a new one sent live."""
        try:
            await self.sessions.message(flow)
        except Exception as e:
            self.sessions.failed(flow, e, hook="websocket_message")

    async def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            await self.sessions.ended(flow)
        except Exception as e:
            self.sessions.failed(flow, e)
