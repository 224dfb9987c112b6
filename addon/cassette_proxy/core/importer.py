"""Conversion of VCR.py / pytest-recording cassettes and HAR 1.2 files into cassettes of our own.

A team adopting the proxy should not have to re-record against the live API
(money, time, and impossible for a retired model). The conversion is
mechanical, so it must also be exact: an imported request gets the key the
proxy computes for the same request on the wire, and its file is written as a
recording would write it (the same request facts, body forms, stored headers,
stream events and redaction). Pure: no mitmproxy import, so the `cassette`
command runs it in any environment.
"""

from __future__ import annotations

import base64
import fnmatch
import gzip
import io
import json
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import yaml

from .. import __version__
from . import redact
from .atomic_write import write_atomic
from .cassette_file import body_fields, dumps, events_fields, new_cassette, stored_headers
from .defaults import DEFAULT_HOSTS, DEFAULT_KEY_HEADERS
from .key import DEFAULT_PORTS, RequestFacts, identity, key_of, parse_ignore_paths, public_url
from .location import relative_name, repeat_path
from .recipe import stored_request
from .redact import Rule
from .stream_events import split_events, stream_kind

FORMATS = ("vcr", "har")

UNDATED = "1970-01-01T00:00:00+00:00"
"""`recorded_at` of an interaction whose recording says nothing of its time (VCR stores none, and a response
may lack a Date header). A fixed value keeps a re-import byte-identical; the epoch makes `cassette stale`
list it, which is the honest answer to "how old is this?"."""

RECORDING_SUFFIXES = (".yaml", ".yml", ".json", ".har")


class UnreadableRecording(Exception):
    """A file that is not a VCR cassette or a HAR file; the message says what was expected."""


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
    """Broken or incomplete (needs a person), rather than left out on purpose (out of scope, an error status)."""


# Reading the formats ---------------------------------------------------------------------------


class _VcrLoader(yaml.SafeLoader):
    """YAML's safe loader plus the harmless Python tags vcrpy itself writes and reads back.

    VCR cassettes arrive in pull requests: `!!python/object` and friends would run code, so any
    tag beyond these stays an error, as in vcrpy's own loader.
    """


def _construct_bytesio(loader: yaml.SafeLoader, node: yaml.Node) -> bytes:
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


def detect_format(data: Any) -> str | None:
    """`har` for `{"log": {"entries": …}}`, `vcr` for `{"interactions": …}`, else None."""
    if isinstance(data, dict) and isinstance(data.get("log"), dict) and "entries" in data["log"]:
        return "har"
    if isinstance(data, dict) and "interactions" in data:
        return "vcr"
    return None


