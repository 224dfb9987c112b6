"""The run report: exact counts of what the proxy did, for launchers, CI gates and pruning.

The addon fills one `Report` and writes it as JSON on shutdown; `cassette run`,
`cassette serve`, the pytest plugin, `cassette prune` and `cassette view` read it
back through `Report.read` / `Report.from_json`, never as a raw dict, so they
cannot drift from what the addon writes.

The report owns its lock: the event loop and the recorder's worker threads both
count into it, always through its methods (`hit`, `missed`, `error`, ...), never
by writing its fields. What other code reads back of an entry is typed: an
`ErrorEntry` has an enumerated `ErrorKind`; a miss and an offline refusal are
`Miss` and `Offline` (TypedDicts: their JSON form is what `cassette view` shows).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from .files.atomic_write import write_atomic
from .printable import printable
from .secrets.scrub import scrub
from .traffic.per_test import NO_TEST


class ReportError(Exception):
    """A file that is not a run report this version wrote."""


class ErrorKind(StrEnum):
    """What went wrong, as the report's `type` names it."""

    OWN_ERROR = "cassette_error"
    """A bug of ours: the request was answered 500 and not forwarded."""
    INVALID = "cassette_invalid"
    """A cassette that cannot be used (unreadable, outside the folder, too big, not valid)."""
    WRITE_FAILED = "cassette_write_failed"
    UPSTREAM = "cassette_upstream_error"
    """A forwarded request whose upstream could not be reached or did not answer in time."""
    NOT_RECORDED = "not_recorded"
    """A forwarded answer that was not saved (its status is not in cassette_record_statuses)."""
    STREAM_INCOMPLETE = "stream_incomplete"
    SESSION_INCOMPLETE = "session_incomplete"
    NOT_A_WEBSOCKET = "not_a_websocket"
    UNATTRIBUTED = "cassette_unattributed"
    """A request in the test scope whose test could not be named (core/traffic/attribution.py): refused, nothing saved."""


