"""Volatile values: strings a client makes up on every run (tool-call ids, trace ids), keyed by shape.

An agent framework that invents an id (pydantic-ai's `pyd_ai_<32 hex>` when
the model returned none) sends it back in later requests, so every run would
miss. Ignoring the fields that carry it drops the real, deterministic ids from
the key too. A value pattern instead replaces each match inside any string
value by a numbered placeholder (`pyd_ai_…#1`), numbered by first appearance:
the same id stays the same placeholder, two different ids stay different.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

PRESETS = {
    "pydantic-ai": r"pyd_ai_[0-9a-f]{32}",
}
"""Id shapes known to be made up by the client library, not returned by an API: usable by name.

pydantic-ai: `_utils.generate_tool_call_id()` is `f"pyd_ai_{uuid.uuid4().hex}"`, used when a model
(Gemini, for one) returns a tool call without an id.
"""

_QUANTIFIERS = frozenset("?*+{")
_LITERAL = re.compile(r"[A-Za-z0-9_\-:/]")


_PLACE_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(?:type=([A-Za-z0-9_|]+))?\])?")


@dataclass(frozen=True)
class Place:
    """Where in a request body a framework puts a value: `messages[].content[type=tool_use].id`.

    A dotted path of object keys, `[]` after a key for every item of the list under it, and `[type=a|b]`
    for only the items whose `type` is one of those (a tool call's block, not a user's block beside it).
    """

    text: str
    shape: tuple[str, ...]
    """The keys, `*` for a list item: the path a body walk compares."""
    types: frozenset[str] | None = None
    """The `type` the object holding the value must have (the last `[type=…]`); None: any."""


def parse_place(text: str) -> Place:
    """A Place from its written form; ValueError for one that is not (our own tables, so a bug of ours)."""
    shape: list[str] = []
    types = None
    for segment in text.split("."):
        match = _PLACE_SEGMENT.fullmatch(segment)
        if match is None:
            raise ValueError(f"{text!r} is not a place: {segment!r} is no key, key[] or key[type=a|b]")
        shape.append(match.group(1))
        if segment.endswith("]"):
            shape.append("*")
            types = frozenset(match.group(2).split("|")) if match.group(2) else None
        elif types is not None and len(shape) > 1 and shape[-2] != "*":
            raise ValueError(f"{text!r}: a [type=…] filter names the object holding the value, so it comes last")
    return Place(text, tuple(shape), types)


@dataclass(frozen=True)
class ValuePattern:
    source: str
    """As given: a preset name or a regular expression."""
    regex: re.Pattern[str]
    label: str
    """The placeholder's readable start: the literal prefix of the expression (`pyd_ai_`)."""
    places: tuple[Place, ...] | None = None
    """Only string values at these places; None: every string value. A framework preset names where its
    framework puts the value (a tool call's id field), never a key name anywhere: a tool's arguments and
    results, a user's metadata and schemas keep every value they hold."""
    needle: str = ""
    """Text every match contains, looked for before the expression runs: presets are on for every request, and
    a substring test is far cheaper than a regular expression over a long prompt. Empty: always run it."""
    preset: bool = False
    """A framework preset's rule (`source` is the preset's name), not the user's own pattern."""
    raw_needle: bytes = field(init=False, repr=False, compare=False)
    raw_fields: tuple[bytes, ...] | None = field(init=False, repr=False, compare=False)
    """The needle, and the places' last keys as the ends of JSON object keys (`id"`), as `could_match` looks for them."""
    by_shape: Mapping[tuple[str, ...], frozenset[str] | None] | None = field(init=False, repr=False, compare=False)
    """The places by shape: what the walk looks a value's path up in (types: any of the places' filters)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw_needle", self.needle.encode())
        if self.places is None:
            object.__setattr__(self, "raw_fields", None)
            object.__setattr__(self, "by_shape", None)
            return
        object.__setattr__(self, "raw_fields", _key_ends(frozenset(p.shape[-1] for p in self.places)))
        by_shape: dict[tuple[str, ...], frozenset[str] | None] = {}
        for place in self.places:
            if place.shape in by_shape:
                before = by_shape[place.shape]
                by_shape[place.shape] = None if before is None or place.types is None else before | place.types
            else:
                by_shape[place.shape] = place.types
        object.__setattr__(self, "by_shape", by_shape)

    def covers(self, shape: tuple[str, ...], holder: Mapping[str, Any]) -> bool:
        """Whether a string at `shape`, held by the object `holder`, is one of this pattern's places."""
        if self.by_shape is None:
            return True
        if shape not in self.by_shape:
            return False
        types = self.by_shape[shape]
        return types is None or holder.get("type") in types


@dataclass(frozen=True)
class Replaced:
    """A value a pattern replaced: where (`input[1].call_id`), by which pattern (a preset's name), as what."""

    path: str
    source: str
    placeholder: str
    preset: bool = False

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "preset": self.source, "placeholder": self.placeholder}


def _key_ends(fields: frozenset[str]) -> tuple[bytes, ...]:
    """The fields as the ends of JSON object keys (`id"`), less those that contain another (`call_id"` holds
    `id"`): each is a search of the whole body, and one absent end rules out every key that contains it."""
    ends = sorted({f'{name}"'.encode() for name in fields}, key=len)
    return tuple(end for i, end in enumerate(ends) if not any(shorter in end for shorter in ends[:i]))


