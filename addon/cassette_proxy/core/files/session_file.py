"""The session cassette: one WebSocket session (the upgrade request, the 101, every frame in order) in one file.

A session is a cassette like any other: the same place (`<key>.json`, keyed
from the upgrade request), the same `request`, `keyed_with` and recording
fields, and a `response` that is the 101 the server answered. Beside them,
`session` holds the frames in the order they crossed the proxy, each with its
direction, its WebSocket frame type and its offset from the upgrade in
milliseconds. A frame holding JSON is kept parsed (a reviewer reads fields),
other text as text, other bytes as base64. Long base64 strings inside JSON
frames (audio deltas) and long binary frames can live in a sidecar file
beside the cassette, so the JSON stays readable; the cassette names the file,
its size and its SHA-256, and says which strings and frames are there.

Session cassettes are written as `cassette_format` 3: a proxy that predates
sessions refuses them instead of answering a 101 with nothing behind it.
Reading is validation, as for every cassette: types, counts, sizes, base64,
the sidecar's name, size, digest and place inside the cassette folder.

A session file is untrusted and can be large, so the checks come before the
work they guard: its frames are counted while the file is parsed
(`parse_json`, which cassette_file.parse uses for any file naming a session:
a file of two million frames is refused after a tenth of them, not parsed
whole), sidecar spans may neither overlap nor pass the sidecar's end (so the
restored payloads are bounded by the two files' sizes: one span repeated
cannot make a small sidecar into gigabytes), and the payloads' total is
checked while they are rebuilt, not after. Parsing through a Python hook
also lets other threads run between objects: the proxy's event loop goes on
answering while a big session is read in its worker thread.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fast_json import encoder
from .safe_read import DEFAULT_MAX_SIZE, CassetteError, read_limited

SESSION_FORMAT = 3
"""The `cassette_format` of a session cassette."""

SOURCES = ("client", "server")
FRAME_TYPES = ("text", "binary")
PAYLOAD_FIELDS = ("json", "text", "base64", "sidecar")
"""Exactly one of these holds a frame's payload."""

MAX_FRAMES = 100_000
"""Frames in one session at most: far above a test's conversation, far below what exhausts memory."""
FRAME_KEYS = frozenset({"from", "ms", "frame"})
"""What every frame object holds: what `parse_json` counts frames by before the file is read whole."""
MAX_MS = 86_400_000
"""A frame's offset at most (a day): a timed replay waits this long at worst."""
MAX_REASON_BYTES = 123
"""RFC 6455: a close reason fits in a control frame (125 bytes, 2 of them the code)."""
SIDECAR_MIN = 4096
"""Base64 strings and binary frames from this length on go to the sidecar: an audio chunk is tens of KB."""
SIDECAR_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,199}\.bin")
"""A plain file name in the cassette's own folder: no separator, no `..`, not hidden."""

_HEX32 = re.compile(r"[0-9a-f]{32}")

