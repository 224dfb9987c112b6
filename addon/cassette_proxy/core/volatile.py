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
from typing import Any, NamedTuple

PRESETS = {
    "pydantic-ai": r"pyd_ai_[0-9a-f]{32}",
}
"""Id shapes known to be made up by the client library, not returned by an API: usable by name.

pydantic-ai: `_utils.generate_tool_call_id()` is `f"pyd_ai_{uuid.uuid4().hex}"`, used when a model
(Gemini, for one) returns a tool call without an id.
"""

_QUANTIFIERS = frozenset("?*+{")
_LITERAL = re.compile(r"[A-Za-z0-9_\-:/]")


class ValuePattern(NamedTuple):
    source: str
    """As given: a preset name or a regular expression."""
    regex: re.Pattern
    label: str
    """The placeholder's readable start: the literal prefix of the expression (`pyd_ai_`)."""


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


def with_placeholders(value: Any, patterns: Sequence[ValuePattern]) -> Any:
    """A copy of a parsed JSON value with every match in a string value replaced by `<label>…#<n>`.

    Objects are walked in sorted key order, so the numbering (and the key) does
    not depend on the order a client wrote the fields in.
    """
    if not patterns:
        return value
    seen: dict[str, str] = {}

    def replace(match: re.Match, label: str) -> str:
        text = match.group(0)
        if text not in seen:
            seen[text] = f"{label}…#{len(seen) + 1}"
        return seen[text]

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            for pattern in patterns:
                item = pattern.regex.sub(lambda m, label=pattern.label: replace(m, label), item)
            return item
        if isinstance(item, dict):
            return {name: walk(item[name]) for name in sorted(item)}
        if isinstance(item, list):
            return [walk(x) for x in item]
        return item

    return walk(value)
