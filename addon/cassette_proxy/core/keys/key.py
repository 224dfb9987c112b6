"""The request's identity: what makes two requests "the same" for replay.

The recipe is documented in docs/key.md so that another tool can
compute the same key; change it only together with that page and the
cassette format version.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, NamedTuple
from urllib.parse import quote_plus, urlencode

from ..fast_json import decoder, encoder
from .volatile import Replaced, ValuePattern, could_match, with_placeholders

RECIPE_VERSION = 2
"""The key recipe documented in docs/key.md; stored with every cassette (`keyed_with.recipe`).

2: numbers keyed by value, set-valued headers keyed as sets, value patterns. A request with no number
written with a fraction or exponent, no anthropic-beta/openai-beta header and no value pattern match
keeps its recipe-1 key.
"""

SET_VALUED_HEADERS = frozenset({"anthropic-beta", "openai-beta"})
"""Comma-separated headers the APIs read as a set of flags: order, spacing and repeats do not change a request."""

KNOWN_SCALARS = frozenset(
    {"model", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "stream", "n", "seed",
     "presence_penalty", "frequency_penalty", "user"}
)  # fmt: skip
"""Top-level request fields that are a string, number or boolean in every LLM API: a path into one can never match."""

SECRET_QUERY_PARAMS = frozenset(
    {
        # API keys and OAuth tokens (Gemini's `?key=`, Firebase's `?auth=`)
        "key", "api_key", "api-key", "apikey", "x-api-key", "auth", "access_token", "refresh_token", "id_token",
        "token", "session_token", "security_token", "client_secret", "password", "passwd", "secret",
        # AWS SigV4 presigned URLs; the date and expiry change at every signing, so they cannot be keyed either
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-amz-date", "x-amz-expires",
        "x-amz-algorithm", "x-amz-signedheaders",
        # Google Cloud Storage V4 signed URLs
        "x-goog-signature", "x-goog-credential", "x-goog-date", "x-goog-expires", "x-goog-algorithm",
        "x-goog-signedheaders",
        # S3/GCS V2 signed URLs (`AWSAccessKeyId`, `GoogleAccessId`, `Signature`) and CloudFront's `Key-Pair-Id`
        "signature", "awsaccesskeyid", "googleaccessid", "key-pair-id",
        # Azure SAS signature
        "sig",
    }
)  # fmt: skip
"""Query parameters that carry credentials or a signature's moving parts: never keyed, never stored, never logged.
Compared in lower case."""

SAS_QUERY_PARAMS = frozenset(
    {"sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sip", "skoid", "sktid", "skt", "ske", "sks", "skv", "sdd"}
)
"""The fields of an Azure shared access signature: dropped with `sig`, and only when `sig` is there, because
outside a SAS URL a parameter named `sp` or `st` is an ordinary one that must count."""

CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie"}
)
"""Headers that carry a credential, in either direction."""

SIGV4_HEADERS = frozenset({"x-amz-date", "x-amz-security-token", "x-amz-content-sha256"})
"""AWS SigV4: the signature's timestamp, the session token, the signed body hash: new on every request."""

UNKEYABLE_HEADERS = CREDENTIAL_HEADERS | SIGV4_HEADERS
"""Request headers that carry a credential or change on every request: never keyed, so never stored
(a request stores only its key headers)."""

DEFAULT_PORTS = {"http": 80, "https": 443, "stdio": 0}
"""`stdio`: an MCP server over stdio (core/sessions/mcp_stdio.py), `stdio://<server name>/`, which has no port."""


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


def normal_host(host: str) -> str:
    """The host as DNS sees it: lower case, no trailing dot, IDNA (`bücher.example` → `xn--bcher-kva.example`).

    `API.OpenAI.com.` names the same machine as `api.openai.com`, so both must
    fall in the same scope and get the same key. Never raises: a name IDNA
    refuses (an empty label, a label over 63 characters) stays as it was,
    lower-cased.
    """
    host = host.strip().lower()
    if host.endswith(".") and not host.startswith("["):
        host = host.rstrip(".") or host
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    return host


