"""Request bodies as the key reads them: JSON with canonical numbers, multipart parts without their
boundary, and the ignored paths taken out."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from ..fast_json import decoder
from .url import raw_bytes

KNOWN_SCALARS = frozenset(
    {"model", "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "stream", "n", "seed",
     "presence_penalty", "frequency_penalty", "user"}
)  # fmt: skip
"""Top-level request fields that are a string, number or boolean in every LLM API: a path into one can never match."""


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


def parse_json_body(body: bytes) -> tuple[bool, Any]:
    """(True, value) when the body is JSON text, else (False, None); never raises."""
    if not body:
        return False, None
    try:
        return True, json.loads(body)
    except (ValueError, RecursionError):
        return False, None


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
