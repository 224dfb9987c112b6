"""Conversion of foreign recordings (read by recording_formats.py) into cassettes of our own.

A team adopting the proxy should not have to re-record against the live API
(money, time, and impossible for a retired model). The conversion is
mechanical, so it must also be exact: an imported request gets the key the
proxy computes for the same request on the wire under the same settings, and
its file is written as a recording would write it (the same request facts,
body forms, stored headers, stream events, redaction and `keyed_with`), then
read back with the proxy's own validation: nothing is written that `load`
would refuse. Pure: no mitmproxy import, so the `cassette` command runs it in
any environment.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ... import __version__
from ..defaults import DEFAULT_HOSTS, DEFAULT_KEY_HEADERS
from ..files import json_depth
from ..files.atomic_write import write_atomic
from ..files.cassette_file import (
    body_fields,
    dumps,
    events_fields,
    large_json_as_text,
    new_cassette,
    parse,
    stored_headers,
)
from ..files.location import MAX_NAME, relative_name, repeat_path, short_name
from ..files.safe_read import DEFAULT_MAX_SIZE, CassetteError, read_limited
from ..files.stream_events import split_events, sse_fields, stream_kind
from ..keys.frameworks import DEFAULT_FRAMEWORKS
from ..keys.hosts import HostScope
from ..keys.key import UNKEYABLE_HEADERS, RequestFacts, identity, key_of
from ..keys.recipe import Recipe, RecipeError, make_recipe, stored_request
from ..keys.url import DEFAULT_PORTS, public_url
from ..reading.diff import changes, in_context
from ..record_statuses import DEFAULT_RECORD_STATUSES, parse_record_statuses
from ..secrets import redact
from ..secrets.redact import Rule
from ..traffic.per_test import DEFAULT_SCOPE, SCOPES, scoped_name
from .recording_formats import MAX_RECORDING_BYTES, RECORDING_SUFFIXES, Recorded, TooLarge, Unusable, inflate
from .redacted_request import HeaderRule, Rebuild, parse_header_rule, unredacted, well_known_media

UNDATED = "1970-01-01T00:00:00+00:00"
"""`recorded_at` of an interaction whose recording says nothing of its time (VCR stores none, and a response
may lack a Date header). A fixed value keeps a re-import byte-identical; the epoch makes `cassette stale`
list it, which is the honest answer to "how old is this?"."""


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
    out: bytes = brotli.Decompressor().process(data, output_buffer_limit=MAX_RECORDING_BYTES + 1)
    if len(out) > MAX_RECORDING_BYTES:
        raise TooLarge(f"decompresses to more than {MAX_RECORDING_BYTES} bytes, the limit")
    return out


def _decode_zstd(data: bytes) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise MissingDecoder(
            "the body is zstd-encoded and `zstandard` is not installed: pip install zstandard"
        ) from None
    out: bytes = zstandard.ZstdDecompressor().stream_reader(data).read(MAX_RECORDING_BYTES + 1)
    if len(out) > MAX_RECORDING_BYTES:
        raise TooLarge(f"decompresses to more than {MAX_RECORDING_BYTES} bytes, the limit")
    return out


def _decode_deflate(data: bytes) -> bytes:
    try:
        return inflate(data, zlib.MAX_WBITS, MAX_RECORDING_BYTES)
    except zlib.error:
        return inflate(data, -zlib.MAX_WBITS, MAX_RECORDING_BYTES)  # servers that send raw deflate, as mitmproxy allows


_DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "identity": lambda data: data,
    "none": lambda data: data,
    "gzip": lambda data: inflate(data, 16 + zlib.MAX_WBITS, MAX_RECORDING_BYTES),
    "deflate": _decode_deflate,
    "deflateraw": _decode_deflate,
    "br": _decode_brotli,
    "zstd": _decode_zstd,
}


def decoded(body: bytes, content_encoding: str) -> bytes:
    """The body with its content encoding undone, or as it is when it does not decode: what mitmproxy's
    `get_content(strict=False)` gives the addon, so the importer keys the bytes the proxy keys.
    Raises MissingDecoder when the decoder package is absent, TooLarge past MAX_RECORDING_BYTES (a
    recording's body is not bounded by a network's patience, so a small one may be a decompression bomb).
    """
    decoder = _DECODERS.get(content_encoding.strip().lower()) if content_encoding else None
    if decoder is None:
        return body
    try:
        return decoder(body)
    except (MissingDecoder, TooLarge):
        raise
    except Exception:
        return body


# Settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportSettings:
    """The addon's options that shape a cassette, as the suite sets them, and what to rebuild."""

    hosts: HostScope
    recipe: Recipe
    statuses: frozenset[int]
    redact_rules: tuple[Rule, ...]
    scope: str = DEFAULT_SCOPE
    rebuild: Rebuild = field(default_factory=Rebuild)