_compact = encoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""How a JSON frame goes back on the wire unless its `json_format` says otherwise: compact, as most APIs send it."""

JSON_FORMATS: dict[str, Callable[[Any], str]] = {
    "compact": _compact,
    "spaced": encoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False),
    "indented": encoder(ensure_ascii=False, indent=2, separators=(",", ": "), allow_nan=False),
    "compact-ascii": encoder(separators=(",", ":"), allow_nan=False),
    "spaced-ascii": encoder(separators=(", ", ": "), allow_nan=False),
    "indented-ascii": encoder(indent=2, separators=(",", ": "), allow_nan=False),
}
"""The encodings a server's JSON frame is written back in, byte for byte (`json_format`): compact (OpenAI), Python's
spacing, two-space indents (Google's JSON printers), each with non-ASCII kept or escaped. A server frame none of
them gives back exactly is kept as text or bytes instead: what the client receives is what the server sent."""


@dataclass(frozen=True)
class Frame:
    """One WebSocket message as it crossed the proxy."""

    from_client: bool
    ms: int
    """Milliseconds from the upgrade (the 101) to this message."""
    is_text: bool
    payload: bytes


@dataclass(frozen=True)
class Close:
    """How the session ended: who sent the close frame, its code and reason."""

    by: str
    code: int | None
    reason: str = ""


@dataclass(frozen=True)
class Session:
    """A session ready to play: every payload restored from the file and its sidecar."""

    frames: tuple[Frame, ...]
    close: Close | None
    ignore: tuple[str, ...]
    """The fields of client messages the recording left out of matching (`cassette_session_ignore`)."""
    digests: dict[int, str] = field(default_factory=dict)
    """Frame index -> the digest a client message is matched by, where redaction changed what is stored of it."""
    digest_settings: str | None = None
    """The matching settings those digests were made under (`MatchSettings.fingerprint`)."""


def is_session(cassette: dict[str, Any]) -> bool:
    return "session" in cassette


# -- recording ---------------------------------------------------------------------------------------------------


def json_payload(payload: bytes) -> tuple[bool, Any]:
    """(True, value) when the bytes are UTF-8 JSON that goes back on the wire as the same value, else (False, None).

    The compact encoding of the parsed value must parse back equal, and no object may repeat a name: `NaN`,
    `{"a": 1, "a": 2}` or a number beyond a double would not come back, and such a frame is kept as text, exactly.
    """
    try:
        value = json.loads(payload.decode("utf-8"), object_pairs_hook=_unique_names)
        again = json.loads(_compact(value))
    except (ValueError, RecursionError):
        return False, None
    return (True, value) if again == value else (False, None)


def exact_json_format(payload: bytes, value: Any) -> str | None:
    """The name of the JSON_FORMATS encoding that writes `value` back as exactly `payload`, or None."""
    for name, encode in JSON_FORMATS.items():
        try:
            if encode(value).encode("utf-8") == payload:
                return name
        except (ValueError, RecursionError):
            return None
    return None


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("an object repeats a name")
    return value


def _canonical_base64(text: str) -> bytes | None:
    """The bytes a base64 string stands for, when re-encoding them gives the very same string."""
    if len(text) % 4 or not text.isascii():
        return None
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if base64.b64encode(data).decode("ascii") == text else None


def _long_base64(
    value: Any, least: int, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], bytes]]:
    """(path, bytes) of every string of at least `least` characters that is exactly some bytes' base64."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _long_base64(item, least, (*path, name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _long_base64(item, least, (*path, i))
    elif isinstance(value, str) and len(value) >= least and (data := _canonical_base64(value)) is not None:
        yield path, data


def placeholder(length: int) -> str:
    """What stands in a JSON frame for a base64 string kept in the sidecar."""
    return f"[sidecar: {length} bytes]"


def stored_frames(frames: Sequence[Frame], sidecar_min: int = SIDECAR_MIN) -> tuple[list[dict[str, Any]], bytes]:
    """The `frames` list of a session and the sidecar's bytes (empty: no sidecar needed)."""
    sidecar = bytearray()
    stored = []
    for frame in frames:
        entry: dict[str, Any] = {
            "from": "client" if frame.from_client else "server",
            "ms": frame.ms,
            "frame": "text" if frame.is_text else "binary",
        }
        is_json, value = json_payload(frame.payload)
        json_format = "compact"
        if is_json and not frame.from_client:  # a client's frames are matched by value, never sent back
            json_format = exact_json_format(frame.payload, value) or ""
            is_json = bool(json_format)
        if is_json:
            moved: list[dict[str, Any]] = []
            for path, data in _long_base64(value, sidecar_min) if len(frame.payload) >= sidecar_min else ():
                moved.append({"path": list(path), "offset": len(sidecar), "length": len(data)})
                sidecar += data
            for span in moved:  # `value` was parsed for this frame alone: changed in place
                _set(value, span["path"], placeholder(span["length"]))
            entry["json"] = value
            if json_format != "compact":
                entry["json_format"] = json_format
            if moved:
                entry["in_sidecar"] = moved
        elif frame.is_text:
            entry["text"] = frame.payload.decode("utf-8", "replace")
        elif len(frame.payload) >= sidecar_min:
            entry["sidecar"] = {"offset": len(sidecar), "length": len(frame.payload)}
            sidecar += frame.payload
        else:
            entry["base64"] = base64.b64encode(frame.payload).decode("ascii")
        stored.append(entry)
    return stored, bytes(sidecar)


def sidecar_name(cassette_name: str, sidecar: bytes) -> str:
    """`<key>.<first 16 hex of the sidecar's SHA-256>.bin`: a re-recording never overwrites the file an older
    cassette (still read by another proxy) points to."""
    return f"{cassette_name.removesuffix('.json')}.{hashlib.sha256(sidecar).hexdigest()[:16]}.bin"


def session_object(
    frames: list[dict[str, Any]],
    close: Close | None,
    ignore: Sequence[str],
    sidecar: bytes = b"",
    sidecar_file: str = "",
    digest_settings: str | None = None,
) -> dict[str, Any]:
    """The `session` field of a session cassette."""
    session: dict[str, Any] = {"ignore": list(ignore), "frames": frames}
    if digest_settings is not None:
        session["digest_settings"] = digest_settings
    if close is not None:
        session["close"] = {"by": close.by, "code": close.code, "reason": close.reason}
    if sidecar:
        session["sidecar"] = {
            "file": sidecar_file,
            "bytes": len(sidecar),
            "sha256": hashlib.sha256(sidecar).hexdigest(),
        }
    return session


# -- reading -----------------------------------------------------------------------------------------------------


def parse_json(path: Path | str, text: str) -> Any:
    """The JSON of a file that may be a session, parsed with every object seen as it is made: past twice
    MAX_FRAMES objects shaped like frames (`from`, `ms`, `frame`), CassetteError, before the rest is parsed (a
    frame's own JSON could look like one: the exact count is `check_session`'s). ValueError and RecursionError
    as `json.loads` raises them."""
    seen = 0

    def counted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal seen
        value = dict(pairs)
        if len(value) >= 4 and value.keys() >= FRAME_KEYS:
            seen += 1
            if seen > 2 * MAX_FRAMES:
                raise CassetteError(path, f"session.frames holds more than {2 * MAX_FRAMES} frames (the limit is "
                                    f"{MAX_FRAMES}); refused before reading the rest")  # fmt: skip
        return value

    return json.loads(text, object_pairs_hook=counted)


def check_session(path: Path | str, cassette: dict[str, Any]) -> None:
    """Validate a session cassette's structure (no I/O); CassetteError naming the problem."""
    if cassette.get("cassette_format") != SESSION_FORMAT:
        raise CassetteError(
            path, f"a session is cassette_format {SESSION_FORMAT}, not {cassette.get('cassette_format')!r}"
        )
    if cassette["response"].get("status") != 101:
        raise CassetteError(path, "a session's response.status must be 101, the answer that opened it")
    session = cassette.get("session")
    if not isinstance(session, dict):
        raise CassetteError(path, "session must be an object")
    ignore = session.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise CassetteError(path, "session.ignore must be a list of strings")
    digest_settings = session.get("digest_settings")
    if digest_settings is not None and not (isinstance(digest_settings, str) and _HEX32.fullmatch(digest_settings)):
        raise CassetteError(path, "session.digest_settings must be 32 hex digits")
    frames = session.get("frames")
    if not isinstance(frames, list):
        raise CassetteError(path, "session.frames must be a list")
    if len(frames) > MAX_FRAMES:
        raise CassetteError(path, f"session.frames holds {len(frames)} frames, over the limit of {MAX_FRAMES}")
    sidecar_bytes = _check_sidecar(path, session.get("sidecar"))
    spans: list[tuple[int, int, str]] = []
    for i, frame in enumerate(frames):
        _check_frame(path, f"session.frames[{i}]", frame, sidecar_bytes, spans)
    _check_disjoint(path, spans)
    _check_close(path, session.get("close"))


def _check_disjoint(path: Path | str, spans: list[tuple[int, int, str]]) -> None:
    """Each sidecar byte belongs to one payload at most, as the recorder writes them: spans that overlap would
    let a small sidecar restore as many times its size as there are spans."""
    spans.sort(key=lambda span: span[:2])  # stable: equal starts keep the order they were recorded in
    for (offset, length, where), (next_offset, _, next_where) in itertools.pairwise(spans):
        if next_offset < offset + length:
            raise CassetteError(
                path, f"{next_where} overlaps {where} in the sidecar: every sidecar byte belongs to one payload"
            )


def _check_sidecar(path: Path | str, sidecar: Any) -> int | None:
    if sidecar is None:
        return None
    if not isinstance(sidecar, dict):
        raise CassetteError(path, "session.sidecar must be an object")
    name, size, digest = sidecar.get("file"), sidecar.get("bytes"), sidecar.get("sha256")
    if not isinstance(name, str) or not SIDECAR_NAME.fullmatch(name) or ".." in name:
        raise CassetteError(
            path, f"session.sidecar.file must be a plain .bin file name beside the cassette, not {name!r}"
        )
    if not _is_count(size):
        raise CassetteError(path, f"session.sidecar.bytes must be a whole number of bytes, not {size!r}")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise CassetteError(path, "session.sidecar.sha256 must be 64 lower-case hex digits")
    return size


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_frame(
    path: Path | str, where: str, frame: Any, sidecar_bytes: int | None, spans: list[tuple[int, int, str]]
) -> None:
    if not isinstance(frame, dict):
        raise CassetteError(path, f"{where} must be an object")
    if frame.get("from") not in SOURCES:
        raise CassetteError(path, f"{where}.from must be client or server, not {frame.get('from')!r}")
    if frame.get("frame") not in FRAME_TYPES:
        raise CassetteError(path, f"{where}.frame must be text or binary, not {frame.get('frame')!r}")
    ms: Any = frame.get("ms")  # a count once _is_count says so
    if not _is_count(ms) or ms > MAX_MS:
        raise CassetteError(path, f"{where}.ms must be a whole number of milliseconds from 0 to {MAX_MS}, not {ms!r}")
    payloads = [name for name in PAYLOAD_FIELDS if name in frame]
    if len(payloads) != 1:
        raise CassetteError(path, f"{where} must hold exactly one of {', '.join(PAYLOAD_FIELDS)}")
    kind = payloads[0]
    if kind in ("base64", "sidecar") and frame["frame"] == "text":
        raise CassetteError(path, f"{where}: a text frame holds UTF-8 text, never {kind} bytes")
    if kind == "text" and not isinstance(frame["text"], str):
        raise CassetteError(path, f"{where}.text must be a string")
    if kind == "base64" and not (isinstance(frame["base64"], str) and _valid_base64(frame["base64"])):
        raise CassetteError(path, f"{where}.base64 is not base64")
    if kind == "sidecar":
        _check_span(path, f"{where}.sidecar", frame["sidecar"], sidecar_bytes, spans)
    if kind == "json":
        try:
            _compact(frame["json"])
        except (ValueError, RecursionError):
            raise CassetteError(path, f"{where}.json cannot be sent as JSON (NaN or infinity)") from None
    json_format = frame.get("json_format")
    if json_format is not None and (kind != "json" or json_format not in JSON_FORMATS):
        raise CassetteError(path, f"{where}.json_format must be one of {', '.join(JSON_FORMATS)}, on a JSON frame")
    moved = frame.get("in_sidecar")
    if moved is not None:
        if kind != "json" or not isinstance(moved, list):
            raise CassetteError(path, f"{where}.in_sidecar must be a list, in a JSON frame")
        for j, entry in enumerate(moved):
            _check_span(path, f"{where}.in_sidecar[{j}]", entry, sidecar_bytes, spans)
            if not _points_to_string(frame["json"], entry.get("path")):
                raise CassetteError(path, f"{where}.in_sidecar[{j}].path must name a string in the frame's JSON")
    digest = frame.get("match_digest")
    if digest is not None and (
        frame["from"] != "client" or not isinstance(digest, str) or not _HEX32.fullmatch(digest)
    ):
        raise CassetteError(path, f"{where}.match_digest must be 32 hex digits, on a client frame")


def _valid_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _check_span(
    path: Path | str, where: str, span: Any, sidecar_bytes: int | None, spans: list[tuple[int, int, str]]
) -> None:
    if sidecar_bytes is None:
        raise CassetteError(path, f"{where} points into a sidecar, and session.sidecar names none")
    if not isinstance(span, dict) or not _is_count(span.get("offset")) or not _is_count(span.get("length")):
        raise CassetteError(path, f"{where} must hold a whole offset and length")
    if span["offset"] + span["length"] > sidecar_bytes:
        raise CassetteError(path, f"{where} ends past the sidecar's {sidecar_bytes} bytes")
    spans.append((span["offset"], span["length"], where))


def _points_to_string(value: Any, path: Any) -> bool:
    if not isinstance(path, list) or not path:
        return False
    for step in path:
        if (isinstance(value, dict) and isinstance(step, str) and step in value) or (
            isinstance(value, list) and _is_count(step) and step < len(value)
        ):
            value = value[step]
        else:
            return False
    return isinstance(value, str)


def _set(value: Any, path: Sequence[str | int], new: str) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


def _check_close(path: Path | str, close: Any) -> None:
    if close is None:
        return
    if not isinstance(close, dict) or close.get("by") not in SOURCES:
        raise CassetteError(path, "session.close must be an object whose `by` is client or server")
    code, reason = close.get("code"), close.get("reason", "")
    if code is not None and not (_is_count(code) and 1000 <= code <= 4999):
        raise CassetteError(path, f"session.close.code must be a WebSocket close code (1000 to 4999), not {code!r}")
    if not isinstance(reason, str) or len(reason.encode("utf-8", "surrogatepass")) > MAX_REASON_BYTES:
        raise CassetteError(path, f"session.close.reason must be a string of at most {MAX_REASON_BYTES} bytes")


def session_files(path: Path) -> list[Path]:
    """The files that may hold the sessions recorded for the upgrade whose cassette is `path` (`<key>.json`):
    it, then every `<key>.<n>.json` beside it (the other conversations to that URL), in name order. Temp files (`.<name>.tmp`) and sidecars (`.bin`) are not among them."""
    stem = path.name.removesuffix(".json")
    try:
        names = set(os.listdir(path.parent))
    except (FileNotFoundError, NotADirectoryError):
        return []
    numbers = sorted(
        int(middle)
        for name in names
        if name.startswith(f"{stem}.") and name.endswith(".json")
        and (middle := name[len(stem) + 1 : -len(".json")]).isdigit() and middle[0] != "0"
    )  # fmt: skip
    return ([path] if path.name in names else []) + [path.parent / f"{stem}.{n}.json" for n in numbers]


def sidecar_of(path: Path, cassette: dict[str, Any]) -> Path | None:
    """The sidecar file a session cassette names (beside it), or None."""
    described = cassette.get("session", {}).get("sidecar")
    return Path(path).parent / described["file"] if described else None


def read_session(
    path: Path, cassette: dict[str, Any], root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE
) -> Session:
    """The session of a validated session cassette, its sidecar read and checked (inside `root`, at most
    `max_size` bytes, the size and SHA-256 the cassette names)."""
    session = cassette["session"]
    sidecar = b""
    described = session.get("sidecar")
    sidecar_path = sidecar_of(path, cassette)
    if sidecar_path is not None:
        try:
            sidecar = read_limited(sidecar_path, root, max_size)
        except FileNotFoundError:
            raise CassetteError(
                path, f"its sidecar {described['file']} is missing; restore it or record again"
            ) from None
        if len(sidecar) != described["bytes"] or hashlib.sha256(sidecar).hexdigest() != described["sha256"]:
            raise CassetteError(path, f"its sidecar {described['file']} is not the file it was recorded with")
    frames, digests, total = [], {}, 0
    for i, entry in enumerate(session["frames"]):
        payload = restored_payload(entry, sidecar)
        total += len(payload)
        if total > 4 * max_size:  # bounded by construction (disjoint spans); checked as built all the same
            raise CassetteError(path, f"its frames hold more than {4 * max_size} bytes")
        frames.append(Frame(entry["from"] == "client", entry["ms"], entry["frame"] == "text", payload))
        if "match_digest" in entry:
            digests[i] = entry["match_digest"]
    close = session.get("close")
    return Session(
        tuple(frames),
        Close(close["by"], close.get("code"), close.get("reason", "")) if close is not None else None,
        tuple(session.get("ignore", [])),
        digests,
        session.get("digest_settings"),
    )


def restored_payload(entry: dict[str, Any], sidecar: bytes) -> bytes:
    """A stored frame's bytes, base64 strings put back from the sidecar."""
    if "json" in entry:
        value = entry["json"]
        moved = entry.get("in_sidecar")
        if moved:
            value = copy.deepcopy(value)
            for span in moved:
                data = sidecar[span["offset"] : span["offset"] + span["length"]]
                _set(value, span["path"], base64.b64encode(data).decode("ascii"))
        return JSON_FORMATS[entry.get("json_format", "compact")](value).encode("utf-8")
    if "text" in entry:
        text: str = entry["text"]
        return text.encode("utf-8")
    if "base64" in entry:
        return base64.b64decode(entry["base64"])
    span = entry["sidecar"]
    return sidecar[span["offset"] : span["offset"] + span["length"]]


def redact_frames(
    frames: list[dict[str, Any]],
    payloads: Sequence[bytes],
    redact: Callable[[Any, tuple[Any, ...]], Any],
    digest: Callable[[bytes], str],
) -> bool:
    """Apply `redact(value, path)` to each stored frame's JSON or text, in place; a client frame it changed gets
    `match_digest`, the `digest` of its real bytes, since its stored copy can no longer be compared. True when
    some client frame got one."""
    digested = False
    for i, entry in enumerate(frames):
        for name in ("json", "text"):
            if name in entry:
                new = redact(entry[name], ("session", "frames", i, name))
                if new != entry[name]:
                    entry[name] = new
                    if entry["from"] == "client":
                        entry["match_digest"] = digest(payloads[i])
                        digested = True
    return digested
