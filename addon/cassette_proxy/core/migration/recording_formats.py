"""Reading the recordings other tools write into one shape (`Recorded`): VCR.py / pytest-recording cassettes (and
cassetter's, which keep VCR's layout with bodies of their own), the `langchain_tests` layout, HAR 1.2; gzip'd or not.

Recordings arrive in pull requests, as cassettes do, and each is read whole into memory: so every cost is
bounded per file before it is paid. Its size and what it decompresses to (`MAX_RECORDING_BYTES`); YAML aliases,
which an 873-byte alias bomb expands to 10^10 nodes; nesting depth, since libyaml's C composer recurses
without a limit (a 50,000-deep flow sequence crashes the interpreter, it raises nothing). A file over a bound
is refused naming the bound, and the other files are read as usual.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from ..files.safe_read import DEFAULT_MAX_SIZE

FORMATS = ("vcr", "langchain", "har")

RECORDING_SUFFIXES = (".yaml", ".yml", ".json", ".har")
"""What a folder is searched for, each also gzip'd (`.yaml.gz`: langchain_tests' serializer)."""

MAX_RECORDING_BYTES = DEFAULT_MAX_SIZE
"""The largest recording read, compressed or once decompressed: the cassette size limit, since every interaction
of it could be one cassette."""
MAX_DEPTH = 100
"""Nesting levels a recording may have: a VCR cassette nests 5, a HAR 6, pydantic-ai's parsed bodies some more."""
MAX_ALIAS_NODES = 100_000
MAX_ALIAS_CHARS = 16 * 1024 * 1024
"""What YAML aliases may add to a document. PyYAML writes an anchor for an object dumped twice (a shared
headers dict): a few hundred nodes. A bomb adds billions."""

_GZIP_MAGIC = b"\x1f\x8b"


class UnreadableRecording(Exception):
    """A file that is not a recording we read, or one over a bound; the message names the file and what was expected."""


@dataclass(frozen=True)
class Recorded:
    """One request and its response as a foreign recording holds them, before any of our rules."""

    source: str
    """`<file>#<n>`: where it came from, 1-based, for the summary."""
    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    status: int
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes
    """As recorded: still compressed when the recording kept the `content-encoding` (VCR without
    `decode_compressed_response`)."""
    recorded_at: str | None = None
    receive_ms: float | None = None
    """HAR `timings.receive`: how long the body took to arrive, spread over a stream's events."""
    decoded: bool = False
    """The bodies are decoded whatever the headers say: HAR holds decoded text (`content.text`, `postData.text`)."""


@dataclass(frozen=True)
class Unusable:
    """An entry of a recording that cannot be imported, and why."""

    source: str
    reason: str
    invalid: bool = False
    """Broken or incomplete (needs a person), rather than left out on purpose (out of scope, a status not kept)."""


# Bytes to a document ---------------------------------------------------------------------------------------------

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
LIBYAML = _SafeLoader is not yaml.SafeLoader
"""PyYAML's wheels ship libyaml: its C parser reads YAML ~20× faster than the pure-Python one."""


def _limits_nesting() -> bool:
    """Whether this libyaml refuses deep nesting itself (newer wheels stop at 1000 levels; older ones recurse
    until the C stack overflows, which 1001 levels is far from)."""
    if not LIBYAML:
        return False
    try:
        yaml.load("[" * 1001 + "]" * 1001, Loader=_SafeLoader)
    except yaml.YAMLError:
        return True
    return False


class _VcrLoader(_SafeLoader):  # type: ignore[misc]
    """YAML's safe loader plus the harmless Python tags vcrpy itself writes and reads back.

    VCR cassettes arrive in pull requests: `!!python/object` and friends would run code, so any
    tag beyond these stays an error, as in vcrpy's own loader.
    """


def _construct_bytesio(loader: yaml.SafeLoader, node: yaml.MappingNode) -> bytes:
    mapping = loader.construct_mapping(node, deep=True)
    state = mapping.get("state") or (b"",)
    data = state[0] if state else b""
    return data.encode("utf-8") if isinstance(data, str) else bytes(data or b"")


