"""What a miss tells the developer: which request had no cassette, and what changed since the closest recordings.

A bare "no match" invites a blind re-record; a field-level diff against the
nearest recorded requests shows the prompt edit that caused the miss (found by core/closest.py).
"""

from __future__ import annotations

from .errors import error_body


def miss_body(key: str, method: str, url: str, cassette: str, mode: str, nearest: list[dict]) -> dict:
    if nearest:
        first = nearest[0]
        changed = "; ".join(first["differences"][:3]) or "identical body (headers or query differ)"
        hint = f"closest recording {first['cassette']} differs in: {changed}"
    else:
        hint = "no recording exists for this endpoint yet"
    message = (
        f"cassette miss: no recording for {method} {url} (key {key}) in {mode} mode; {hint}. "
        "Run with cassette_mode=record to record it."
    )
    return error_body(
        "cassette_miss", message, key=key, method=method, url=url, cassette=cassette, mode=mode, closest=nearest
    )
