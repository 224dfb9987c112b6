"""Which test a request belongs to when several tests run at once against one proxy.

One proxy may serve many test processes at once (vitest's or Jest's workers,
`node --test` files, Playwright workers) and a server under test that all of
them call. Each request says which test it belongs to with a carrier:

    x-cassette-test: <test id, percent-encoded>            the Node preload adds it to every request of a process
    baggage: cassette-test=<test id, percent-encoded>,...  W3C baggage, which OpenTelemetry propagates by itself

`x-cassette-test` is empty outside any test (the process runs tests, none now), and
holds several comma-separated ids when the process runs several tests at once and
cannot tell which one made the request: ambiguous, never guessed. The proxy takes
the carrier off the request before anything else sees it, so it reaches no key,
no cassette and no upstream.

A request without a carrier belongs to the one test that runs, as long as only
one runner has announced tests (a serial runner: the pytest plugin, a
`--test-concurrency=1` suite); with several runners it is ambiguous, and in the
test scope it is refused rather than filed under a guessed folder.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import quote, unquote

UNATTRIBUTED = ("refuse", "shared")
"""`cassette_unattributed`: what an ambiguous request gets in the test scope (refused, or the shared scope)."""

TEST_HEADER = "x-cassette-test"
BAGGAGE_HEADER = "baggage"
BAGGAGE_MEMBER = "cassette-test"


@dataclass(frozen=True, slots=True)
class Carried:
    """What a request's carrier says: the tests of the process (or the incoming request) that sent it."""

    tests: tuple[str, ...]
    """Empty: outside any test; one: that test; more: the process ran these at once (ambiguous)."""
    via: str
    """The header it came in: `x-cassette-test` or `baggage`."""


@dataclass(frozen=True, slots=True)
class Attribution:
    """The test a request belongs to, or why none can be named."""

    test: str | None
    problem: str | None = None
    """Set when the request is ambiguous: what a refusal tells the developer."""


def encode_tests(tests: Collection[str]) -> str:
    """The `x-cassette-test` value for these tests (what the Node preload sends)."""
    return ",".join(quote(test, safe="") for test in tests)


def decode_tests(value: str) -> tuple[str, ...]:
    """An `x-cassette-test` value (or a baggage member's) → the test ids; blank parts are dropped."""
    return tuple(unquote(part.strip()) for part in value.split(",") if part.strip())


def without_member(baggage: str) -> tuple[str | None, str]:
    """A baggage header → (the cassette-test member's value or None, the header without that member).

    Members are `key=value;properties`, comma-separated (W3C Baggage); the value is percent-encoded.
    """
    found: str | None = None
    kept = []
    for member in baggage.split(","):
        name, sep, rest = member.partition("=")
        if sep and name.strip() == BAGGAGE_MEMBER:
            found = rest.split(";", 1)[0].strip()
        elif member.strip():
            kept.append(member.strip())
    return found, ",".join(kept)


def carried(header: str | None, baggage_member: str | None) -> Carried | None:
    """What the carriers say; `x-cassette-test` first (the Node preload's, closest to the test)."""
    if header is not None:
        return Carried(decode_tests(header), TEST_HEADER)
    if baggage_member is not None:
        return Carried(decode_tests(baggage_member), BAGGAGE_HEADER)
    return None


def attribute(carrier: Carried | None, running: Collection[str], runners: int) -> Attribution:
    """The test of one request, from its carrier, the tests running now and how many runners announced tests."""
    if carrier is not None:
        if len(carrier.tests) > 1:
            names = ", ".join(carrier.tests)
            return Attribution(
                None,
                f"its process ran {len(carrier.tests)} tests at once ({names}) and cannot say which one sent it "
                f"({carrier.via}); run that file's tests one at a time, or wrap each test in withTest() "
                "(docs/per-test.md)",
            )
        return Attribution(carrier.tests[0] if carrier.tests else None)
    if not running:
        return Attribution(None)
    if len(running) == 1 and runners <= 1:
        return Attribution(next(iter(running)))
    names = ", ".join(sorted(running))
    return Attribution(
        None,
        f"{len(running)} test(s) run now ({names}) from {runners} runners sharing this proxy, and the request carries "
        f"no {TEST_HEADER} header nor a {BAGGAGE_MEMBER} baggage member: a process started without the Node preload "
        "(NODE_OPTIONS), or a server that did not pass its incoming request's carrier on (docs/per-test.md)",
    )