_VcrLoader.add_constructor("tag:yaml.org,2002:python/str", lambda loader, node: loader.construct_scalar(node))
_VcrLoader.add_constructor("tag:yaml.org,2002:python/unicode", lambda loader, node: loader.construct_scalar(node))
_VcrLoader.add_constructor(
    "tag:yaml.org,2002:python/tuple", lambda loader, node: tuple(loader.construct_sequence(node))
)
_VcrLoader.add_constructor("tag:yaml.org,2002:python/object/new:_io.BytesIO", _construct_bytesio)
LIBYAML_LIMITS_NESTING = _limits_nesting()


class TooLarge(ValueError):
    """Data that decompresses past a limit."""


def inflate(data: bytes, wbits: int, limit: int = MAX_RECORDING_BYTES) -> bytes:
    """zlib, raw deflate or gzip data (`wbits` as zlib takes it; every gzip member) decompressed; TooLarge past
    `limit` bytes, zlib.error when it is not such data or is cut short."""
    chunks, size = [], 0
    while data:
        stream = zlib.decompressobj(wbits)
        while data:
            chunk = stream.decompress(data, limit + 1 - size)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"decompresses to more than {limit} bytes, the limit")
            data = stream.unconsumed_tail
            if stream.eof:
                break
        if not stream.eof:
            raise zlib.error("the compressed data is cut short")
        data = stream.unused_data
    return b"".join(chunks)


