"""Field-level differences between two parsed JSON values: what a miss, `cassette diff` and `cassette view` show."""

from __future__ import annotations

import json
from typing import Any


def _show(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def differences(recorded: Any, current: Any, path: str = "") -> list[str]:
    """Readable field-level differences between two parsed bodies, recorded → current."""
    where = path or "body"
    if isinstance(recorded, dict) and isinstance(current, dict):
        out = []
        for name in sorted(recorded.keys() | current.keys()):
            sub = f"{path}.{name}" if path else name
            if name not in current:
                out.append(f"{sub}: removed (was {_show(recorded[name])})")
            elif name not in recorded:
                out.append(f"{sub}: added {_show(current[name])}")
            else:
                out.extend(differences(recorded[name], current[name], sub))
        return out
    if isinstance(recorded, list) and isinstance(current, list):
        out = []
        for i in range(max(len(recorded), len(current))):
            sub = f"{path}[{i}]"
            if i >= len(current):
                out.append(f"{sub}: removed (was {_show(recorded[i])})")
            elif i >= len(recorded):
                out.append(f"{sub}: added {_show(current[i])}")
            else:
                out.extend(differences(recorded[i], current[i], sub))
        return out
    if recorded != current or type(recorded) is not type(current):
        return [f"{where}: {_show(recorded)} → {_show(current)}"]
    return []
