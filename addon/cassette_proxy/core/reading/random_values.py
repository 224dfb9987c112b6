"""Values that look made up on each run: what a miss says when they are all that changed.

A client that invents an id or a timestamp per run (a tool-call UUID, a trace id,
`created_at`) misses on every replay, and the 409's diff alone leaves the user to
work out that the value is random and to write a rule for it. When every
difference between a request and its closest recording is such a value, of the
same shape on both sides, the miss says so and gives the value pattern (or the
ignore path, for a number) that keys it by shape.

Pure: no mitmproxy import. Used by core/reading/miss.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .diff import ABSENT, changes

_SEPARATORS = frozenset("-_:./|#")
MADE_UP_LENGTH = 16384
"""A string longer than this is not read for a made-up value (an encrypted reasoning blob is shorter)."""
MADE_UP_PREFIX = 64
"""A made-up tail starts within this many characters (`agents-sdk:run:`): trying every split of a megabyte data URL
(base64 is full of `/`) as a prefix made a miss's search quadratic in the string's length, minutes long."""


@dataclass(frozen=True)
class Shape:
    what: str
    """In words: "a UUID", "32 hex digits"."""
    expression: str | None
    """The value pattern that matches the value (prefix included); None for a number, keyed by path instead."""


@dataclass(frozen=True)
class RandomChange:
    field: str
    """As the diff names it: `input[1].call_id`."""
    shape: Shape

    @property
    def ignore_path(self) -> str:
        """The field as `cassette_ignore` writes it: `input.1.call_id`."""
        return re.sub(r"\[(\d+)\]", r".\1", self.field)


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]{16,}")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_TOKEN = re.compile(r"[A-Za-z0-9_\-+/]{20,}={0,2}")
_EPOCH_DIGITS = re.compile(r"1\d{9}|1\d{12}")


def _tail_shape(tail: str) -> tuple[str, str] | None:
    """(what, expression) when `tail` as a whole has a random-looking shape."""
    if _UUID.fullmatch(tail):
        hexdigits = "0-9a-f" if tail == tail.lower() else "0-9A-F" if tail == tail.upper() else "0-9a-fA-F"
        return "a UUID", "-".join(f"[{hexdigits}]{{{n}}}" for n in (8, 4, 4, 4, 12))
    if _EPOCH_DIGITS.fullmatch(tail):
        return "a Unix timestamp", f"[0-9]{{{len(tail)}}}"
    if _HEX.fullmatch(tail) and any(c.isdigit() for c in tail):
        hexdigits = "0-9a-f" if tail == tail.lower() else "0-9A-F" if tail == tail.upper() else "0-9a-fA-F"
        return f"{len(tail)} hex digits", f"[{hexdigits}]{{{len(tail)}}}"
    if _ISO.fullmatch(tail):
        return (
            "a timestamp",
            r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9:]{4,5})?",
        )
    # Upper and lower case and a digit, as nearly every random 20-character token has and names never do
    # (`gpt-4o-mini-2024-07-18` changing to another model must not read as random).
    if _TOKEN.fullmatch(tail) and all(any(test(c) for c in tail) for test in (str.isdigit, str.isupper, str.islower)):
        if any(c in "+/=" for c in tail):
            length = len(tail.rstrip("="))
            return f"a base64 token of {length} characters", f"[A-Za-z0-9+/]{{{length}}}={{0,2}}"
        return f"a random token of {len(tail)} characters", f"[A-Za-z0-9_-]{{{len(tail)}}}"
    return None


def _splits(text: str) -> Iterator[int]:
    """Where a made-up tail may start: the beginning, or just after a separator (`agents-sdk:run:` + hex)."""
    yield 0
    for i in range(1, min(len(text), MADE_UP_PREFIX + 1)):
        if text[i - 1] in _SEPARATORS:
            yield i


def _literal(prefix: str) -> str:
    """A prefix as a regular expression that still reads as itself (`-`, `_`, `:` and `/` need no escape)."""
    return "".join(c if c.isalnum() or c in "-_:/" else re.escape(c) for c in prefix)


def string_shapes(text: str) -> list[tuple[str, Shape]]:
    """Every (prefix, shape) reading of a string as a fixed prefix and a random-looking rest, shortest prefix first."""
    found: list[tuple[str, Shape]] = []
    if len(text) > MADE_UP_LENGTH:
        return found
    for i in _splits(text):
        tail = _tail_shape(text[i:])
        if tail is not None:
            found.append((text[:i], Shape(tail[0], _literal(text[:i]) + tail[1])))
    return found


def common_shape(recorded: str, current: str) -> Shape | None:
    """The shape both strings share with the longest common prefix (`sess_` + a token, not a 25-character token)."""
    shared = set(string_shapes(recorded)) & set(string_shapes(current))
    return max(shared, key=lambda reading: len(reading[0]))[1] if shared else None


def _number_shape(value: Any) -> Shape | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if 1_000_000_000 <= value < 10_000_000_000 or 1_000_000_000_000 <= value < 10_000_000_000_000:
        return Shape("a Unix timestamp", None)
    return None


def random_change(field: str, recorded: Any, current: Any) -> RandomChange | None:
    """The change of one field, when both sides have the same random-looking shape (and so the same pattern)."""
    if recorded is ABSENT or current is ABSENT:
        return None
    if isinstance(recorded, str) and isinstance(current, str):
        shape = common_shape(recorded, current)
        return RandomChange(field, shape) if shape is not None else None
    shape = _number_shape(recorded)
    if shape is not None and _number_shape(current) == shape:
        return RandomChange(field, shape)
    return None


def only_random_changes(recorded: dict[str, Any], current: dict[str, Any]) -> list[RandomChange] | None:
    """Every difference between two identities (key.identity), when each is a random-looking body value; else None.

    The method, URL and key headers must be equal, and both bodies JSON.
    """
    if any(recorded[name] != current[name] for name in ("method", "url", "headers")):
        return None
    before, now = recorded["body"], current["body"]
    if not (isinstance(before, dict) and isinstance(now, dict) and "json" in before and "json" in now):
        return None
    found = []
    for field, old, new in changes(before["json"], now["json"]):
        change = random_change(field, old, new)
        if change is None:
            return None
        found.append(change)
    return found or None
