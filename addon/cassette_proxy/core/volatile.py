"""Volatile values: strings a client makes up on every run (tool-call ids, trace ids), keyed by shape.

An agent framework that invents an id (pydantic-ai's `pyd_ai_<32 hex>` when
the model returned none) sends it back in later requests, so every run would
miss. Ignoring the fields that carry it drops the real, deterministic ids from
the key too. A value pattern instead replaces each match inside any string
value by a numbered placeholder (`pyd_ai_…#1`), numbered by first appearance:
the same id stays the same placeholder, two different ids stay different.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
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


@dataclass(frozen=True)
class ValuePattern:
    source: str
    """As given: a preset name or a regular expression."""
    regex: re.Pattern[str]
    label: str
    """The placeholder's readable start: the literal prefix of the expression (`pyd_ai_`)."""
    fields: frozenset[str] | None = None
    """Only string values of these object fields (or in lists under them); None: every string value. A framework
    preset narrows a shape as common as a UUID to where only a client makes it up (a tool call's id)."""
    needle: str = ""
    """Text every match contains, looked for before the expression runs: presets are on for every request, and
    a substring test is far cheaper than a regular expression over a long prompt. Empty: always run it."""
    raw_needle: bytes = field(init=False, repr=False)
    raw_fields: tuple[bytes, ...] | None = field(init=False, repr=False)
    """The needle, and the fields as the ends of JSON object keys (`id"`), as `could_match` looks for them."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw_needle", self.needle.encode())
        object.__setattr__(self, "raw_fields", None if self.fields is None else _key_ends(self.fields))


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


def with_placeholders(value: Any, patterns: Sequence[ValuePattern], raw: bytes | None = None) -> Any:
    """A copy of a parsed JSON value with every match in a string value replaced by `<label>…#<n>`.

    Objects are walked in sorted key order, so the numbering (and the key) does
    not depend on the order a client wrote the fields in. `raw`, the JSON text
    `value` was parsed from, lets a body no pattern can match skip the walk.
    """
    if not patterns or (raw is not None and not could_match(raw, patterns)):
        return value
    seen: dict[str, str] = {}

    def replace(match: re.Match[str], label: str) -> str:
        text = match.group(0)
        if text not in seen:
            seen[text] = f"{label}…#{len(seen) + 1}"
        return seen[text]

    def walk(item: Any, field: str | None) -> Any:
        if isinstance(item, str):
            for pattern in patterns:
                if (pattern.fields is None or field in pattern.fields) and pattern.needle in item:
                    item = pattern.regex.sub(partial(replace, label=pattern.label), item)
            return item
        if isinstance(item, dict):
            return {name: walk(item[name], name) for name in sorted(item)}
        if isinstance(item, list):
            return [walk(x, field) for x in item]
        return item

    return walk(value, None)


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