def literal_prefix(expression: str) -> str:
    """The characters every match starts with, as far as they can be read off the expression plainly."""
    prefix = []
    for i, char in enumerate(expression):
        if not _LITERAL.fullmatch(char) or expression[i + 1 : i + 2] in _QUANTIFIERS:
            break
        prefix.append(char)
    return "".join(prefix)


def parse_value_patterns(spec: Iterable[str]) -> tuple[ValuePattern, ...]:
    """Preset names or regular expressions; ValueError naming the entry for one that cannot work."""
    patterns = []
    for raw in spec:
        text = raw.strip()
        expression = PRESETS.get(text, text)
        if not expression:
            raise ValueError(
                f"empty value pattern {raw!r}: give a regular expression or a preset ({', '.join(PRESETS)})"
            )
        try:
            regex = re.compile(expression)
        except re.error as e:
            raise ValueError(f"value pattern {raw!r} is not a regular expression: {e}") from None
        if regex.search(""):
            raise ValueError(f"value pattern {raw!r} matches the empty string, so it would match everywhere")
        patterns.append(ValuePattern(text, regex, literal_prefix(expression)))
    return tuple(patterns)


def expressions(patterns: Sequence[ValuePattern]) -> list[str]:
    """The regular expressions behind the patterns, presets resolved: what a cassette stores."""
    return [p.regex.pattern for p in patterns]


def with_placeholders(
    value: Any, patterns: Sequence[ValuePattern], raw: bytes | None = None, replaced: list[Replaced] | None = None
) -> Any:
    """A copy of a parsed JSON value with every match in a string value replaced by `<label>…#<n>`.

    Objects are walked in sorted key order, so the numbering (and the key) does
    not depend on the order a client wrote the fields in. `raw`, the JSON text
    `value` was parsed from, lets a body no pattern can match skip the walk.
    `replaced`, when given, gets one `Replaced` per value replaced, in walk order.
    """
    if not patterns or (raw is not None and not could_match(raw, patterns)):
        return value
    seen: dict[str, str] = {}
    on_the_way = _on_the_way(tuple(patterns))

    def replace(match: re.Match[str], label: str) -> str:
        text = match.group(0)
        if text not in seen:
            seen[text] = f"{label}…#{len(seen) + 1}"
        return seen[text]

    def walk(item: Any, shape: tuple[str, ...], holder: Mapping[str, Any], path: tuple[str | int, ...]) -> Any:
        if isinstance(item, str):
            for pattern in patterns:
                if pattern.needle in item and pattern.covers(shape, holder):
                    new = pattern.regex.sub(partial(replace, label=pattern.label), item)
                    if replaced is not None and new != item:
                        replaced.append(Replaced(_path_text(path), pattern.source, new, pattern.preset))
                    item = new
            return item
        if isinstance(item, dict):
            out = {}
            for name in sorted(item):
                inner = (*shape, name)
                if on_the_way is not None and inner not in on_the_way:
                    out[name] = item[name]  # no place below: a prompt or a tool's result is not walked
                else:
                    out[name] = walk(item[name], inner, item, (*path, name) if replaced is not None else ())
            return out
        if isinstance(item, list):
            inner = (*shape, "*")
            if on_the_way is not None and inner not in on_the_way:
                return item
            if replaced is None:
                return [walk(x, inner, holder, ()) for x in item]
            return [walk(x, inner, holder, (*path, i)) for i, x in enumerate(item)]
        return item

    return walk(value, (), {}, ())


@functools.lru_cache(maxsize=16)
def _on_the_way(patterns: tuple[ValuePattern, ...]) -> frozenset[tuple[str, ...]] | None:
    """Every shape on the way to a place of the patterns, the places included: where the walk goes down; None
    when a pattern has no places (it looks at every string value)."""
    shapes: set[tuple[str, ...]] = set()
    for pattern in patterns:
        if pattern.places is None:
            return None
        for place in pattern.places:
            shapes.update(place.shape[:n] for n in range(1, len(place.shape) + 1))
    return frozenset(shapes)


def _path_text(path: tuple[str | int, ...]) -> str:
    """A path as a diff names a field: `input[1].call_id`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


def could_match(raw: bytes, patterns: Sequence[ValuePattern]) -> bool:
    """Whether any pattern may match inside the JSON text `raw`: its needle and one of its fields (as a key's end,
    `name"`) appear in it. Presets are on for every request, and a substring search of the bytes is far cheaper than
    walking the parsed body. A `\\u` escape can spell any character, and JSON may be UTF-16 or UTF-32 (NUL bytes
    among the first four, as `json.loads` tells them), so such bodies are always walked.
    """
    if (b"\\" in raw and b"\\u" in raw) or b"\x00" in raw[:4]:  # a byte's search is a memchr: far faster
        return True
    for pattern in patterns:  # loops, not any(): on a small body a generator costs more than the searches
        if pattern.raw_needle in raw:
            if pattern.raw_fields is None:
                return True
            for key_end in pattern.raw_fields:
                if key_end in raw:
                    return True
    return False
