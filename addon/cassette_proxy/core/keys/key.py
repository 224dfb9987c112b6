"""The request's identity: what makes two requests "the same" for replay.

The recipe is documented in docs/key.md so that another tool can
compute the same key; change it only together with that page and the
cassette format version.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..fast_json import encoder
from .body import multipart_parts, parse_json_for_key, without_paths
from .url import public_url
from .volatile import Replaced, ValuePattern, could_match, with_placeholders

RECIPE_VERSION = 2
"""The key recipe documented in docs/key.md; stored with every cassette (`keyed_with.recipe`).

2: numbers keyed by value, set-valued headers keyed as sets, value patterns. A request with no number
written with a fraction or exponent, no anthropic-beta/openai-beta header and no value pattern match
keeps its recipe-1 key.
"""

SET_VALUED_HEADERS = frozenset({"anthropic-beta", "openai-beta"})
"""Comma-separated headers the APIs read as a set of flags: order, spacing and repeats do not change a request."""


CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"}
)
"""Headers that carry a credential, in either direction."""

SIGV4_HEADERS = frozenset({"x-amz-date", "x-amz-security-token", "x-amz-content-sha256"})
"""AWS SigV4: the signature's timestamp, the session token, the signed body hash: new on every request."""

UNKEYABLE_HEADERS = CREDENTIAL_HEADERS | SIGV4_HEADERS
"""Request headers that carry a credential or change on every request: never keyed, so never stored
(a request stores only its key headers)."""


class RequestFacts(NamedTuple):
    """What the key is computed from, independent of mitmproxy's flow objects.

    A named tuple, not a frozen dataclass: one is built for every request, and
    building a named tuple costs a fifth as much.
    """

    method: str
    scheme: str
    host: str
    port: int
    path: str
    query: Sequence[tuple[str, str]]
    headers: Mapping[str, str]
    body: bytes
    content_type: str = ""


ExactFacts = tuple[str, str, str, int, str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], bytes, str]
"""The facts as one hashable value (`exact_facts`): what the key cache is indexed by."""


def header_key_value(name: str, value: str) -> str | list[str]:
    """A key header's value as keyed: stripped; a set-valued one as its sorted, distinct, trimmed items."""
    if name in SET_VALUED_HEADERS:
        return sorted({item.strip() for item in value.split(",") if item.strip()})
    return value.strip()


def canonical_body(
    body: bytes,
    content_type: str,
    ignore: Sequence[Sequence[str]] = (),
    values: Sequence[ValuePattern] = (),
    replaced: list[Replaced] | None = None,
) -> Any:
    """The body as the key sees it: parsed JSON, multipart parts, or a digest of the bytes; `replaced`, when given,
    gets the values the patterns replaced (`volatile.with_placeholders`).

    JSON is recognised by parsing, not by content type, because SDKs and users
    are careless with the header and the key must not depend on it.
    """
    if not body:
        return None
    is_json, value = parse_json_for_key(body)
    if is_json:
        return {"json": with_placeholders(without_paths(value, ignore), values, body, replaced)}
    if content_type.lower().startswith("multipart/"):
        parts = multipart_parts(body, content_type)
        if parts is not None:
            return {"multipart": parts}
    return {"sha256": hashlib.sha256(body).hexdigest()}


def preset_values(
    facts: RequestFacts, ignore: Sequence[Sequence[str]] = (), values: Sequence[ValuePattern] = ()
) -> tuple[Replaced, ...]:
    """The values the framework presets among `values` replace in the body, as the key sees it (ignored paths
    left out): where, by which preset. What the run report, a miss and `cassette show` name."""
    presets = [pattern for pattern in values if pattern.preset]
    if not presets or not could_match(facts.body, presets):
        return ()
    is_json, value = parse_json_for_key(facts.body)
    if not is_json:
        return ()
    replaced: list[Replaced] = []
    with_placeholders(without_paths(value, ignore), values, None, replaced)
    return tuple(r for r in replaced if r.preset)


_REPEATED_SLASHES = re.compile(r"/{2,}")
"""Empty path segments: an SDK that joins a base URL ending in `/` to a path starting with one sends `//`."""


def identity(
    facts: RequestFacts,
    key_headers: Iterable[str] = (),
    ignore: Sequence[Sequence[str]] = (),
    values: Sequence[ValuePattern] = (),
    replaced: list[Replaced] | None = None,
) -> dict[str, Any]:
    """The JSON object whose hash is the key (documented in docs/key.md); `replaced`: see `canonical_body`."""
    lowered = {name.lower(): value for name, value in facts.headers.items()}
    if "//" in facts.path:  # `//ws/…` and `/ws/…`: one request, as the endpoint folder has it (location.py)
        facts = facts._replace(path=_REPEATED_SLASHES.sub("/", facts.path))
    return {
        "method": facts.method.upper(),
        "url": public_url(facts),
        "headers": {
            name: header_key_value(name, lowered[name])
            for name in sorted(h.lower() for h in key_headers)
            if name in lowered
        },
        "body": canonical_body(facts.body, facts.content_type, ignore, values, replaced),
    }