def import_settings(
    hosts: Sequence[str] = DEFAULT_HOSTS,
    key_headers: Sequence[str] = (),
    ignore: Sequence[str] = (),
    ignore_values: Sequence[str] = (),
    frameworks: Sequence[str] = DEFAULT_FRAMEWORKS,
    record_statuses: Sequence[str] = DEFAULT_RECORD_STATUSES,
    redact_specs: Sequence[str] = (),
    scope: str = DEFAULT_SCOPE,
    redacted_url: str | None = None,
    redacted_headers: Sequence[str] = (),
) -> ImportSettings:
    """Validated settings, taken as `cassette run` takes them (`key_headers` on top of the defaults, presets by
    name among `ignore_values`); ValueError naming the flag and the bad value, as the addon's `configure()` would."""
    if not hosts or any(not h.strip() for h in hosts):
        raise ValueError(f"--hosts: {list(hosts)!r} must list host globs (`*` for every host)")
    try:
        recipe = make_recipe(ignore, [*DEFAULT_KEY_HEADERS, *key_headers], ignore_values, frameworks)
    except RecipeError as e:
        flags = {"cassette_ignore_values": "--ignore-value", "cassette_frameworks": "--frameworks"}
        flag = flags.get(e.option, "--ignore")
        raise ValueError(f"{flag}: {str(e).split(': ', 1)[1]}") from None
    if refused := sorted(UNKEYABLE_HEADERS.intersection(recipe.key_headers)):
        raise ValueError(
            f"--key-header: {refused[0]!r} carries a credential or changes on every request: as a key header it "
            "would be stored in every cassette and never match; remove it"
        )
    try:
        statuses = parse_record_statuses(record_statuses)
    except ValueError as e:
        raise ValueError(f"--record-status: {e}") from None
    if scope not in SCOPES:
        raise ValueError(f"--scope: {scope!r} is not a choice; use one of {', '.join(SCOPES)}")
    return ImportSettings(
        hosts=HostScope(hosts),
        recipe=recipe,
        statuses=statuses,
        redact_rules=redact.parse_rules(redact_specs),
        scope=scope,
        rebuild=Rebuild(_redacted_url(redacted_url), _redacted_headers(redacted_headers)),
    )


def _redacted_url(url: str | None) -> str | None:
    if url is None:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"--redacted-url: {url!r} is not an http(s) URL (https://api.example.com/v1/chat/completions)")
    return url.strip()


def _redacted_headers(specs: Sequence[str]) -> tuple[HeaderRule, ...]:
    return tuple(parse_header_rule(spec) for spec in specs)


# Converting -----------------------------------------------------------------------------------


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


def _response_body(recorded: Recorded) -> dict[str, Any]:
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
            offsets = _offsets(len(texts), recorded.receive_ms)
            return events_fields([{"ms": ms, "text": text} for ms, text in zip(offsets, texts, strict=True)])
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
    """The first recording's path (`<key>.json`, shared scope); a sequence adds `.2`, `.3`, … when it is planned."""
    cassette: dict[str, Any]
    data: bytes = field(repr=False)
    """The file's bytes, already read back by the proxy's own validation."""
    url: str
    note: str = ""
    """What was rebuilt (a redacted URL), for the summary."""


