"""The run report: exact counts of what the proxy did, for launchers, CI gates and pruning.

The addon fills a `Report` and writes it as JSON on shutdown; `cassette run`,
`cassette serve`, the pytest plugin and `cassette prune` read it back through
`Report.read` / `Report.from_json`, never as a raw dict, so they cannot drift
from what the addon writes.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .atomic_write import write_atomic
from .per_test import NO_TEST
from .printable import printable


class ReportError(Exception):
    """A file that is not a run report this version wrote."""


@dataclass
class Report:
    mode: str = "replay"
    hits: int = 0
    misses: list[dict] = field(default_factory=list)
    recorded: int = 0
    overwritten: int = 0
    upstream: int = 0
    passthrough: int = 0
    token_exchanges: int = 0
    """Requests to an OAuth token endpoint: answered with a placeholder in replay, passed through otherwise, never stored."""
    telemetry: int = 0
    """Requests to a telemetry sink (core/telemetry.py): answered offline in replay, passed through otherwise, never
    recorded, keyed or missed."""
    passthrough_hosts: Counter = field(default_factory=Counter)
    """Requests that passed through untouched, by host: what a replay run still sends to the network."""
    offline: list[dict] = field(default_factory=list)
    """Replay-mode requests to hosts outside the scope, refused with 403 cassette_offline."""
    errors: list[dict] = field(default_factory=list)
    client_errors: dict[str, int] = field(default_factory=lambda: {"hits": 0, "recorded": 0})
    """Recorded 4xx answers (`cassette_record_statuses`) among `hits` and `recorded`: a suite's error-handling
    tests, counted apart so a summary does not pass them off as successes."""
    cassettes_used: set[str] = field(default_factory=set)
    """Cassettes this run read or wrote (relative paths): what `cassette prune` keeps."""
    routes: dict[str, int] = field(default_factory=dict)
    """Requests per route: `forward` and each reverse listener's name, listed even when no request took it."""
    tests: dict[str, dict] = field(default_factory=dict)
    """Per test id (`<no test>` for requests outside any test): {"hits", "misses", "recorded", "cassettes"}:
    which test made each hit, miss and recording. Only for runs whose runner announced its tests."""

    def for_test(self, test: str | None) -> dict:
        """The counts of one test, created on first use; `cassettes` is a set until written."""
        entry = self.tests.get(test or NO_TEST)
        if entry is None:
            entry = self.tests[test or NO_TEST] = {"hits": 0, "misses": 0, "recorded": 0, "cassettes": set()}
        return entry

    def used_by(self, test: str | None, cassette: str, count: str | None = None) -> None:
        """A cassette read or written for `test`; `count` names the test's counter to add one to (hits, recorded)."""
        self.cassettes_used.add(cassette)
        entry = self.for_test(test)
        entry["cassettes"].add(cassette)
        if count:
            entry[count] += 1

    def missed(self, miss: dict) -> None:
        self.misses.append(miss)
        self.for_test(miss.get("test"))["misses"] += 1

    def passed_through(self, host: str) -> None:
        self.passthrough += 1
        self.passthrough_hosts[host] += 1

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
            "offline": len(self.offline),
            "errors": len(self.errors),
        }

    def to_json(self) -> dict:
        data = asdict(self)
        data["passthrough_hosts"] = dict(sorted(self.passthrough_hosts.items()))
        data["cassettes_used"] = sorted(self.cassettes_used)
        data["tests"] = {test: {**entry, "cassettes": sorted(entry["cassettes"])} for test, entry in self.tests.items()}
        data["counts"] = self.counts()
        return data

    def write(self, path: Path) -> None:
        write_atomic(path, (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8"))

    @classmethod
    def from_json(cls, data: object) -> Report:
        if not isinstance(data, dict) or not isinstance(data.get("counts"), dict):
            raise ReportError("not a cassette run report (no counts)")
        known = {f.name for f in fields(cls)}
        try:
            report = cls(**{name: value for name, value in data.items() if name in known})
            report.passthrough_hosts = Counter(report.passthrough_hosts)
            report.cassettes_used = set(report.cassettes_used)
            report.tests = {
                test: {**entry, "cassettes": set(entry["cassettes"])} for test, entry in report.tests.items()
            }
        except (TypeError, KeyError, AttributeError) as e:
            raise ReportError(f"not a cassette run report ({e})") from None
        return report

    @classmethod
    def read(cls, path: Path) -> Report:
        try:
            return cls.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise ReportError(f"{path}: not a run report ({e})") from None

    @classmethod
    def merged(cls, reports: list[Report]) -> Report:
        """One report for several proxies (xdist workers): counts added up, misses and errors listed together."""
        total = cls(mode=reports[0].mode)
        for report in reports:
            for name in ("hits", "recorded", "overwritten", "upstream", "passthrough", "token_exchanges", "telemetry"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.passthrough_hosts.update(report.passthrough_hosts)
            total.misses += report.misses
            total.offline += report.offline
            total.errors += report.errors
            total.cassettes_used |= report.cassettes_used
            for name in ("hits", "recorded"):
                total.client_errors[name] += report.client_errors.get(name, 0)
            for route, n in report.routes.items():
                total.routes[route] = total.routes.get(route, 0) + n
            for test, entry in report.tests.items():
                into = total.for_test(None if test == NO_TEST else test)
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
        if self.passthrough_hosts:
            hosts = ", ".join(f"{host} ({n})" for host, n in sorted(self.passthrough_hosts.items()))
            lines.append(f"cassette: passed through to {hosts}")
        not_recorded = Counter(e.get("reason", e["type"]) for e in self.errors if e.get("type") == "not_recorded")
        if not_recorded:
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(not_recorded.items()))
            lines.append(f"cassette: {sum(not_recorded.values())} requests not recorded: {why}")
        lines += [
            f"cassette: miss {m['method']} {m['url']} (would be {m['cassette']})"
            + (f" in test {m['test']}" if m.get("test") else "")
            for m in self.misses
        ]
        lines += [f"cassette: offline {o['method']} {o['url']} refused" for o in self.offline]
        lines += [f"cassette: error {e['type']}: {e.get('message', '')}" for e in self.errors]
        # URLs, paths and messages come from clients and upstreams: a terminal gets them escaped (core/printable.py).
        return "\n".join(printable(line) for line in lines)

    def tests_with_misses(self) -> dict[str, int]:
        """Test id → how many of its requests missed (requests outside any test are not a test's)."""
        found: dict[str, int] = {}
        for miss in self.misses:
            if miss.get("test"):
                found[miss["test"]] = found.get(miss["test"], 0) + 1
        return found

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


NO_REPORT = "cassette: no run report (the proxy did not shut down cleanly)"


def summary(report: Report | None) -> str:
    return NO_REPORT if report is None else report.summary()


def strict_failures(report: Report | None) -> list[str]:
    return ["no run report"] if report is None else report.strict_failures()
