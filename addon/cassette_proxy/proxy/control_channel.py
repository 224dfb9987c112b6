"""The proxy knows the current test: the control channel a test runner uses, and the rules a test's requests follow.

A runner (the pytest plugin, the Node helper) announces each test with a request
to the reserved host `cassette.control`, sent through the proxy like any other:

    POST http://cassette.control/v1/test/start   {"test": "<id>", "options": {...}, "resume": false}
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

One current test per proxy: runners that run tests concurrently against one
proxy cannot tell them apart (pytest-xdist gives each worker its own proxy).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from mitmproxy import http

from ..core.defaults import MODES, REPEATS
from ..core.key import KeyCache, parse_ignore_paths
from ..core.per_test import SCOPES
from ..core.printable import logger
from ..core.record_statuses import parse_record_statuses
from .errors import error_response, json_response

log = logger(__name__)

CONTROL_HOST = "cassette.control"
TOKEN_HEADER = "x-cassette-control-token"
TOKEN_VAR = "CASSETTE_CONTROL_TOKEN"

TEST_OPTIONS = ("mode", "ignore", "repeats", "scope", "record_statuses")
"""What a test may set for its own requests; anything else is ignored with a log line."""


@dataclass(frozen=True, slots=True)
class RequestRules:
    """What one request follows: the run's options, or the current test's."""

    test: str | None
    mode: str
    repeats: str
    scope: str
    ignore: tuple[tuple[str, ...], ...]
    keys: KeyCache
    statuses: frozenset[int]
    """The upstream statuses saved as cassettes (`cassette_record_statuses`)."""


UNCONFIGURED = RequestRules(None, "replay", "reuse", "shared", (), KeyCache((), ()), frozenset())
"""The rules before configure() has run: replay, the mode that never reaches the network."""


class ControlError(ValueError):
    """A control request this proxy cannot act on; the message says why (answered 400)."""


class CurrentTest:
    """The current test and its rules; `rules` is read once per request, so it is always a ready object."""

    def __init__(self) -> None:
        self.token = ""
        self.run_rules = UNCONFIGURED
        """The run's options: what a request outside any test follows."""
        self.rules = UNCONFIGURED
        self.test_options: dict[str, Any] = {}
        self.on_start = lambda test, resume: None
        """Called when a test starts (the sequencer resets its counters unless the test resumes)."""
        self.played_wanted = False
        """The current test asked the proxy to keep what its requests were answered with (`"played": true`)."""
        self.on_played: Callable[[str], dict] = lambda test: {"test": test, "interactions": None}
        self.on_run_start: Callable[[], dict] = lambda: {"run": "started"}
        self.on_run_end: Callable[[], dict] = lambda: {"report": None}
        """A run starts or ends on this proxy (proxy/runs.py sets both)."""

    def configure(self, token: str, run_rules: RequestRules) -> None:
        """The run's options changed: rebuild the current rules (a running test keeps its own on top)."""
        self.token = token
        self.run_rules = run_rules
        test = self.rules.test
        self.rules = self._rules_for(test, self.test_options)[0] if test is not None else run_rules

    def answer(self, flow: http.HTTPFlow) -> None:
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
            flow.response = json_response(200, self._act(flow.request))
        except ControlError as e:
            log.warning(f"cassette control: {e}")
            flow.response = error_response(400, "cassette_control_invalid", f"cassette control: {e}")

    def end_test(self) -> None:
        """No test runs any more: requests follow the run's rules."""
        self.rules, self.test_options = self.run_rules, {}
        self.played_wanted = False

    def _act(self, request: http.Request) -> dict:
        path = request.path.split("?", 1)[0]
        if request.method == "POST" and path == "/v1/run/start":
            return self.on_run_start()
        if request.method == "POST" and path == "/v1/run/end":
            return self.on_run_end()
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
        if path == "/v1/test/end":
            ended = self.rules.test
            if ended != test:
                log.warning(f"cassette control: end of {test!r}, but the current test is {ended!r}")
            self.end_test()
            return {"test": None, "ended": test}
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise ControlError(f'"options" must be an object, got {options!r:.200}')
        rules, applied, ignored = self._rules_for(test, options)
        for name, reason in ignored.items():
            log.warning(f"cassette control: test {test}: option {name!r} ignored: {reason}")
        self.rules, self.test_options = rules, options
        self.played_wanted = body.get("played") is True
        self.on_start(test, bool(body.get("resume")))
        return {"test": test, "applied": applied, "ignored": ignored}

    def _rules_for(self, test: str, options: dict[str, Any]) -> tuple[RequestRules, dict, dict[str, str]]:
        """The run's rules with a test's options on top; raises ControlError for a value that is wrong."""
        run = self.run_rules
        changes: dict[str, Any] = {"test": test}
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
                    extra = parse_ignore_paths(value)
                except ValueError as e:
                    raise ControlError(f"test {test}: ignore: {e}") from None
                changes["ignore"] = run.ignore + tuple(p for p in extra if p not in run.ignore)
                changes["keys"] = KeyCache(run.keys.key_headers, changes["ignore"], run.keys.values)
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