def convert(
    recorded: Recorded, settings: ImportSettings, origin: str, folders: Sequence[str] = ()
) -> Converted | Unusable:
    """The cassette for one interaction (redacted like a recording), or why it is not imported.

    `folders`: the names of the folders the file is in, nearest first: the provider of a redacted URL.
    """
    recipe = settings.recipe
    rebuilt = unredacted(recorded, recipe.key_headers, settings.rebuild, folders)
    if isinstance(rebuilt, Unusable):
        return rebuilt
    recorded, note = rebuilt
    try:
        facts = request_facts(recorded, recipe.key_headers)
    except (ValueError, MissingDecoder) as e:
        return Unusable(recorded.source, f"its request: {e}", invalid=True)
    shown = f"{facts.method.upper()} {public_url(facts)}"
    if not settings.hosts.covers(facts.host, facts.path):
        return Unusable(recorded.source, f"{shown}: host {facts.host} is not under cassette control (pass --hosts)")
    if not 100 <= recorded.status <= 599:
        return Unusable(recorded.source, f"{shown}: status {recorded.status} is not an HTTP status", invalid=True)
    if recorded.status not in settings.statuses:
        return Unusable(
            recorded.source,
            f"{shown}: status {recorded.status} is not among the statuses the proxy records "
            f"(cassette_record_statuses; pass --record-status {recorded.status} to import it)",
        )
    try:
        cassette = _cassette(recorded, facts, recipe, settings.redact_rules, origin)
        data = dumps(cassette)
    except (MissingDecoder, TooLarge) as e:
        return Unusable(recorded.source, f"{shown}: its response body {e}", invalid=True)
    except RecursionError:
        return Unusable(recorded.source, f"{shown}: a body nests too deeply to be stored", invalid=True)
    relative = relative_name(facts.scheme, facts.host, facts.port, facts.path, cassette["key"])
    try:
        if len(data) > DEFAULT_MAX_SIZE:
            raise CassetteError(relative, f"is {len(data)} bytes, over the cassette_max_size limit")
        parse(relative, data)  # what `load` checks: a cassette the proxy would refuse is never written
    except CassetteError as e:
        return Unusable(recorded.source, f"{shown}: the proxy would refuse its cassette: {e.problem}", invalid=True)
    return Converted(recorded.source, cassette["key"], relative, cassette, data, shown, note)


def _cassette(
    recorded: Recorded, facts: RequestFacts, recipe: Recipe, rules: tuple[Rule, ...], origin: str
) -> dict[str, Any]:
    """The cassette as the recorder writes it: keyed under `recipe`, redacted, a large JSON answer as text."""
    key = key_of(identity(facts, recipe.key_headers, recipe.paths, recipe.patterns))
    request = stored_request(facts, recipe.key_headers)  # exactly as the proxy stores a recorded request
    response = {
        "status": recorded.status,
        "headers": stored_headers(list(recorded.response_headers)),
        **_response_body(recorded),
    }
    recorded_with = {"cassette_proxy": __version__, "imported_from": origin}
    cassette = new_cassette(key, request, response, recorded_with, recipe.to_json())
    cassette["recorded_at"] = recorded.recorded_at or UNDATED
    stored = redact.redact(cassette, rules)
    if stored["request"] != cassette["request"]:
        # The stored request no longer gives its key: `cassette rekey` must know not to trust it (as the recorder does).
        stored["keyed_with"] = {**stored["keyed_with"], "request_redacted": True}
    return large_json_as_text(stored)


ANSWER_HEADERS = ("content-type", "location", "retry-after", "x-should-retry")
"""The response headers that change what a client does with an answer. The others (dates, `expires`, request
ids, rate-limit counters, timings) describe the moment it was recorded, so two recordings that differ only
in them give the same answer."""


def same_answer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Status, body and the answer headers equal: a replay of either makes the client do the same."""
    if (a.get("status"), a.get("body_format"), a.get("body")) != (b.get("status"), b.get("body_format"), b.get("body")):
        return False
    ah, bh = a.get("headers") or {}, b.get("headers") or {}
    return all(ah.get(name) == bh.get(name) for name in ANSWER_HEADERS)


def answer_difference(kept: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """How two different answers to one request differ, kept → other, as the first change and a count: whether
    it is another reply or only an id the provider made up for the moment (`[0].data.message.id: "msg_01…" →
    "msg_02…"`) decides between `--scope test` and either answer."""
    if kept.get("status") != other.get("status"):
        return f"status {kept.get('status')} → {other.get('status')}"
    if kept.get("body_format") != other.get("body_format"):
        return f"body {kept.get('body_format')} → {other.get('body_format')}"
    found = changes(_as_read(kept), _as_read(other))
    if found:
        return in_context(*found[0]) + (f" (and {len(found) - 1} more)" if len(found) > 1 else "")
    ah, bh = kept.get("headers") or {}, other.get("headers") or {}
    return "header " + ", ".join(name for name in ANSWER_HEADERS if ah.get(name) != bh.get(name))


def _as_read(answer: Mapping[str, Any]) -> Any:
    """The body as a client reads it: a stream's events as their names and parsed `data:` (the spaces
    Anthropic pads its events with, and the offsets, are no difference a client sees)."""
    body = answer.get("body")
    if answer.get("body_format") != "events" or not isinstance(body, list):
        return body
    read = []
    for event in body:
        text = event.get("text") if isinstance(event, dict) else None
        if not isinstance(text, str):
            read.append(event)
            continue
        name, data = sse_fields(text)
        try:
            read.append({"event": name, "data": json_depth.loads(data)})
        except ValueError:
            read.append({"event": name, "data": data})
    return read


def _differing_headers(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    ah, bh = a.get("headers") or {}, b.get("headers") or {}
    return sorted(name for name in ah.keys() | bh.keys() if ah.get(name) != bh.get(name))


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
    """The file's bytes, for the actions that write (imported, updated, replaced)."""


