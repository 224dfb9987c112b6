"""Field-level differences between two parsed JSON values: what a miss, `cassette diff` and `cassette view` show.

A miss is answered while the client waits, so the work is bounded whatever the
bodies hold: a long string is compared as a whole and described by its length
and where it first differs (never searched character by character), lists past
MAX_ALIGNED_ITEMS are compared index by index, nesting past MAX_DEPTH is one
change, and at most MAX_CHANGES changes are listed.
"""

from __future__ import annotations

import json
from collections import Counter
from difflib import SequenceMatcher
from typing import Any

LONG_STRING = 1000
"""A string longer than this is described (length, first difference), not quoted: an image as a data URL."""
MAX_ALIGNED_ITEMS = 500
"""Lists up to this long are aligned (an inserted item is one change); longer ones are compared index by index."""
MAX_DEPTH = 64
"""Below this depth a differing value is one change: a hostile nesting cannot exhaust the stack."""
MAX_CHANGES = 1000
"""Changes listed at most; a diff past it ends with TRUNCATED."""


def shown(value: Any, limit: int = 80) -> str:
    if isinstance(value, str) and len(value) > limit:
        value = value[:limit]  # dumping a megabyte to show 80 characters would cost the megabyte
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""The value on the side of a change where the field does not exist (added or removed)."""

TRUNCATED = ("…", ABSENT, ABSENT)
"""The last change of a diff cut at MAX_CHANGES."""


class Reordered(list[Any]):
    """The recorded side of a list whose items are all still there, in another order: one change, not one per item.

    A list (the recorded items), so that every reader that shows a value shows it; `moves` says which went where.
    """

    def __init__(self, items: list[Any], moves: list[tuple[int, int]]) -> None:
        super().__init__(items)
        self.moves = moves


class _Enough(Exception):
    """MAX_CHANGES reached: stop walking."""


def changes(recorded: Any, current: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(field path, recorded value, current value) of every field that differs; ABSENT where a side lacks it.

    A list is aligned on its items, so an inserted or removed item is one change (the index is the side's own:
    the recorded index of a removed item, the current index of an added one) and a reordered list is one change
    whose recorded side is `Reordered`. `differences` words these for the 409; `cassette view` shows them side
    by side.
    """
    out: list[tuple[str, Any, Any]] = []
    try:
        _walk(recorded, current, path, out, 0)
    except _Enough:
        out.append(TRUNCATED)
    return out


def _add(out: list[tuple[str, Any, Any]], change: tuple[str, Any, Any]) -> None:
    if len(out) >= MAX_CHANGES:
        raise _Enough
    out.append(change)


def _walk(recorded: Any, current: Any, path: str, out: list[tuple[str, Any, Any]], depth: int) -> None:
    if depth >= MAX_DEPTH:
        if not _same(recorded, current):
            _add(out, (path or "body", recorded, current))
        return
    if isinstance(recorded, dict) and isinstance(current, dict):
        for name in sorted(recorded.keys() | current.keys()):
            sub = f"{path}.{name}" if path else name
            if name not in current:
                _add(out, (sub, recorded[name], ABSENT))
            elif name not in recorded:
                _add(out, (sub, ABSENT, current[name]))
            else:
                _walk(recorded[name], current[name], sub, out, depth + 1)
        return
    if isinstance(recorded, list) and isinstance(current, list):
        _list(recorded, current, path, out, depth)
        return
    if not _same(recorded, current):
        _add(out, (path or "body", recorded, current))


def _same(recorded: Any, current: Any) -> bool:
    try:
        return type(recorded) is type(current) and recorded == current
    except RecursionError:  # nested deeper than the interpreter compares: not provably the same
        return False


def _list(recorded: list[Any], current: list[Any], path: str, out: list[tuple[str, Any, Any]], depth: int) -> None:
    if _same(recorded, current):
        return
    if max(len(recorded), len(current)) > MAX_ALIGNED_ITEMS:
        _by_index(recorded, current, path, out, depth)
        return
    try:
        before, after = [_item_text(item) for item in recorded], [_item_text(item) for item in current]
    except (RecursionError, TypeError, ValueError):
        _by_index(recorded, current, path, out, depth)
        return
    if before != after and Counter(before) == Counter(after):
        _add(out, (path or "body", Reordered(recorded, _moves(before, after)), current))
        return
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        for k in range(paired):  # the same place, changed: its fields
            _walk(recorded[i1 + k], current[j1 + k], f"{path}[{j1 + k}]", out, depth + 1)
        for i in range(i1 + paired, i2):
            _add(out, (f"{path}[{i}]", recorded[i], ABSENT))
        for j in range(j1 + paired, j2):
            _add(out, (f"{path}[{j}]", ABSENT, current[j]))