@dataclass(frozen=True)
class ErrorEntry:
    kind: ErrorKind
    message: str
    cassette: str | None = None
    """The cassette concerned, relative to the cassette folder (or the path of an unusable one)."""
    url: str | None = None
    """The request's URL without credentials."""
    hook: str | None = None
    """For a bug of ours: the hook it happened in."""
    status: int | None = None
    reason: str | None = None
    """Why an answer was not saved, in a few words (`status 500`)."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Anything else the entry's source knows (a replayed session's message number)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.kind.value}
        for name in ("cassette", "url", "hook", "status", "reason"):
            if (value := getattr(self, name)) is not None:
                data[name] = value
        return {**data, **self.details, "message": self.message}

    @classmethod
    def from_json(cls, data: object) -> ErrorEntry:
        if not isinstance(data, dict):
            raise ReportError(f"an error entry is not an object: {data!r:.100}")
        rest = dict(data)
        try:
            kind = ErrorKind(rest.pop("type"))
        except (KeyError, ValueError):
            raise ReportError(f"an error entry has no known type: {data!r:.100}") from None
        named = {name: rest.pop(name) for name in ("cassette", "url", "hook", "status", "reason") if name in rest}
        return cls(kind, str(rest.pop("message", "")), **named, details=rest)


class Miss(TypedDict):
    """A request with no recording in replay mode, as the 409 named it."""

    key: str
    method: str
    url: str
    cassette: str
    closest: list[dict[str, Any]]
    test: str | None
    scope: NotRequired[str]
    body: NotRequired[Any]
    """The request's body, redacted (not a big body's): `cassette view` diffs it against the closest recording."""
    session: NotRequired[dict[str, Any]]
    """For a WebSocket session: the client message that differs."""


class Offline(TypedDict):
    """A replay-mode request to a host outside the scope, refused with 403 cassette_offline."""

    host: str
    method: str
    url: str


COUNTERS = (
    "hits",
    "recorded",
    "overwritten",
    "upstream",
    "passthrough",
    "token_exchanges",
    "telemetry",
    "browser_background",
)
"""The plain counts, which `merged` adds up."""
MAX_NOTICES = 200


@dataclass
class Report:
    mode: str = "replay"
    hits: int = 0
    misses: list[Miss] = field(default_factory=list)
    recorded: int = 0
    overwritten: int = 0
    upstream: int = 0
    passthrough: int = 0
    token_exchanges: int = 0
    """Requests to an OAuth token endpoint: answered with a placeholder in replay, passed through otherwise, never stored."""
    telemetry: int = 0
    """Requests to a telemetry sink (core/traffic/telemetry.py): answered offline in replay, passed through otherwise, never
    recorded, keyed or missed."""
    telemetry_sinks: Counter[str] = field(default_factory=Counter)
    """Telemetry requests by sink (`LangSmith`, `PostHog`, `Datadog agent`): counted apart from the model calls."""
    browser_background: int = 0
    """Requests a browser sends on its own (core/traffic/browser_background.py): answered 204 here, never a failure."""
    passthrough_hosts: Counter[str] = field(default_factory=Counter)
    """Requests that passed through untouched, by host: what a replay run still sends to the network."""
    offline: list[Offline] = field(default_factory=list)
    """Replay-mode requests to hosts outside the scope, refused with 403 cassette_offline."""
    errors: list[ErrorEntry] = field(default_factory=list)
    client_errors: dict[str, int] = field(default_factory=lambda: {"hits": 0, "recorded": 0})
    """Recorded 4xx answers (`cassette_record_statuses`) among `hits` and `recorded`: a suite's error-handling
    tests, counted apart so a summary does not pass them off as successes."""
    cassettes_used: set[str] = field(default_factory=set)
    """Cassettes this run read or wrote (relative paths): what `cassette prune` keeps."""
    routes: dict[str, int] = field(default_factory=dict)
    """Requests per route: `forward` and each reverse listener's name, listed even when no request took it."""
    preset_values: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """Per cassette replayed or recorded: the values a framework preset keyed as a placeholder (`path`, `preset`,
    `placeholder`, in the key's order): what the key did not see, so a user can check it was made up."""
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per test id (`<no test>` for requests outside any test): {"hits", "misses", "recorded", "cassettes"}:
    which test made each hit, miss and recording. Only for runs whose runner announced its tests."""
    test_notices: list[str] = field(default_factory=list)
    """Test announcements that did not add up: a start while the runner's previous test had not ended, an end of a
    test that was not running (proxy/control_channel.py). The first MAX_NOTICES are kept."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    # -- counting: thread-safe, the only way the proxy changes a report -----------------------------------------

    def took_route(self, route: str) -> None:
        with self._lock:
            self.routes[route] = self.routes.get(route, 0) + 1

    def hit(self, test: str | None, cassette: str, client_error: bool = False) -> None:
        with self._lock:
            self.hits += 1
            if client_error:
                self.client_errors["hits"] += 1
            self._used_by(test, cassette, "hits")

    def recorded_cassette(
        self, test: str | None, cassette: str, overwrote: bool, client_error: bool = False, count: bool = True
    ) -> None:
        """A cassette written; `count` False for a stream rewritten with its timing, already counted once."""
        with self._lock:
            if count:
                if overwrote:
                    self.overwritten += 1
                else:
                    self.recorded += 1
                if client_error:
                    self.client_errors["recorded"] += 1
            self._used_by(test, cassette, "recorded" if count else None)

    def used_by(self, test: str | None, cassette: str, count: str | None = None) -> None:
        """A cassette read or written for `test`; `count` names the test's counter to add one to (hits, recorded)."""
        with self._lock:
            self._used_by(test, cassette, count)

    def presets_replaced(self, cassette: str, values: Sequence[Mapping[str, str]]) -> None:
        """The values presets replaced in the request of `cassette` (key.preset_values, as JSON)."""
        if values:
            with self._lock:
                self.preset_values[cassette] = [dict(v) for v in values]

    def missed(self, miss: Miss) -> None:
        with self._lock:
            self.misses.append(miss)
            self._for_test(miss.get("test"))["misses"] += 1

    def refused(self, offline: Offline) -> None:
        with self._lock:
            self.offline.append(offline)

    def error(self, entry: ErrorEntry) -> None:
        with self._lock:
            self.errors.append(entry)

    def test_notice(self, message: str) -> None:
        with self._lock:
            if len(self.test_notices) < MAX_NOTICES:
                self.test_notices.append(message)

    def passed_through(self, host: str) -> None:
        with self._lock:
            self.passthrough += 1
            self.passthrough_hosts[host] += 1

    def forwarded(self) -> None:
        with self._lock:
            self.upstream += 1

    def token_exchange(self) -> None:
        with self._lock:
            self.token_exchanges += 1

    def telemetry_request(self, sink: str = "") -> None:
        with self._lock:
            self.telemetry += 1
            if sink:
                self.telemetry_sinks[sink] += 1

    def browser_request(self) -> None:
        with self._lock:
            self.browser_background += 1

    def started(self, mode: str, routes: Sequence[str] = ()) -> None:
        """The run's mode, and the routes it serves (listed even when no request takes them)."""
        with self._lock:
            self.mode = mode
            self.routes = {**dict.fromkeys(routes, 0), **self.routes}

    def reset(self) -> None:
        """Empty, keeping the mode and the route names: a new run on a warm proxy (proxy/runs.py). In place,
        because the recorder, the guards and the sessions hold this report."""
        with self._lock:
            fresh = Report(mode=self.mode, routes=dict.fromkeys(self.routes, 0))
            for f in fields(self):
                if f.init:
                    setattr(self, f.name, getattr(fresh, f.name))

    def _for_test(self, test: str | None) -> dict[str, Any]:
        entry = self.tests.get(test or NO_TEST)
        if entry is None:
            entry = self.tests[test or NO_TEST] = {"hits": 0, "misses": 0, "recorded": 0, "cassettes": set()}
        return entry

    def _used_by(self, test: str | None, cassette: str, count: str | None = None) -> None:
        self.cassettes_used.add(cassette)
        entry = self._for_test(test)
        entry["cassettes"].add(cassette)
        if count:
            entry[count] += 1

    # -- reading ------------------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {
            "hits": self.hits,
            "misses": len(self.misses),
            "recorded": self.recorded,
            "overwritten": self.overwritten,
            "upstream": self.upstream,
            "passthrough": self.passthrough,
            "token_exchanges": self.token_exchanges,
            "telemetry": self.telemetry,
            "browser_background": self.browser_background,
            "offline": len(self.offline),
            "errors": len(self.errors),
        }

    def to_json(self) -> dict[str, Any]:
        """The report as written; a consistent snapshot while other threads count."""
        with self._lock:
            data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
            data["misses"] = [dict(miss) for miss in self.misses]
            data["offline"] = [dict(entry) for entry in self.offline]
            data["errors"] = [error.to_json() for error in self.errors]
            data["client_errors"] = dict(self.client_errors)
            data["routes"] = dict(self.routes)
            data["preset_values"] = {name: list(values) for name, values in sorted(self.preset_values.items())}
            data["passthrough_hosts"] = dict(sorted(self.passthrough_hosts.items()))
            data["telemetry_sinks"] = dict(sorted(self.telemetry_sinks.items()))
            data["cassettes_used"] = sorted(self.cassettes_used)
            data["tests"] = {t: {**entry, "cassettes": sorted(entry["cassettes"])} for t, entry in self.tests.items()}
            data["counts"] = self.counts()
        return data

    def write(self, path: Path) -> None:
        write_atomic(path, scrub(json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8"))

    @classmethod
    def from_json(cls, data: object) -> Report:
        if not isinstance(data, dict) or not isinstance(data.get("counts"), dict):
            raise ReportError("not a run report (no `counts` object)")
        known = {f.name for f in fields(cls) if f.init}
        try:
            report = cls(**{name: value for name, value in data.items() if name in known})
            report.errors = [ErrorEntry.from_json(error) for error in report.errors]
            report.passthrough_hosts = Counter(report.passthrough_hosts)
            report.telemetry_sinks = Counter(report.telemetry_sinks)
            report.cassettes_used = set(report.cassettes_used)
            report.tests = {
                test: {**entry, "cassettes": set(entry["cassettes"])} for test, entry in report.tests.items()
            }
        except (TypeError, KeyError, AttributeError) as e:
            raise ReportError(f"not a run report ({e})") from None
        return report

    @classmethod
    def read(cls, path: Path) -> Report:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ReportError(f"cannot read the report {path}: {e.strerror or e}") from None
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ReportError(f"the report {path} is not JSON: {e}") from None
        try:
            return cls.from_json(data)
        except ReportError as e:
            raise ReportError(f"{path}: {e}") from None

    @classmethod
    def merged(cls, reports: list[Report]) -> Report:
        """One report for several proxies (xdist workers): counts added up, misses and errors listed together."""
        total = cls(mode=reports[0].mode)
        for report in reports:
            for name in COUNTERS:
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.passthrough_hosts.update(report.passthrough_hosts)
            total.telemetry_sinks.update(report.telemetry_sinks)
            total.misses += report.misses
            total.offline += report.offline
            total.errors += report.errors
            total.test_notices += report.test_notices
            total.cassettes_used |= report.cassettes_used
            total.preset_values.update(report.preset_values)
            for name in ("hits", "recorded"):
                total.client_errors[name] += report.client_errors.get(name, 0)
            for route, n in report.routes.items():
                total.routes[route] = total.routes.get(route, 0) + n
            for test, entry in report.tests.items():
                into = total._for_test(None if test == NO_TEST else test)
                for name in ("hits", "misses", "recorded"):
                    into[name] += entry[name]
                into["cassettes"] |= entry["cassettes"]
        return total

    def summary(self) -> str:
        """One line for the end of a run, then one line per miss, refusal and error."""
        counts = self.counts()
        line = (
            f"cassette: {self.mode}: {counts['hits']} hits, {counts['misses']} misses, {counts['recorded']} recorded, "
            f"{counts['upstream']} upstream, {counts['passthrough']} passthrough"
        )
        for name, words in (
            ("token_exchanges", "token exchanges"),
            ("telemetry", "telemetry"),
            ("browser_background", "browser background"),
            ("offline", "offline"),
            ("errors", "errors"),
        ):
            if counts[name]:
                line += f", {counts[name]} {words}"
        if self.client_errors.get("hits") or self.client_errors.get("recorded"):
            line += (
                f" (recorded 4xx answers: {self.client_errors.get('hits', 0)} of the hits, "
                f"{self.client_errors.get('recorded', 0)} of the recorded)"
            )
        lines = [line]
        if len(self.routes) > 1:  # with a reverse route: shows a route its clients silently bypassed (`openai 0`)
            lines.append("cassette: routes: " + ", ".join(f"{name} {n}" for name, n in self.routes.items()))
        if self.telemetry_sinks:
            sinks = ", ".join(f"{name} {n}" for name, n in sorted(self.telemetry_sinks.items()))
            lines.append(f"cassette: telemetry (never recorded): {sinks}")
        if self.passthrough_hosts:
            hosts = ", ".join(f"{host} ({n})" for host, n in sorted(self.passthrough_hosts.items()))
            lines.append(f"cassette: passed through to {hosts}")
        if self.preset_values:
            by_preset = Counter(v.get("preset", "?") for values in self.preset_values.values() for v in values)
            lines.append(
                f"cassette: framework presets keyed {sum(by_preset.values())} made-up values as placeholders in "
                f"{len(self.preset_values)} cassettes ("
                + ", ".join(f"{name} {n}" for name, n in sorted(by_preset.items()))
                + "): each is listed under preset_values in the run report"
            )
        not_recorded = Counter(e.reason or e.kind.value for e in self.errors if e.kind == ErrorKind.NOT_RECORDED)
        if not_recorded:
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(not_recorded.items()))
            lines.append(f"cassette: {sum(not_recorded.values())} requests not recorded: {why}")
        lines += [
            f"cassette: miss {m['method']} {m['url']} (would be {m['cassette']}{_first_difference(m)})"
            + (f" in test {m['test']}" if m.get("test") else "")
            for m in self.misses
        ]
        lines += [f"cassette: offline {o['method']} {o['url']} refused" for o in self.offline]
        lines += [f"cassette: error {e.kind.value}: {e.message}" for e in self.errors]
        lines += [f"cassette: test announcements: {notice}" for notice in self.test_notices]
        # URLs, paths and messages come from clients and upstreams: a terminal gets them escaped (core/printable.py).
        return "\n".join(scrub(printable(line)) for line in lines)  # and no known secret (core/secrets/scrub.py)

    def tests_with_misses(self) -> dict[str, int]:
        """Test id → how many of its requests missed (requests outside any test are not a test's)."""
        return dict(Counter(test for miss in self.misses if (test := miss.get("test"))))

    def strict_failures(self) -> list[str]:
        """What `--strict` fails on even when the suite swallowed it: misses, errors, refusals, upstream in replay."""
        counts = self.counts()
        failures = []
        if counts["misses"]:
            failures.append(f"{counts['misses']} misses")
        if counts["errors"]:
            failures.append(f"{counts['errors']} errors")
        if counts["offline"]:
            failures.append(f"{counts['offline']} requests refused as offline")
        if self.mode == "replay" and counts["upstream"]:
            failures.append(f"{counts['upstream']} upstream requests in replay mode")
        return failures


def _first_difference(miss: Miss) -> str:
    """`; closest recording differs in: …`: what the 409 said first, for a client that hid the 409 (llm-gemini turns
    it into an IndexError) and leaves the summary as the only place the cause is read."""
    closest = miss.get("closest") or []
    first = closest[0] if closest and isinstance(closest[0], dict) else {}
    differences = [d for d in first.get("differences") or [] if isinstance(d, str)]
    if not differences:
        settings = [s for s in first.get("settings") or [] if isinstance(s, str)]
        return f"; closest recording: {settings[0]}" if settings else ""
    more = " (and more)" if len(differences) > 1 else ""
    return f"; closest recording differs in: {differences[0]}{more}"


NO_REPORT = "cassette: no run report (the proxy did not shut down cleanly)"


def summary(report: Report | None) -> str:
    return NO_REPORT if report is None else report.summary()


def strict_failures(report: Report | None) -> list[str]:
    return ["no run report"] if report is None else report.strict_failures()