@dataclass
class RecordingFile:
    name: str
    format: str
    entries: list[Recorded | Unusable]
    folders: tuple[str, ...] = ()
    """The names of the folders it is in, nearest first (the provider of a redacted URL); never stored."""
    test_ids: tuple[str, ...] = ()
    """The tests it belongs to (`--scope test`); empty in the shared scope."""
    scope_problem: str = ""
    """Why the test scope cannot place it (no test module defines its name)."""


def plan(files: Iterable[RecordingFile], settings: ImportSettings, root: Path, replace: bool = False) -> list[Outcome]:
    """What importing these files into `root` does, entry by entry (`outcomes`, all at once); writes nothing."""
    return list(outcomes(files, settings, root, replace))


def outcomes(
    files: Iterable[RecordingFile], settings: ImportSettings, root: Path, replace: bool = False
) -> Iterator[Outcome]:
    """What importing these files into `root` does, entry by entry, file after file as they come; writes nothing.

    Within one file, the n-th interaction with the same key becomes the n-th of a sequence
    (`<key>.json`, `<key>.2.json`, … as `cassette_repeats=sequence` stores them); trailing ones
    that repeat the answer before them are left out, since replay repeats the last recording anyway.
    In the test scope each file goes to the folders of its tests. Across files (in the shared scope:
    pytest-recording keeps one per test), the first file in the order given wins a path; a later one
    with a different answer there is a collision, as is a file already on disk holding a different
    answer (kept, unless `replace`). A file an earlier import of the same source wrote is that source's
    to update.
    """
    planned: dict[str, tuple[str, dict[str, Any]]] = {}
    for recording in files:
        origin = f"{recording.format}: {recording.name}"
        converted = [
            _converted(entry, settings, origin, recording.folders) if isinstance(entry, Recorded) else entry
            for entry in _with_media_urls(recording.entries)
        ]
        places = _sequence_places([c for c in converted if isinstance(c, Converted)])
        tests: Sequence[str | None] = recording.test_ids if settings.scope == "test" else (None,)
        for entry in converted:
            if isinstance(entry, Unusable):
                yield Outcome(INVALID if entry.invalid else SKIPPED, entry.source, entry.reason)
            elif settings.scope == "test" and recording.scope_problem:
                yield Outcome(SKIPPED, entry.source, f"test scope: {recording.scope_problem}")
            elif (place := places[id(entry)]) is None:
                detail = "the same answer as the one before it: replay repeats it"
                yield from (Outcome(REPEAT, entry.source, detail) for _ in tests)
            else:
                for test in tests:
                    relative = scoped_name(place, test, settings.scope)
                    if len(relative) > MAX_NAME:  # where the proxy looks for a name too long to store (location.py)
                        relative = scoped_name(short_name(place), test, settings.scope)
                    yield _place(entry, relative, planned, root, replace, settings.scope)


def _with_media_urls(entries: Iterable[Recorded | Unusable]) -> Iterator[Recorded | Unusable]:
    """The entries, a redacted download of one of langchain_tests' files once under each of its URLs."""
    for entry in entries:
        media = well_known_media(entry) if isinstance(entry, Recorded) else None
        yield from media or (entry,)


def _converted(
    recorded: Recorded, settings: ImportSettings, origin: str, folders: Sequence[str]
) -> Converted | Unusable:
    """`convert`, with a failure of ours reported for this one interaction rather than stopping the import."""
    try:
        return convert(recorded, settings, origin, folders)
    except Exception as e:
        return Unusable(
            recorded.source, f"could not be converted ({type(e).__name__}: {e}): a bug, please report it", True
        )


def _sequence_places(converted: list[Converted]) -> dict[int, str | None]:
    """Where each interaction of one file goes: the n-th with a key at its n-th sequence path; None for
    those at the end of a sequence that only repeat the answer before them (replay repeats the last one)."""
    by_key: dict[str, list[Converted]] = {}
    for entry in converted:
        by_key.setdefault(entry.key, []).append(entry)
    places: dict[int, str | None] = {}
    for sequence in by_key.values():
        kept = len(sequence)
        while kept > 1 and same_answer(
            sequence[kept - 1].cassette["response"], sequence[kept - 2].cassette["response"]
        ):
            kept -= 1
        for n, entry in enumerate(sequence, 1):
            places[id(entry)] = repeat_path(entry.relative, n) if n <= kept else None
    return places


