"""JSON we did not write, read bounded in depth: one hostile file stays that file's error.

`[[[[…]]]]` a thousand levels deep is 2 KB. `json.loads` gives up on it with a
RecursionError (not a ValueError, so past every `except ValueError`), and one
a little shallower parses, then breaks whichever reader walks it recursively
(the diff, redaction, the conversation, the viewer) far from the file that
caused it. So every cassette, and every JSON document a cassette holds as text
(a stream's events, a big answer stored as its text, a tool call's
arguments), is read through `loads`: deeper than MAX_DEPTH, or too deep for the
parser, is a ValueError like any other text that is not JSON.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any

MAX_DEPTH = 100
"""The deepest nesting of arrays and objects read. Real API bodies nest a few levels, a tool's JSON schema a few
dozen; a reader that recurses once or twice a level stays far inside Python's limit of 1,000 frames."""


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH: refused as not JSON, the message says so."""


_CONTAINERS = frozenset({dict, list})


def nested_deeper(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value` (as `json.loads` builds them: plain
    dicts and lists). Level by level, without recursing: each level's items gathered at C speed, and a level whose
    items are all scalars (a vector of floats, a stream's events) ends the walk without a Python step per item."""
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(limit):
        if not level:
            return False
        items = list(chain.from_iterable([item.values() if type(item) is dict else item for item in level]))
        if _CONTAINERS.isdisjoint(map(type, items)):
            return False
        level = [item for item in items if type(item) in _CONTAINERS]
    return bool(level)


def check_depth(text: str | bytes, value: Any) -> Any:
    """`value`, parsed from `text`, unless it nests deeper than MAX_DEPTH (TooDeep). A text with no more opening
    brackets than MAX_DEPTH cannot, and is not walked."""
    opening = text.count("[") + text.count("{") if isinstance(text, str) else text.count(b"[") + text.count(b"{")
    if opening > MAX_DEPTH and nested_deeper(value):
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads(text, **options)`, bounded in depth: TooDeep (a ValueError) past MAX_DEPTH or past what the
    parser's own stack allows."""
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    return check_depth(text, value)