def load_document(raw: bytes, name: str) -> Any:
    """The JSON or YAML document a recording holds (gzip'd or not), within the bounds; UnreadableRecording else."""
    if len(raw) > MAX_RECORDING_BYTES:
        raise UnreadableRecording(f"{name}: {len(raw)} bytes, over the limit of {MAX_RECORDING_BYTES}")
    if raw.startswith(_GZIP_MAGIC):
        try:
            raw = inflate(raw, 16 + zlib.MAX_WBITS, MAX_RECORDING_BYTES)
        except TooLarge as e:
            raise UnreadableRecording(f"{name}: {e}") from None
        except zlib.error as e:
            raise UnreadableRecording(f"{name}: not a readable gzip file ({e})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UnreadableRecording(f"{name}: not UTF-8 text (byte {e.start}); VCR and HAR files are text") from None
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except RecursionError:
            raise UnreadableRecording(f"{name}: nests deeper than {MAX_DEPTH} levels, the limit") from None
        except ValueError:
            pass  # YAML's flow style starts so too
        else:
            _check_depth(data, name)
            return data
    try:
        if "&" in text or not LIBYAML_LIMITS_NESTING:
            _check_yaml_bounds(text, name)
            return yaml.load(text, Loader=_VcrLoader)  # a safe loader: vcrpy's harmless tags only
        # No `&`, no anchor, so no alias to expand; and this libyaml refuses deep nesting itself: the parse is safe,
        # and the depth is checked on what it gives (the langchain_tests files take this path: a third less time).
        try:
            data = yaml.load(text, Loader=_VcrLoader)
        except yaml.YAMLError:
            _check_yaml_bounds(text, name)  # libyaml's own nesting limit is ours, said so
            raise
        _check_depth(data, name)
        return data
    except yaml.YAMLError as e:
        problem = str(e).splitlines()[0]
        raise UnreadableRecording(f"{name}: neither JSON nor YAML a recording can hold ({problem})") from None


def _check_depth(data: Any, name: str) -> None:
    """Refuse a parsed JSON document nested deeper than MAX_DEPTH (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_DEPTH:
                    raise UnreadableRecording(f"{name}: nests deeper than {MAX_DEPTH} levels, the limit")
                stack.append((child, depth + 1))


_STARTS = (SequenceStartEvent, MappingStartEvent)
_ENDS = (SequenceEndEvent, MappingEndEvent)


def _check_yaml_bounds(text: str, name: str) -> None:
    """Refuse YAML nested deeper than MAX_DEPTH or whose aliases add more than MAX_ALIAS_NODES / MAX_ALIAS_CHARS,
    from its parse events (libyaml's parser keeps its own stack, so no input can crash it), before composing it.

    Sizes are kept only for anchored collections, so a file without anchors costs a depth count.
    """
    depth = 0
    anchored: list[list[Any]] = []  # [anchor, depth, nodes, chars] of the collections being read that carry an anchor
    sizes: dict[str | None, tuple[int, int]] = {}  # looked up by an alias's anchor, which the stubs allow to be None
    added_nodes = added_chars = 0
    for event in yaml.parse(text, Loader=_VcrLoader):
        if isinstance(event, ScalarEvent):
            if anchored or event.anchor:
                chars = len(event.value)
                if event.anchor:
                    sizes[event.anchor] = (1, chars)
                if anchored:
                    anchored[-1][2] += 1
                    anchored[-1][3] += chars
        elif isinstance(event, _STARTS):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnreadableRecording(f"{name}: nests deeper than {MAX_DEPTH} levels, the limit")
            if event.anchor:
                anchored.append([event.anchor, depth, 1, 0])
            elif anchored:
                anchored[-1][2] += 1
        elif isinstance(event, _ENDS):
            if anchored and anchored[-1][1] == depth:
                anchor, _, nodes, chars = anchored.pop()
                sizes[anchor] = (nodes, chars)
                if anchored:
                    anchored[-1][2] += nodes
                    anchored[-1][3] += chars
            depth -= 1
        elif isinstance(event, AliasEvent):
            nodes, chars = sizes.get(event.anchor, (1, 0))
            added_nodes += nodes
            added_chars += chars
            if added_nodes > MAX_ALIAS_NODES or added_chars > MAX_ALIAS_CHARS:
                raise UnreadableRecording(
                    f"{name}: its YAML aliases expand to more than {MAX_ALIAS_NODES} nodes or {MAX_ALIAS_CHARS} "
                    "characters, the limit (an alias bomb?)"
                )
            if anchored:
                anchored[-1][2] += nodes
                anchored[-1][3] += chars


# A document to entries -------------------------------------------------------------------------------------------


def detect_format(data: Any) -> str | None:
    """`har` for `{"log": {"entries": …}}`, `vcr` for `{"interactions": …}`, `langchain` for `{"requests": …,
    "responses": …}` (langchain_tests' serializer dumps VCR's own lists), else None."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("log"), dict) and "entries" in data["log"]:
        return "har"
    if "interactions" in data:
        return "vcr"
    if "requests" in data and "responses" in data:
        return "langchain"
    return None


_EXPECTED = {
    "vcr": 'a VCR cassette ("interactions": [...])',
    "langchain": 'a langchain_tests cassette ("requests": [...], "responses": [...])',
    "har": 'a HAR file ("log": {"entries": [...]})',
}


def read_recording(raw: bytes, name: str, kind: str = "auto") -> tuple[str, list[Recorded | Unusable]]:
    """The format and the entries of one file; raises UnreadableRecording when it is none of the formats."""
    data = load_document(raw, name)
    found = detect_format(data)
    if found is None or (kind != "auto" and kind != found):
        wanted = _EXPECTED[kind] if kind in _EXPECTED else " or ".join(_EXPECTED.values())
        raise UnreadableRecording(f"{name}: not {wanted}" + (f" (it looks like {found})" if found else ""))
    readers = {"vcr": read_vcr, "langchain": read_langchain, "har": read_har}
    return found, readers[found](data, name)


def read_vcr(data: dict[str, Any], name: str) -> list[Recorded | Unusable]:
    """VCR.py / pytest-recording: `interactions: [{request: {method, uri, headers, body}, response: {...}}]`."""
    interactions = data.get("interactions")
    if not isinstance(interactions, list):
        raise UnreadableRecording(f"{name}: `interactions` is not a list")
    return [_entry(_vcr_interaction, f"{name}#{n}", item) for n, item in enumerate(interactions, 1)]


def read_langchain(data: dict[str, Any], name: str) -> list[Recorded | Unusable]:
    """langchain_tests' `CustomSerializer`: VCR's `requests` and `responses` lists side by side, paired by index."""
    requests, responses = data.get("requests"), data.get("responses")
    if not isinstance(requests, list) or not isinstance(responses, list):
        raise UnreadableRecording(f"{name}: `requests` and `responses` are not lists")
    out = [
        _entry(_vcr_interaction, f"{name}#{n}", {"request": request, "response": response})
        for n, (request, response) in enumerate(zip(requests, responses, strict=False), 1)
    ]
    for n in range(min(len(requests), len(responses)) + 1, max(len(requests), len(responses)) + 1):
        missing = "response" if n > len(responses) else "request"
        out.append(Unusable(f"{name}#{n}", f"no {missing} is recorded for it (the lists differ in length)", True))
    return out


def _entry(read: Callable[[Any, str], Recorded | Unusable], source: str, item: Any) -> Recorded | Unusable:
    try:
        return read(item, source)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # binascii.Error is a ValueError
        kind = "HAR entry" if read is _har_entry else "VCR interaction"
        return Unusable(source, f"not a {kind} ({type(e).__name__}: {e})", invalid=True)


def _vcr_interaction(interaction: dict[str, Any], source: str) -> Recorded:
    request, response = interaction["request"], interaction["response"]
    if _typed(request.get("body")) or _typed(response.get("body")) or type(response.get("status")) is int:
        return _cassetter_interaction(interaction, source)
    if "status_code" in response:
        # vcrpy before 6 recorded httpx responses in a shape of their own.
        status, body = response["status_code"], response.get("content")
    else:
        status = response["status"]["code"]
        body = response["body"].get("string") if isinstance(response.get("body"), dict) else response.get("body")
    if "parsed_body" in response:  # pydantic-ai's serializer stores JSON bodies parsed
        body = json.dumps(response["parsed_body"])
    request_body = json.dumps(request["parsed_body"]) if "parsed_body" in request else request.get("body")
    return _recorded(source, (request, response), (_vcr_bytes(request_body), _vcr_bytes(body)), status)


def _recorded(
    source: str, exchange: tuple[dict[str, Any], dict[str, Any]], bodies: tuple[bytes, bytes], status: Any, **extra: Any
) -> Recorded:
    """One interaction of a VCR-layout file (VCR.py's or cassetter's), once its bodies and status are read; `extra`:
    `decoded`, and `recorded_at` when the file says it (else the response's `Date`)."""
    request, response_headers = exchange[0], _vcr_headers(exchange[1].get("headers"))
    return Recorded(
        source=source,
        method=_text(request["method"], "method"),
        url=_text(request["uri"], "uri"),
        request_headers=_vcr_headers(request.get("headers")),
        request_body=bodies[0],
        status=_status(status),
        response_headers=response_headers,
        response_body=bodies[1],
        **{**extra, "recorded_at": extra.get("recorded_at") or _http_date(response_headers)},
    )


def _typed(body: Any) -> bool:
    return isinstance(body, dict) and "type" in body and "string" not in body


_CASSETTER_TYPES = ("json", "text", "binary", "none")


def _cassetter_interaction(interaction: dict[str, Any], source: str) -> Recorded:
    """cassetter (pydantic-ai's recorder since 2026; VCR's layout, its own bodies): `status` is the number,
    each body is `{type: json | text | binary | none, content}` (json parsed, binary as hex), stored decoded
    (it drops the `content-encoding` it undid), and each interaction has its `recorded_at`."""
    request, response = interaction["request"], interaction["response"]
    status = response["status"]
    if isinstance(status, dict):  # a VCR status inside a typed-body file: read it as VCR writes it
        status = status["code"]
    bodies = _typed_bytes(request.get("body")), _typed_bytes(response.get("body"))
    return _recorded(
        source, (request, response), bodies, status, recorded_at=_when(interaction.get("recorded_at")), decoded=True
    )


def _typed_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if not _typed(body):
        return _vcr_bytes(body)
    kind, content = body["type"], body.get("content")
    if kind not in _CASSETTER_TYPES:
        raise ValueError(f"a body of type {kind!r}, not one of {', '.join(_CASSETTER_TYPES)}")
    if kind == "none" or content is None:
        return b""
    if kind == "json":
        return json.dumps(content, ensure_ascii=False).encode("utf-8")
    if kind == "binary":
        return bytes.fromhex(_text(content, "binary body"))  # whitespace (a folded YAML line) is skipped
    return _text(content, "text body").encode("utf-8")


def _when(value: Any) -> str | None:
    """`recorded_at` as cassetter writes it: an ISO time, which a YAML loader may already have made a datetime."""
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, str):
        try:
            return _iso(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"its {what} is {type(value).__name__}, not a string")
    return value


def _status(value: Any) -> int:
    """A status as recorded: an integer (or its digits); whether it is an HTTP status is checked on conversion."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"its status is {value!r}, not a number")
    return int(value)


def _vcr_headers(headers: Any) -> tuple[tuple[str, str], ...]:
    """VCR keeps `{name: [values]}` (older cassettes: a single string)."""
    if not headers:
        return ()
    pairs = []
    for name, values in headers.items():
        name = name if type(name) is str else str(name)
        for value in values if isinstance(values, list | tuple) else [values]:
            pairs.append((name, value if type(value) is str else str(value)))
    return tuple(pairs)


def _vcr_bytes(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body  # `!!binary`: the bytes as they went over the wire, compressed or not
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, dict) and "string" in body:
        return _vcr_bytes(body["string"])
    raise TypeError(f"a body of type {type(body).__name__}")


def _http_date(headers: Iterable[tuple[str, str]]) -> str | None:
    """The response's Date header as an ISO time: when VCR recorded it, since VCR itself writes no time."""
    for name, value in headers:
        if name.lower() == "date":
            try:
                return _iso(parsedate_to_datetime(value))
            except (TypeError, ValueError, IndexError):
                return None
    return None


def _iso(when: datetime) -> str:
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def read_har(data: dict[str, Any], name: str) -> list[Recorded | Unusable]:
    """HAR 1.2 (Polly.js, browser devtools, mitmproxy's `hardump`): `log.entries[]`."""
    entries = data["log"].get("entries")
    if not isinstance(entries, list):
        raise UnreadableRecording(f"{name}: `log.entries` is not a list")
    return [_entry(_har_entry, f"{name}#{n}", entry) for n, entry in enumerate(entries, 1)]


def _har_entry(entry: dict[str, Any], source: str) -> Recorded | Unusable:
    request, response = entry["request"], entry["response"]
    status = _status(response.get("status") or 0)
    if status == 0:
        return Unusable(source, "no response was recorded (status 0: the request failed or was cancelled)")
    post = request.get("postData") or {}
    if "text" in post:
        request_body = _har_text(post.get("text"), post.get("encoding"))
    elif post.get("params"):
        request_body = urlencode([(p["name"], p.get("value", "")) for p in post["params"]]).encode()
    else:
        request_body = b""
    content = response.get("content") or {}
    if "text" not in content and (content.get("size") or 0) > 0:
        return Unusable(
            source, "the HAR holds no response body (`content.text` missing; export with bodies)", invalid=True
        )
    timings = entry.get("timings") or {}
    receive = timings.get("receive")
    response_headers = _har_headers(response.get("headers"))
    return Recorded(
        source=source,
        method=_text(request["method"], "method"),
        url=_text(request["url"], "url"),
        request_headers=_har_headers(request.get("headers")),
        request_body=request_body,
        status=status,
        response_headers=response_headers,
        response_body=_har_text(content.get("text"), content.get("encoding")),
        recorded_at=_har_time(entry.get("startedDateTime")) or _http_date(response_headers),
        receive_ms=float(receive) if isinstance(receive, int | float) and receive > 0 else None,
        decoded=True,
    )


def _har_time(started: Any) -> str | None:
    """`startedDateTime` (ISO 8601) as our `recorded_at`; None when absent or not a time."""
    try:
        return _iso(datetime.fromisoformat(str(started).replace("Z", "+00:00"))) if started else None
    except ValueError:
        return None


def _har_headers(headers: Any) -> tuple[tuple[str, str], ...]:
    # HTTP/2 pseudo-headers (`:authority`, browsers list them) are not headers a proxy sees.
    return tuple((str(h["name"]), str(h["value"])) for h in headers or () if not str(h["name"]).startswith(":"))


def _har_text(text: Any, encoding: Any) -> bytes:
    if text is None:
        return b""
    if encoding == "base64":
        return base64.b64decode(text, validate=True)
    return str(text).encode("utf-8")