def read_recording(raw: bytes, name: str, kind: str = "auto") -> tuple[str, list[Recorded | Unusable]]:
    """The format and the entries of one file; raises UnreadableRecording when it is neither format."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UnreadableRecording(f"{name}: not UTF-8 text (byte {e.start}); VCR and HAR files are text") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = yaml.load(text, Loader=_VcrLoader)  # a safe loader: vcrpy's harmless tags only
        except yaml.YAMLError as e:
            problem = str(e).splitlines()[0]
            raise UnreadableRecording(f"{name}: neither JSON nor YAML a VCR cassette can hold ({problem})") from None
    found = detect_format(data)
    if found is None or (kind != "auto" and kind != found):
        expected = {"vcr": 'a VCR cassette ("interactions": [...])', "har": 'a HAR file ("log": {"entries": [...]})'}
        wanted = expected[kind] if kind in expected else " or ".join(expected.values())
        raise UnreadableRecording(f"{name}: not {wanted}" + (f" (it looks like {found})" if found else ""))
    entries = read_vcr(data, name) if found == "vcr" else read_har(data, name)
    return found, entries


def read_vcr(data: dict, name: str) -> list[Recorded | Unusable]:
    """VCR.py / pytest-recording: `interactions: [{request: {method, uri, headers, body}, response: {...}}]`."""
    interactions = data.get("interactions")
    if not isinstance(interactions, list):
        raise UnreadableRecording(f"{name}: `interactions` is not a list")
    out: list[Recorded | Unusable] = []
    for n, interaction in enumerate(interactions, 1):
        source = f"{name}#{n}"
        try:
            out.append(_vcr_interaction(interaction, source))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            out.append(Unusable(source, f"not a VCR interaction ({type(e).__name__}: {e})", invalid=True))
    return out


def _vcr_interaction(interaction: dict, source: str) -> Recorded:
    request, response = interaction["request"], interaction["response"]
    if "status_code" in response:
        # vcrpy before 6 recorded httpx responses in a shape of their own.
        status, body = response["status_code"], response.get("content")
    else:
        status = response["status"]["code"]
        body = response["body"].get("string") if isinstance(response.get("body"), dict) else response.get("body")
    if "parsed_body" in response:  # pydantic-ai's serializer stores JSON bodies parsed
        body = json.dumps(response["parsed_body"])
    request_body = json.dumps(request["parsed_body"]) if "parsed_body" in request else request.get("body")
    response_headers = _vcr_headers(response.get("headers"))
    return Recorded(
        source=source,
        method=str(request["method"]),
        url=str(request["uri"]),
        request_headers=_vcr_headers(request.get("headers")),
        request_body=_vcr_bytes(request_body),
        status=int(status),
        response_headers=response_headers,
        response_body=_vcr_bytes(body),
        recorded_at=_http_date(response_headers),
    )


def _vcr_headers(headers: Any) -> tuple[tuple[str, str], ...]:
    """VCR keeps `{name: [values]}` (older cassettes: a single string)."""
    if not headers:
        return ()
    pairs = []
    for name, values in headers.items():
        for value in values if isinstance(values, list | tuple) else [values]:
            pairs.append((str(name), str(value)))
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


def read_har(data: dict, name: str) -> list[Recorded | Unusable]:
    """HAR 1.2 (Polly.js, browser devtools, mitmproxy's `hardump`): `log.entries[]`."""
    entries = data["log"].get("entries")
    if not isinstance(entries, list):
        raise UnreadableRecording(f"{name}: `log.entries` is not a list")
    out: list[Recorded | Unusable] = []
    for n, entry in enumerate(entries, 1):
        source = f"{name}#{n}"
        try:
            out.append(_har_entry(entry, source))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            out.append(Unusable(source, f"not a HAR entry ({type(e).__name__}: {e})", invalid=True))
    return out


def _har_entry(entry: dict, source: str) -> Recorded | Unusable:
    request, response = entry["request"], entry["response"]
    status = int(response.get("status") or 0)
    if status <= 0:
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
        method=str(request["method"]),
        url=str(request["url"]),
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


# Decoding bodies as mitmproxy does -------------------------------------------------------------


class MissingDecoder(Exception):
    """A content encoding whose decoder is an optional package that is not installed."""


def _decode_brotli(data: bytes) -> bytes:
    try:
        import brotli
    except ImportError:
        raise MissingDecoder(
            "the body is br-encoded and the `brotli` package is not installed: pip install brotli"
        ) from None
    return brotli.decompress(data)


def _decode_zstd(data: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise MissingDecoder(
            "the body is zstd-encoded and `zstandard` is not installed: pip install zstandard"
        ) from None
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _decode_deflate(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        return zlib.decompress(data, -15)  # servers that send raw deflate, as mitmproxy allows


_DECODERS = {
    "identity": lambda data: data,
    "none": lambda data: data,
    "gzip": lambda data: gzip.GzipFile(fileobj=io.BytesIO(data)).read() if data else b"",
    "deflate": _decode_deflate,
    "deflateraw": _decode_deflate,
    "br": _decode_brotli,
    "zstd": _decode_zstd,
}


def decoded(body: bytes, content_encoding: str) -> bytes:
    """The body with its content encoding undone, or as it is when it does not decode: what mitmproxy's
    `get_content(strict=False)` gives the addon, so the importer keys the bytes the proxy keys.
    Raises MissingDecoder when the decoder package is absent.
    """
    decoder = _DECODERS.get(content_encoding.strip().lower()) if content_encoding else None
    if decoder is None:
        return body
    try:
        return decoder(body)
    except MissingDecoder:
        raise
    except Exception:
        return body


# Converting -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSettings:
    """The addon's options that shape a cassette, as the suite sets them."""

    hosts: re.Pattern[str]
    key_headers: tuple[str, ...]
    ignore: tuple[tuple[str, ...], ...]
    redact_rules: tuple[Rule, ...]
    keep_errors: bool = False
    """Also import 4xx/5xx responses; the proxy never records them."""


def import_settings(
    hosts: Sequence[str] = DEFAULT_HOSTS,
    key_headers: Sequence[str] = DEFAULT_KEY_HEADERS,
    ignore: Sequence[str] = (),
    redact_specs: Sequence[str] = (),
    keep_errors: bool = False,
) -> ImportSettings:
    """Validated settings; raises ValueError naming the bad value, as the addon's `configure()` would."""
    if not hosts or any(not h.strip() for h in hosts):
        raise ValueError(f"hosts: {list(hosts)!r} must list host globs (`*` for every host)")
    return ImportSettings(
        hosts=re.compile("|".join(fnmatch.translate(h.strip().lower()) for h in hosts)),
        key_headers=tuple(h.strip().lower() for h in key_headers if h.strip()),
        ignore=parse_ignore_paths(ignore),
        redact_rules=redact.parse_rules(redact_specs),
        keep_errors=keep_errors,
    )


def _header_values(headers: Iterable[tuple[str, str]], names: Iterable[str]) -> dict[str, str]:
    """The addon's `header_values`: the named headers, lower-cased, repeated ones folded with ", "."""
    wanted = set(names)
    found: dict[str, list[str]] = {}
    for name, value in headers:
        if name.lower() in wanted:
            found.setdefault(name.lower(), []).append(value)
    return {name: ", ".join(values) for name, values in found.items()}


def request_facts(recorded: Recorded, key_headers: Sequence[str]) -> RequestFacts:
    """The facts the addon's `request()` takes from a flow, taken from a recorded request instead.

    Raises ValueError for a URL a proxy could not have seen (no scheme or host).
    """
    parts = urlsplit(recorded.url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"the URL {_no_query(recorded.url)!r} has no http(s) scheme and host")
    headers = _header_values(recorded.request_headers, [*key_headers, "content-type", "content-encoding"])
    body = recorded.request_body
    if "content-encoding" in headers and not recorded.decoded:
        body = decoded(body, headers["content-encoding"])
    return RequestFacts(
        method=recorded.method,
        scheme=parts.scheme,
        host=parts.hostname,
        port=parts.port or DEFAULT_PORTS[parts.scheme],
        path=parts.path or "/",
        # mitmproxy's own query parsing (`Request.query`)
        query=parse_qsl(parts.query, keep_blank_values=True, errors="surrogateescape") if "?" in recorded.url else [],
        headers=headers,
        body=body,
        content_type=headers.get("content-type", ""),
    )


def _no_query(url: str) -> str:
    """A URL fit for a message: its query may hold a key (`?key=`), so it is left out."""
    return url.split("?", 1)[0]


def _response_body(recorded: Recorded) -> dict:
    """{"body_format", "body"} as the addon stores the response: decoded, and a stream as its events."""
    headers = {name.lower(): value for name, value in recorded.response_headers}
    body = recorded.response_body
    if not recorded.decoded:
        body = decoded(body, headers.get("content-encoding", ""))
    content_type = headers.get("content-type", "")
    kind = stream_kind(content_type)
    if kind:
        events, _ = split_events(body, kind, final=True)
        try:
            texts = [event.decode("utf-8") for event in events]
        except UnicodeDecodeError:
            texts = None  # stored whole, as the addon stores a stream that is not UTF-8
        if texts is not None:
            return events_fields(
                [
                    {"ms": ms, "text": text}
                    for ms, text in zip(_offsets(len(texts), recorded.receive_ms), texts, strict=True)
                ]
            )
    return body_fields(body, content_type)


def _offsets(count: int, receive_ms: float | None) -> list[int]:
    """Each event's arrival in ms from the response headers: a HAR's `receive` time spread evenly over the
    events (a HAR times the body, not each event), else 0 for every event, as a VCR cassette has no times."""
    if not receive_ms or count < 2:
        return [0] * count
    return [round(receive_ms * i / (count - 1)) for i in range(count)]


@dataclass
class Converted:
    """One recorded interaction as the cassette the proxy would have written for it."""

    source: str
    key: str
    relative: str
    """The first recording's path (`<key>.json`); a sequence adds `.2`, `.3`, … when it is planned."""
    cassette: dict
    url: str


def convert(recorded: Recorded, settings: ImportSettings, origin: str) -> Converted | Unusable:
    """The cassette for one interaction (redacted like a recording), or why it is not imported."""
    try:
        facts = request_facts(recorded, settings.key_headers)
    except (ValueError, MissingDecoder) as e:
        return Unusable(recorded.source, str(e), invalid=True)
    url = public_url(facts)
    if not settings.hosts.match(facts.host.lower()):
        return Unusable(
            recorded.source,
            f"{facts.method.upper()} {url}: host {facts.host} is not under cassette control (pass --hosts to add it)",
        )
    if not 200 <= recorded.status < 300 and not settings.keep_errors:
        return Unusable(
            recorded.source,
            f"{facts.method.upper()} {url}: status {recorded.status}; the proxy records only 2xx "
            "(pass --keep-errors to import it anyway)",
        )
    try:
        response_body = _response_body(recorded)
    except MissingDecoder as e:
        return Unusable(recorded.source, f"{facts.method.upper()} {url}: {e}", invalid=True)
    ident = identity(facts, settings.key_headers, settings.ignore)
    key = key_of(ident)
    request = stored_request(facts, settings.key_headers)  # exactly as the proxy stores a recorded request
    response = {
        "status": recorded.status,
        "headers": stored_headers(list(recorded.response_headers)),
        **response_body,
    }
    cassette = new_cassette(key, request, response, {"cassette_proxy": __version__, "imported_from": origin})
    cassette["recorded_at"] = recorded.recorded_at or UNDATED
    return Converted(
        source=recorded.source,
        key=key,
        relative=relative_name(facts.scheme, facts.host, facts.port, facts.path, key),
        cassette=redact.redact(cassette, settings.redact_rules),
        url=f"{ident['method']} {ident['url']}",
    )


# Planning and writing -------------------------------------------------------------------------

IMPORTED = "imported"
UNCHANGED = "unchanged"
UPDATED = "updated"
PRESENT = "present"
DUPLICATE = "duplicate"
REPEAT = "repeat"
COLLIDED = "collided"
REPLACED = "replaced"
SKIPPED = "skipped"
INVALID = "invalid"


@dataclass
class Outcome:
    action: str
    source: str
    detail: str = ""
    relative: str = ""
    data: bytes | None = field(default=None, repr=False)
    """The file's bytes, for the actions that write (imported, replaced)."""


@dataclass
class RecordingFile:
    name: str
    format: str
    entries: list[Recorded | Unusable]


def plan(files: Sequence[RecordingFile], settings: ImportSettings, root: Path, replace: bool = False) -> list[Outcome]:
    """What importing these files into `root` does, entry by entry; writes nothing.

    Within one file, the n-th interaction with the same key becomes the n-th of a sequence
    (`<key>.json`, `<key>.2.json`, … as `cassette_repeats=sequence` stores them); trailing ones
    that repeat the answer before them are left out, since replay repeats the last recording anyway.
    Across files (pytest-recording keeps one per test), the first file in the order given wins a
    path; a later one with a different response there is a collision, as is a file already on
    disk holding a different response (kept, unless `replace`). A file an earlier import of the same
    source wrote is that source's to update.
    """
    outcomes: list[Outcome] = []
    planned: dict[str, tuple[str, dict]] = {}
    for recording in files:
        converted: list[Converted | Unusable] = []
        for entry in recording.entries:
            if isinstance(entry, Recorded):
                entry = convert(entry, settings, f"{recording.format}: {recording.name}")
            converted.append(entry)
        places = _sequence_places([c for c in converted if isinstance(c, Converted)])
        for entry in converted:
            if isinstance(entry, Unusable):
                outcomes.append(Outcome(INVALID if entry.invalid else SKIPPED, entry.source, entry.reason))
            elif places[id(entry)] is None:
                outcomes.append(
                    Outcome(REPEAT, entry.source, "the same answer as the one before it: replay repeats it")
                )
            else:
                outcomes.append(_place(entry, places[id(entry)], planned, root, replace))
    return outcomes


def _sequence_places(converted: list[Converted]) -> dict[int, str | None]:
    """Where each interaction of one file goes: the n-th with a key at its n-th sequence path; None for
    those at the end of a sequence that only repeat the answer before them (replay repeats the last one)."""
    by_key: dict[str, list[Converted]] = {}
    for entry in converted:
        by_key.setdefault(entry.key, []).append(entry)
    places: dict[int, str | None] = {}
    for sequence in by_key.values():
        kept = len(sequence)
        while kept > 1 and sequence[kept - 1].cassette["response"] == sequence[kept - 2].cassette["response"]:
            kept -= 1
        for n, entry in enumerate(sequence, 1):
            places[id(entry)] = repeat_path(entry.relative, n) if n <= kept else None
    return places


def _place(
    converted: Converted, relative: str, planned: dict[str, tuple[str, dict]], root: Path, replace: bool
) -> Outcome:
    response = converted.cassette["response"]
    earlier = planned.get(relative)
    if earlier is not None:
        if earlier[1] == response:
            return Outcome(DUPLICATE, converted.source, f"the same answer as {earlier[0]}", relative)
        return Outcome(
            COLLIDED,
            converted.source,
            f"{converted.url}: {earlier[0]} holds a different answer to the same request; kept that one",
            relative,
        )
    planned[relative] = (converted.source, response)
    data = dumps(converted.cassette)
    path = root / relative
    try:
        existing = path.read_bytes()
    except FileNotFoundError:
        return Outcome(IMPORTED, converted.source, converted.url, relative, data)
    if existing == data:
        return Outcome(UNCHANGED, converted.source, converted.url, relative)
    try:
        on_disk = json.loads(existing)
        origin = on_disk["recorded_with"].get("imported_from")
        same = on_disk["response"] == response
    except (ValueError, TypeError, KeyError, AttributeError):
        on_disk, origin, same = None, None, False
    if origin == converted.cassette["recorded_with"]["imported_from"] or replace:
        # An earlier import of this very file (its content or today's --redact/--ignore changed it): follow the file.
        return Outcome(UPDATED if not replace else REPLACED, converted.source, converted.url, relative, data)
    if same:
        return Outcome(PRESENT, converted.source, "already recorded with the same answer; kept as it is", relative)
    problem = "is not a valid cassette" if on_disk is None else "already holds a different answer"
    return Outcome(
        COLLIDED,
        converted.source,
        f"{converted.url}: {relative} {problem}; kept it (pass --replace to overwrite)",
        relative,
    )


def write(outcomes: Iterable[Outcome], root: Path) -> None:
    for outcome in outcomes:
        if outcome.data is not None:
            write_atomic(root / outcome.relative, outcome.data)


def recording_files(paths: Iterable[Path], exclude: Path | None = None) -> list[tuple[Path, Path]]:
    """(file, the PATH argument that found it) for the files named and the candidate files under the folders
    named (pytest-recording keeps `tests/cassettes/<module>/<test>.yaml`), each once, folders' contents
    sorted. Files under `exclude` (the cassette folder being written) are not candidates: they are cassettes."""
    found: dict[Path, Path] = {}
    for path in paths:
        if not path.is_dir():
            found[path] = path
            continue
        for candidate in sorted(path.rglob("*")):
            inside = exclude is not None and candidate.resolve().is_relative_to(exclude)
            if candidate.is_file() and candidate.suffix.lower() in RECORDING_SUFFIXES and not inside:
                found.setdefault(candidate, path)
    return list(found.items())