def _place(
    converted: Converted,
    relative: str,
    planned: dict[str, tuple[str, dict[str, Any]]],
    root: Path,
    replace: bool,
    scope: str,
) -> Outcome:
    response = converted.cassette["response"]
    shown = f"{converted.url}{f' ({converted.note})' if converted.note else ''}"
    earlier = planned.get(relative)
    if earlier is not None:
        if same_answer(earlier[1], response):
            differing = _differing_headers(earlier[1], response)
            headers = f" (only its headers differ: {', '.join(differing)})" if differing else ""
            return Outcome(DUPLICATE, converted.source, f"the same answer as {earlier[0]}{headers}", relative)
        hint = " (import with --scope test when they belong to different tests)" if scope == DEFAULT_SCOPE else ""
        return Outcome(
            COLLIDED,
            converted.source,
            f"{converted.url}: {earlier[0]} holds a different answer to the same request and was kept there; "
            f"this one is not imported{hint}; they differ in: {answer_difference(earlier[1], response)}",
            relative,
        )
    planned[relative] = (converted.source, response)
    try:
        existing = read_limited(root / relative, root)
    except FileNotFoundError:
        return Outcome(IMPORTED, converted.source, shown, relative, converted.data)
    except (CassetteError, OSError) as e:
        problem = e.problem if isinstance(e, CassetteError) else e.strerror or str(e)
        detail = f"{converted.url}: {relative} cannot be read ({problem}); kept it, imported nothing"
        return Outcome(COLLIDED, converted.source, detail, relative)
    if existing == converted.data:
        return Outcome(UNCHANGED, converted.source, shown, relative)
    try:
        on_disk = json.loads(existing)
        origin = on_disk["recorded_with"].get("imported_from")
        same = same_answer(on_disk["response"], response)
    except (ValueError, TypeError, KeyError, AttributeError):
        on_disk, origin, same = None, None, False
    if origin == converted.cassette["recorded_with"]["imported_from"] or replace:
        # An earlier import of this very file (its content or today's settings changed it): follow the file.
        return Outcome(UPDATED if not replace else REPLACED, converted.source, shown, relative, converted.data)
    if same:
        return Outcome(PRESENT, converted.source, "already recorded with the same answer; kept as it is", relative)
    if on_disk is None:
        problem = "is not a valid cassette"
    else:
        problem = f"already holds a different answer ({answer_difference(on_disk['response'], response)})"
    return Outcome(
        COLLIDED,
        converted.source,
        f"{converted.url}: {relative} {problem}; kept it (pass --replace to overwrite)",
        relative,
    )


WRITERS = 4
"""Cassettes written at once: each atomic write waits on its fsync, and the disk takes several together
(writing langchain-openai's 183 cassettes one by one took longer than everything else the import does); more
threads only contend with the conversion for the interpreter."""


def write(planned: Iterable[Outcome], root: Path) -> list[Outcome]:
    """Write every cassette the outcomes carry, atomically, as they come (`outcomes` is lazy: the disk's waits
    overlap the reading and converting of the next files); the outcomes. Raises the first OSError once every
    write was tried."""
    done, writes = [], []
    with ThreadPoolExecutor(WRITERS) as pool:
        for outcome in planned:
            done.append(outcome)
            if outcome.data is not None:
                writes.append(pool.submit(write_atomic, root / outcome.relative, outcome.data))
        for future in writes:
            future.result()
    return done


def is_recording_name(name: str) -> bool:
    """`*.yaml`, `*.yml`, `*.json`, `*.har`, each also gzip'd (`*.yaml.gz`)."""
    return name.lower().removesuffix(".gz").endswith(RECORDING_SUFFIXES)


def recording_files(paths: Iterable[Path], exclude: Path | None = None) -> list[tuple[Path, Path]]:
    """(file, the PATH argument that found it) for the files named and the candidate files under the folders
    named (pytest-recording keeps `tests/cassettes/<module>/<test>.yaml`), each once and resolved, folders'
    contents sorted. Files under `exclude` (the cassette folder being written) are not candidates: they are
    cassettes; nor is a symlink in a folder that leads out of it (a pull request's link to a file elsewhere)."""
    found: dict[Path, Path] = {}
    for path in paths:
        real = path.resolve()
        if not path.is_dir():
            found.setdefault(real, path)
            continue
        for candidate in sorted(path.rglob("*")):
            if not candidate.is_file() or not is_recording_name(candidate.name):
                continue
            resolved = candidate.resolve()
            if resolved.is_relative_to(real) and not (exclude is not None and resolved.is_relative_to(exclude)):
                found.setdefault(resolved, path)
    return list(found.items())
