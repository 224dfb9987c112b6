"""The proxy knows the current test: the control channel a test runner uses, and the rules a test's requests follow.

A runner (the pytest plugin, the Node helper) announces each test with a request
to the reserved host `cassette.control`, sent through the proxy like any other:

    POST http://cassette.control/v1/test/start   {"test": "<id>", "options": {...}, "resume": false, "own_loop": false}
    POST http://cassette.control/v1/test/end     {"test": "<id>"}
    POST http://cassette.control/v1/test/played  {"test": "<id>"}   (what its requests were answered with: played.py)
    POST http://cassette.control/v1/run/start    {}   (a run reusing a warm proxy: proxy/runs.py)
    POST http://cassette.control/v1/run/end      {}
    header x-cassette-control-token: <the run's token>

The addon answers these itself: they are never forwarded, keyed, recorded or
counted. The token is generated per run by the launcher and reaches mitmdump
through $CASSETTE_CONTROL_TOKEN (the `cassette_control_token` option), not its
command line; a request without it, or with another, gets 403 and changes
nothing, so no client traffic can switch the test or its rules. Without a token
the channel refuses everything.

A test that runs on an event loop of its own (`"own_loop": true`: a coroutine test
under pytest-asyncio or anyio) has every answer to its requests end its
connection (`Connection: close`, addon.py): a client kept for the session (an
`lru_cache`d `httpx.AsyncClient`) would otherwise find, in the next test, a
pooled connection that belongs to this test's closed loop ("Event loop is
closed"). The other tests keep their connections.

Many runners may share one proxy (vitest's workers, `node --test` files): each
names itself in its calls (`"runner": "<pid>"`), each request names its test
with a carrier (core/traffic/attribution.py), and `rules_for` gives every request the
rules of its own test. A runner's start while its previous test still runs, an
end of a test that does not run: both are counted in the run report's
`test_notices`, which the run's summary prints.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mitmproxy import http

from ..core.defaults import CONTROL_TOKEN_VAR, MODES, REPEATS
from ..core.keys.key import KeyCache
from ..core.keys.recipe import Recipe, make_recipe
from ..core.output import logger
from ..core.record_statuses import parse_record_statuses
from ..core.report import Report
from ..core.traffic.attribution import BAGGAGE_HEADER, BAGGAGE_MEMBER, TEST_HEADER, attribute, carried, without_member
from ..core.traffic.per_test import SCOPES
from .errors import error_response, json_response

log = logger(__name__)

TOKEN_HEADER = "x-cassette-control-token"
TOKEN_VAR = CONTROL_TOKEN_VAR

TEST_OPTIONS = ("mode", "ignore", "repeats", "scope", "record_statuses")
"""What a test may set for its own requests; anything else is ignored with a log line."""


@dataclass(frozen=True, slots=True)
class RequestRules:
    """What one request follows: the run's options, or the current test's."""

    test: str | None
    mode: str
    repeats: str
    scope: str
    recipe: Recipe
    """The key settings: the run's, with a test's own ignore paths on top."""
    keys: KeyCache
    """The keys of requests under `recipe` (`recipe.key_cache()`)."""
    statuses: frozenset[int]
    """The upstream statuses saved as cassettes (`cassette_record_statuses`)."""
    closes: bool = False
    """The test runs on an event loop of its own: each answer closes its connection (see the module's doc)."""


_NO_RECIPE = make_recipe((), (), (), ())
UNCONFIGURED = RequestRules(None, "replay", "reuse", "shared", _NO_RECIPE, _NO_RECIPE.key_cache(), frozenset())
"""The rules before configure() has run: replay, the mode that never reaches the network."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The rules one request follows, and why it must be refused when no test can be named for it."""

    rules: RequestRules
    refusal: str | None = None
    """Set when the request's test is ambiguous and its folder depends on it (a test-scoped run or test)."""
    shared_instead: str | None = None
    """The same, with `cassette_unattributed=shared`: why the request follows the run's rules in the shared scope."""


LEGACY_RUNNER = ""
"""A runner that does not name itself (the pytest plugin with a proxy of its own, an older helper): one test at a
time, a start ends the one before. A named runner does the same when its start says `"exclusive": true`."""


@dataclass(slots=True)
class RunningTest:
    rules: RequestRules
    options: dict[str, Any]
    runner: str
    own_loop: bool = False


@dataclass(slots=True)
class Runner:
    tests: list[str] = field(default_factory=list)
    """Its tests that run now, in the order they started."""


class RunCalls(Protocol):
    """What answers a run's start and end on this proxy (proxy/runs.py)."""

    def start(self) -> Awaitable[dict]: ...

    def end(self) -> Awaitable[dict]: ...


class NoRuns:
    """A proxy told of no runs: the calls are answered, and change nothing."""

    async def start(self) -> dict:
        return {"run": "started"}

    async def end(self) -> dict:
        return {"report": None}


_CARRIERS = (TEST_HEADER.encode(), BAGGAGE_HEADER.encode())


def _carries_a_test(fields: Sequence[tuple[bytes, bytes]]) -> bool:
    """Whether a header may carry a test's name (`x-cassette-test`, `baggage`): one pass over the raw fields, where
    each `Headers` lookup decodes and compares every field."""
    for name, _ in fields:  # noqa: SIM110 (a loop: on 20 fields a generator costs more than the tests)
        if name.lower() in _CARRIERS:
            return True
    return False


class ControlError(ValueError):
    """A control request this proxy cannot act on; the message says why (answered 400)."""


class CurrentTest:
    """The tests that run now and their rules; `rules_for` is called once per request."""

    def __init__(
        self,
        report: Report | None = None,
        on_start: Callable[[str, bool, bool], None] = lambda test, resume, played: None,
        on_played: Callable[[str], dict] = lambda test: {"test": test, "interactions": None},
        runs: RunCalls | None = None,
    ) -> None:
        self.token = ""
        self.report = report
        """Where the announcements that went wrong are counted (`test_notices`)."""
        self.run_rules = UNCONFIGURED
        """The run's options: what a request outside any test follows."""
        self.unattributed = "refuse"
        """`cassette_unattributed`: refuse an ambiguous request in the test scope, or give it the shared scope."""
        self.running: dict[str, RunningTest] = {}
        self.runners: dict[str, Runner] = {}
        """Every runner that announced a test in this run, running one now or not."""
        self.on_start = on_start
        """Called when a test starts, with whether it resumes and whether it keeps what it was answered with (the
        sequencer resets its counters unless the test resumes; played.py starts its log)."""
        self.played_tests: set[str] = set()
        """Running tests that asked the proxy to keep what their requests were answered with (`"played": true`)."""
        self.on_played = on_played
        """What a test's requests were answered with (played.py)."""
        self.runs: RunCalls = runs or NoRuns()
        """A run starts or ends on this proxy (proxy/runs.py)."""

    @property
    def rules(self) -> RequestRules:
        """The rules of a request without a carrier when at most one test runs: that test's, or the run's."""
        if len(self.running) == 1:
            return next(iter(self.running.values())).rules
        return self.run_rules

    def configure(self, token: str, run_rules: RequestRules, unattributed: str = "refuse") -> None:
        """The run's options changed: rebuild the tests' rules (a running test keeps its own on top)."""
        self.token = token
        self.run_rules = run_rules
        self.unattributed = unattributed
        for test, running in self.running.items():
            running.rules = self._rules_for(test, running.options, running.own_loop)[0]

    def rules_for(self, request: http.Request) -> Verdict:
        """The rules of this request's test; its carrier is taken off, so no key, cassette or upstream sees it."""
        headers = request.headers
        if len(self.running) <= 1 and len(self.runners) <= 1 and not _carries_a_test(headers.fields):
            return Verdict(self.rules)  # a serial runner and no carrier, nearly every request: one pass, no lookups
        header = headers.pop(TEST_HEADER, None)
        member = None
        baggage = headers.get(BAGGAGE_HEADER)
        if baggage is not None and BAGGAGE_MEMBER in baggage:
            member, rest = without_member(baggage)
            if rest:
                headers[BAGGAGE_HEADER] = rest
            else:
                del headers[BAGGAGE_HEADER]
        if header is None and member is None and len(self.running) <= 1 and len(self.runners) <= 1:
            return Verdict(self.rules)  # a serial runner: the one current test, as before any carrier
        found = attribute(carried(header, member), self.running.keys(), len(self.runners))
        if found.problem is not None:
            scoped = self.run_rules.scope == "test" or any(t.rules.scope == "test" for t in self.running.values())
            if not scoped:
                return Verdict(self.run_rules)
            if self.unattributed == "shared":
                return Verdict(replace(self.run_rules, scope="shared"), shared_instead=found.problem)
            return Verdict(self.run_rules, found.problem)
        if found.test is None:
            return Verdict(self.run_rules)
        running = self.running.get(found.test)
        if running is not None:
            return Verdict(running.rules)
        # A test this proxy was not told of (announced to another proxy, or already ended): the run's rules.
        return Verdict(replace(self.run_rules, test=found.test))

    async def answer(self, flow: http.HTTPFlow) -> None:
        """Answer a request to the control host; it never leaves the proxy."""
        given = flow.request.headers.get(TOKEN_HEADER, "")
        # The token must reach no log, no dump and no other addon.
        flow.request.headers.pop(TOKEN_HEADER, None)
        if not self.token or not hmac.compare_digest(given.encode(errors="surrogateescape"), self.token.encode()):
            reason = "no control token is configured" if not self.token else f"missing or wrong {TOKEN_HEADER}"
            log.warning(f"cassette control: refused {flow.request.method} {flow.request.path}: {reason}")
            flow.response = error_response(
                403,
                "cassette_control_refused",
                f"cassette control: refused ({reason}). Test runners get the token in ${TOKEN_VAR} from "
                "`cassette run` or the pytest plugin.",
            )
            return
        try:
            flow.response = json_response(200, await self._act(flow.request))
        except ControlError as e:
            log.warning(f"cassette control: {e}")
            flow.response = error_response(400, "cassette_control_invalid", f"cassette control: {e}")

    def end_test(self) -> None:
        """No test runs any more, no runner is known: requests follow the run's rules (a new run)."""
        self.running.clear()
        self.runners.clear()
        self.played_tests.clear()

    @property
    def played_wanted(self) -> bool:
        """Some running test keeps what its requests were answered with: one cheap test on the hit path."""
        return bool(self.played_tests)

    def _notice(self, message: str) -> None:
        log.warning(f"cassette control: {message}")
        if self.report is not None:
            self.report.test_notice(message)

    async def _act(self, request: http.Request) -> dict:
        path = request.path.split("?", 1)[0]
        if request.method == "POST" and path == "/v1/run/start":
            started = await self.runs.start()
            self.end_test()  # a new run: no test runs, no runner is known
            return started
        if request.method == "POST" and path == "/v1/run/end":
            return await self.runs.end()
        if request.method != "POST" or path not in ("/v1/test/start", "/v1/test/end", "/v1/test/played"):
            raise ControlError(
                f"{request.method} {path} is not a control call; POST /v1/test/start, /v1/test/end, "
                "/v1/test/played, /v1/run/start or /v1/run/end"
            )
        try:
            body = json.loads(request.get_content(strict=False) or b"{}")
        except ValueError as e:
            raise ControlError(f"the body is not JSON ({e})") from None
        test = body.get("test") if isinstance(body, dict) else None
        if not isinstance(test, str) or not test.strip():
            raise ControlError(f'{path} needs {{"test": "<test id>"}}, got {body!r:.200}')
        if path == "/v1/test/played":
            return self.on_played(test)
        runner_name = body.get("runner", LEGACY_RUNNER)
        if not isinstance(runner_name, str):
            raise ControlError(f'"runner" must be a string (the process id), got {runner_name!r:.100}')
        runner = self.runners.setdefault(runner_name, Runner())
        who = f" in runner {runner_name}" if runner_name else ""
        if path == "/v1/test/end":
            self._end(test, runner, who)
            return {"test": None, "ended": test}
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise ControlError(f'"options" must be an object, got {options!r:.200}')
        own_loop = body.get("own_loop", False)
        if not isinstance(own_loop, bool):
            raise ControlError(f'"own_loop" must be true or false, got {own_loop!r:.100}')
        rules, applied, ignored = self._rules_for(test, options, own_loop)
        for name, reason in ignored.items():
            log.warning(f"cassette control: test {test}: option {name!r} ignored: {reason}")
        if runner.tests and test not in runner.tests:
            if runner_name == LEGACY_RUNNER or body.get("exclusive") is True:
                self._end_all(runner)  # one test at a time: the start ends the one before (the pytest plugin)
            else:
                self._notice(f"start of {test}{who} while {', '.join(runner.tests)} had not ended")
        if test in self.running and self.running[test].runner != runner_name:
            other = self.running[test].runner
            self._notice(f"start of {test}{who} while it runs in runner {other or 'unnamed'}: two tests share its id")
            self._end_one(test)
        self.running[test] = RunningTest(rules, options, runner_name, own_loop)
        if test not in runner.tests:
            runner.tests.append(test)
        if body.get("played") is True:
            self.played_tests.add(test)
        else:
            self.played_tests.discard(test)
        self.on_start(test, bool(body.get("resume")), test in self.played_tests)
        return {"test": test, "applied": applied, "ignored": ignored}

    def _end(self, test: str, runner: Runner, who: str) -> None:
        if test in runner.tests:
            self._end_one(test)
            return
        current = ", ".join(runner.tests) or "none"
        self._notice(f"end of {test}{who}, which was not running there (its current test: {current})")
        if runner is self.runners.get(LEGACY_RUNNER):  # one test at a time: the end ends it whatever its name
            self._end_all(runner)

    def _end_one(self, test: str) -> None:
        self.played_tests.discard(test)
        running = self.running.pop(test, None)
        if running is not None and (owner := self.runners.get(running.runner)) is not None:
            owner.tests = [t for t in owner.tests if t != test]

    def _end_all(self, runner: Runner) -> None:
        for test in list(runner.tests):
            self._end_one(test)

    def _rules_for(
        self, test: str, options: dict[str, Any], own_loop: bool = False
    ) -> tuple[RequestRules, dict, dict[str, str]]:
        """The run's rules with a test's options on top; raises ControlError for a value that is wrong."""
        run = self.run_rules
        changes: dict[str, Any] = {"test": test, "closes": own_loop}
        applied: dict[str, Any] = {}
        ignored: dict[str, str] = {}
        for name, value in options.items():
            if name not in TEST_OPTIONS:
                ignored[name] = f"this proxy has no per-test option {name!r} (it knows {', '.join(TEST_OPTIONS)})"
                continue
            if name == "ignore":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ControlError(f"test {test}: ignore must be a list of dotted paths, got {value!r:.200}")
                try:
                    recipe = run.recipe.with_ignore(value)
                except ValueError as e:
                    raise ControlError(f"test {test}: ignore: {e}") from None
                changes["recipe"], changes["keys"] = recipe, recipe.key_cache()
                applied[name] = value
                continue
            if name == "record_statuses":
                if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
                    raise ControlError(
                        f"test {test}: record_statuses must be a list such as [200, 400], got {value!r:.200}"
                    )
                try:
                    changes["statuses"] = parse_record_statuses([str(v) for v in value])
                except ValueError as e:
                    raise ControlError(f"test {test}: record_statuses: {e}") from None
                applied[name] = value
                continue
            choices = {"mode": MODES, "repeats": REPEATS, "scope": SCOPES}[name]
            if value not in choices:
                raise ControlError(f"test {test}: {name} {value!r} is not a choice; use one of {', '.join(choices)}")
            if name == "mode" and run.mode == "replay" and value != "replay":
                # Fail closed: a marker in the code must not take a replay (CI) run onto the network.
                ignored[name] = f"{value!r} does not apply in a replay run, which stays offline"
                continue
            changes[name] = applied[name] = value
        return replace(run, **changes), applied, ignored