def origin(scheme: str, host: str, port: int) -> str:
    """`scheme://host[:port]` with the default port left out, so forward and reverse mode agree."""
    host = normal_host(host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    if DEFAULT_PORTS.get(scheme) == port:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_KEPT_ESCAPED = frozenset("/?#%")
"""Escapes that change a path's meaning when undone: a segment separator, the query and fragment marks, `%`."""


def canonical_path(path: str) -> str:
    """The path as an API reads it: `%3A` and `:` are the same request (a Bedrock model id in the path).

    Escapes of printable ASCII are undone, except `/`, `?`, `#` and `%`,
    whose escaped and plain forms differ; the escapes kept (and those of
    spaces, controls and non-ASCII bytes) get upper-case hex, as RFC 3986
    normalises them.
    """
    if "%" not in path:
        return path
    return _ESCAPE.sub(_unescape, path)


def _unescape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if "!" <= char <= "~" and char not in _KEPT_ESCAPED else "%" + match.group(1).upper()


def public_query(query: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The query parameters without credentials, sorted so their order never matters."""
    query = list(query)
    secret = (
        SECRET_QUERY_PARAMS | SAS_QUERY_PARAMS if any(k.lower() == "sig" for k, _ in query) else SECRET_QUERY_PARAMS
    )
    return sorted((k, v) for k, v in query if k.lower() not in secret)


def raw_bytes(text: str) -> bytes:
    """The bytes a decoded request value came from: mitmproxy decodes what is not UTF-8 with `surrogateescape`
    (`%ff` → `\\udcff`); any other lone surrogate is kept as its UTF-8 form (`surrogatepass`). Never raises."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _quote(text: str | bytes, safe: str | bytes = "", encoding: str | None = None, errors: str | None = None) -> str:
    """`quote_plus` of a value's raw bytes, so a query that is not UTF-8 is shown (and keyed) percent-escaped."""
    return quote_plus(raw_bytes(text) if isinstance(text, str) else text, safe)


def public_url(facts: RequestFacts) -> str:
    """The request URL as stored and shown: origin, path, and the query without secrets."""
    url = origin(facts.scheme, facts.host, facts.port) + facts.path
    query = public_query(facts.query)
    return f"{url}?{urlencode(query, quote_via=_quote)}" if query else url


def parse_ignore_paths(spec: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """Turn `metadata.trace_id`, `messages.*.id`, `messages.0.name` into tuples of path parts.

    A path that can never match anything is refused rather than silently ignoring nothing.
    """
    paths = []
    for raw in spec:
        parts = tuple(raw.strip().split("."))
        if not raw.strip() or any(not p for p in parts):
            raise ValueError(
                f"invalid ignore path {raw!r}: an empty segment; use dotted field names, "
                "a number for one list item and `*` for every item (messages.0.name, messages.*.id)"
            )
        for part in parts:
            if "[" in part or "]" in part:
                raise ValueError(f"invalid ignore path {raw!r}: write list items as segments, e.g. messages.0.name")
            if "*" in part and part != "*":
                raise ValueError(f"invalid ignore path {raw!r}: `*` stands for a whole segment, not part of a name")
            if part.startswith("-") and part[1:].isdigit():
                raise ValueError(
                    f"invalid ignore path {raw!r}: list indexes count from 0; negative ones are not supported"
                )
        if len(parts) > 1 and parts[0] in KNOWN_SCALARS:
            raise ValueError(
                f"invalid ignore path {raw!r}: `{parts[0]}` is never an object or list; ignore `{parts[0]}`"
            )
        if len(parts) > 3 and parts[0] == "messages" and parts[2] == "role":
            raise ValueError(f"invalid ignore path {raw!r}: a message's `role` is always a string")
        paths.append(parts)
    return tuple(paths)


def without_paths(value: Any, paths: Iterable[Sequence[str]]) -> Any:
    """A copy of a parsed JSON value with the given dotted paths removed."""
    for path in paths:
        value = _without(value, path)
    return value


def _without(value: Any, path: Sequence[str]) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        names = list(value) if head == "*" else [head] if head in value else []
        out = dict(value)
        for name in names:
            if rest:
                out[name] = _without(value[name], rest)
            else:
                del out[name]
        return out
    if isinstance(value, list) and head == "*":
        return [_without(item, rest) for item in value] if rest else []
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        # An ignored item becomes null rather than leaving the list, so the indexes of the others,
        # and of other ignore paths, stay what the user wrote.
        index = int(head)
        return [*value[:index], _without(value[index], rest) if rest else None, *value[index + 1 :]]
    return value


def canonical_number(text: str) -> int | float:
    """A JSON number written with a fraction or exponent, as the key sees it (`parse_float`).

    Clients write the same number differently (Python `1.0`, JavaScript `1`, `1e2`),
    and an API reads them alike. Such a number is the double it denotes; a whole
    double keys as that integer (`1.0`, `1e2`, `100.00` → `100`), any other as the
    double, which the encoder writes in its shortest round-trip form (`0.50`,
    `5e-1` → `0.5`), so numbers that differ as doubles keep different keys.
    Integers written as integers are keyed exactly, however large.
    """
    value = float(text)
    return int(value) if value.is_integer() else value


_loads_for_key = decoder(parse_float=canonical_number)


def parse_json_for_key(body: bytes) -> tuple[bool, Any]:
    """`parse_json_body` with numbers canonical (see `canonical_number`); never raises."""
    if not body:
        return False, None
    try:
        return True, _loads_for_key(body)
    except (ValueError, RecursionError):
        return False, None


def header_key_value(name: str, value: str) -> str | list[str]:
    """A key header's value as keyed: stripped; a set-valued one as its sorted, distinct, trimmed items."""
    if name in SET_VALUED_HEADERS:
        return sorted({item.strip() for item in value.split(",") if item.strip()})
    return value.strip()


def parse_json_body(body: bytes) -> tuple[bool, Any]:
    """(True, value) when the body is JSON text, else (False, None); never raises."""
    if not body:
        return False, None
    try:
        return True, json.loads(body)
    except (ValueError, RecursionError):
        return False, None


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


def multipart_parts(body: bytes, content_type: str) -> list[dict[str, str]] | None:
    """The parts of a multipart body without the random boundary, or None if it does not parse.

    The content type is given back its raw bytes (a `0xff` in it arrives as
    `\\udcff`). The `email` package raises a variety of errors on malformed
    input; any of them means "does not parse", and the caller keys the body's bytes.
    """
    try:
        message = BytesParser(policy=HTTP).parsebytes(
            b"content-type: " + raw_bytes(content_type).replace(b"\r", b"").replace(b"\n", b"") + b"\r\n\r\n" + body
        )
        if not message.is_multipart():
            return None
        parts = []
        for part in message.iter_parts():
            payload = part.get_payload(decode=True)  # decoded: bytes, or None for a part that is itself multipart
            parts.append(
                {
                    "name": str(part.get_param("name", header="content-disposition") or ""),
                    "filename": part.get_filename() or "",
                    "content_type": part.get_content_type(),
                    "sha256": hashlib.sha256(payload if isinstance(payload, bytes) else b"").hexdigest(),
                }
            )
    except Exception:  # see the docstring: a body we cannot parse is keyed by its bytes
        return None
    return parts


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