def _by_index(recorded: list[Any], current: list[Any], path: str, out: list[tuple[str, Any, Any]], depth: int) -> None:
    for i in range(max(len(recorded), len(current))):
        sub = f"{path}[{i}]"
        if i >= len(current):
            _add(out, (sub, recorded[i], ABSENT))
        elif i >= len(recorded):
            _add(out, (sub, ABSENT, current[i]))
        else:
            _walk(recorded[i], current[i], sub, out, depth + 1)


def _item_text(item: Any) -> str:
    """An item as canonical text: equal texts are equal items (1 and 1.0, true and 1 stay apart, as `_same` has it)."""
    return json.dumps(item, sort_keys=True, ensure_ascii=False)


def _moves(before: list[str], after: list[str]) -> list[tuple[int, int]]:
    """(recorded index, current index) of each item that moved, in the current order."""
    where: dict[str, list[int]] = {}
    for i, text in enumerate(before):
        where.setdefault(text, []).append(i)
    moves = []
    for j, text in enumerate(after):
        i = where[text].pop(0)
        if i != j:
            moves.append((i, j))
    return moves


def first_difference(recorded: str, current: str) -> int:
    """The index of the first character where two strings differ (the shorter one's length when one is a prefix).

    A binary search over prefixes compared whole: a handful of comparisons in C, not one step per character.
    """
    low, high = 0, min(len(recorded), len(current))
    while low < high:
        middle = (low + high + 1) // 2
        if recorded[:middle] == current[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _worded(where: str, old: Any, new: Any) -> str:
    if old is ABSENT and new is ABSENT:  # TRUNCATED
        return f"… and more (listed up to {MAX_CHANGES})"
    if new is ABSENT:
        return f"{where}: removed (was {shown(old)})"
    if old is ABSENT:
        return f"{where}: added {shown(new)}"
    if isinstance(old, Reordered):
        moved = ", ".join(f"[{i}] → [{j}]" for i, j in old.moves[:6]) + (" …" if len(old.moves) > 6 else "")
        return f"{where}: the same {len(new)} items in another order ({moved})"
    if isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > LONG_STRING:
        at = first_difference(old, new)
        return (
            f"{where}: a long value differs ({len(old):,} → {len(new):,} characters, the same up to character "
            f"{at:,}: {shown(old[max(0, at - 20) : at + 40])} → {shown(new[max(0, at - 20) : at + 40])})"
        )
    return f"{where}: {shown(old)} → {shown(new)}"


def in_context(where: str, old: Any, new: Any) -> str:
    """One change worded with two strings shown around where they first differ, however long: two event texts
    of a stream that differ only in an id look alike in their first 80 characters."""
    if isinstance(old, str) and isinstance(new, str) and not isinstance(old, Reordered):
        at = first_difference(old, new)
        if at > 20:
            return f"{where}: …{shown(old[at - 20 : at + 40])} → …{shown(new[at - 20 : at + 40])}"
    return _worded(where, old, new)


def differences(recorded: Any, current: Any) -> list[str]:
    """Readable field-level differences between two parsed bodies, recorded → current."""
    return [_worded(where, old, new) for where, old, new in changes(recorded, current)]


MAX_WEIGHED_VALUES = 10_000
"""An added or removed value is counted up to this many values: the weight of a change stays bounded."""


def weighed_differences(recorded: Any, current: Any) -> tuple[list[str], int]:
    """`differences`, and how many values they change: what ranks the closest recordings of a miss.

    A changed value, a reordered list or a cut diff weighs 1; an added or removed value weighs the values it
    holds, so a request that only gained three `title` fields is nearer than one with another prompt and no
    `generationConfig` at all, though the latter lists fewer lines.
    """
    found = changes(recorded, current)
    return [_worded(where, old, new) for where, old, new in found], sum(_weight(old, new) for _, old, new in found)


def _weight(old: Any, new: Any) -> int:
    if old is ABSENT and new is ABSENT:  # TRUNCATED
        return 1
    if old is ABSENT:
        return _values_in(new)
    if new is ABSENT:
        return _values_in(old)
    return 1


def _values_in(value: Any) -> int:
    """The scalar values a JSON value holds (an empty object or list is one), at most MAX_WEIGHED_VALUES; no
    recursion, so a hostile nesting costs only the bound."""
    count, stack = 0, [value]
    while stack and count < MAX_WEIGHED_VALUES:
        item = stack.pop()
        if isinstance(item, dict) and item:
            stack.extend(item.values())
        elif isinstance(item, list) and item:
            stack.extend(item)
        else:
            count += 1
    return min(count, MAX_WEIGHED_VALUES)
