"""Field-level differences between two parsed JSON values: what a miss, `cassette diff` and `cassette view` show."""

from __future__ import annotations

import json
from typing import Any


def shown(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""The value on the side of a change where the field does not exist (added or removed)."""


def changes(recorded: Any, current: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(field path, recorded value, current value) of every field that differs; ABSENT where a side lacks it.

    `differences` words these for the 409; `cassette view` shows them side by side.
    """
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for name in sorted(recorded.keys() | current.keys()):
            sub = f"{path}.{name}" if path else name
            if name not in current:
                out.append((sub, recorded[name], ABSENT))
            elif name not in recorded:
                out.append((sub, ABSENT, current[name]))
            else:
                out.extend(changes(recorded[name], current[name], sub))
        return out
    if isinstance(recorded, list) and isinstance(current, list):
        out = []
        for i in range(max(len(recorded), len(current))):
            sub = f"{path}[{i}]"
            if i >= len(current):
                out.append((sub, recorded[i], ABSENT))
            elif i >= len(recorded):
                out.append((sub, ABSENT, current[i]))
            else:
                out.extend(changes(recorded[i], current[i], sub))
        return out
    if recorded != current or type(recorded) is not type(current):
        return [(path or "body", recorded, current)]
    return []


def differences(recorded: Any, current: Any) -> list[str]:
    """Readable field-level differences between two parsed bodies, recorded → current."""
    out = []
    for where, old, new in changes(recorded, current):
        if new is ABSENT:
            out.append(f"{where}: removed (was {shown(old)})")
        elif old is ABSENT:
            out.append(f"{where}: added {shown(new)}")
        else:
            out.append(f"{where}: {shown(old)} → {shown(new)}")
    return out