_canonical = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def key_of(ident: dict[str, Any]) -> str:
    """The first 32 hex characters of the SHA-256 of the identity's canonical JSON."""
    canonical = _canonical(ident)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def request_key(
    facts: RequestFacts,
    key_headers: Iterable[str] = (),
    ignore: Sequence[Sequence[str]] = (),
    values: Sequence[ValuePattern] = (),
) -> str:
    return key_of(identity(facts, key_headers, ignore, values))


def keyed(
    facts: RequestFacts,
    key_headers: Iterable[str] = (),
    ignore: Sequence[Sequence[str]] = (),
    values: Sequence[ValuePattern] = (),
) -> tuple[str, tuple[Replaced, ...]]:
    """`request_key` and `preset_values` from one parse and one walk of the body: the presets' replacements are
    recorded by the walk that makes the key, only when a preset is among `values` and could match the body."""
    presets = [pattern for pattern in values if pattern.preset]
    if not presets or not could_match(facts.body, presets):
        return request_key(facts, key_headers, ignore, values), ()
    replaced: list[Replaced] = []
    key = key_of(identity(facts, key_headers, ignore, values, replaced))
    return key, tuple(r for r in replaced if r.preset)


KEY_CACHE_SIZE = 1024
"""Keys kept for requests this run has seen, beyond those the preload computes for its cassettes."""


class KeyCache:
    """The keys of requests this run has already seen, by their exact facts, with what the presets replaced.

    Canonical JSON (parse the body, dump it with sorted keys) is the largest
    part of a hit that is ours, and a suite sends many requests more than
    once: a fixture per test, parametrised tests, retries. The same facts
    always give the same key, so the cache is exact; it holds at most `size`
    entries, and none for a body above `max_body` bytes. Each entry also holds
    the values the framework presets replaced in that request (`preset_values`,
    for the run report), found by the same walk as the key (`keyed`), so a
    request's body is parsed once and a hit on a kept entry parses nothing.
    """

    def __init__(
        self,
        key_headers: Iterable[str],
        ignore: tuple[tuple[str, ...], ...],
        values: Sequence[ValuePattern] = (),
        size: int = KEY_CACHE_SIZE,
        max_body: int = 65536,
    ) -> None:
        self.key_headers = tuple(key_headers)
        self.ignore = ignore
        self.values = values
        self.size = size
        self.max_body = max_body
        self._keys: dict[ExactFacts, tuple[str, tuple[Replaced, ...] | None]] = {}
        """Facts -> (key, preset values); None: not looked for yet (a key the preload sent without them)."""
        self._presets = tuple(pattern for pattern in values if pattern.preset)

    def keyed(self, facts: RequestFacts) -> tuple[str, tuple[Replaced, ...]]:
        """The key of `facts` and the values the framework presets replaced in it (`key.keyed`)."""
        if len(facts.body) > self.max_body:
            return keyed(facts, self.key_headers, self.ignore, self.values)
        exact = exact_facts(facts)
        found = self._keys.get(exact)
        if found is None:
            key, replaced = keyed(facts, self.key_headers, self.ignore, self.values)
            self._keep(exact, key, replaced)
            return key, replaced
        key, presets = found
        if presets is None:  # preloaded: the presets are looked for on the request's first sight, then kept
            presets = preset_values(facts, self.ignore, self.values) if self._could_match(facts.body) else ()
            self._keys[exact] = (key, presets)
        return key, presets

    def key(self, facts: RequestFacts) -> str:
        return self.keyed(facts)[0]

    def _could_match(self, body: bytes) -> bool:
        return bool(self._presets) and could_match(body, self._presets)

    def remember(self, exact: ExactFacts, key: str, presets: tuple[Replaced, ...] | None = None) -> None:
        """Keep `key` for the facts `exact` (`exact_facts`), which must be what this cache's recipe keys them to:
        the preload sends the facts an SDK would send for each cassette, keyed by the same function, with the
        values the presets replaced in them (`presets`; None: not known, looked for on the first request)."""
        if exact not in self._keys:
            self._keep(exact, key, presets)

    def _keep(self, exact: ExactFacts, key: str, presets: tuple[Replaced, ...] | None) -> None:
        if len(self._keys) >= self.size:
            del self._keys[next(iter(self._keys))]
        self._keys[exact] = (key, presets)


def exact_facts(facts: RequestFacts) -> ExactFacts:
    """The facts as one hashable value; headers sorted by name (the key does not depend on their order)."""
    return (facts.method, facts.scheme, facts.host, facts.port, facts.path, tuple(facts.query),
            tuple(sorted(facts.headers.items())), facts.body, facts.content_type)  # fmt: skip
