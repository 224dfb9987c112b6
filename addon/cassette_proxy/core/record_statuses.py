"""Which upstream statuses become cassettes (`cassette_record_statuses`).

A suite should be able to test, offline, how it handles the API's deterministic
client errors (a 400 `context_length_exceeded`, a 404 for an unknown model, a
422), as VCR.py and Polly users do. Statuses that depend on credentials, load
or time (401, 403, 408, 409, 429, 5xx) would replay a passing moment as a
permanent failure, so they are saved only when asked for by number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_RECORD_STATUSES = ("2xx", "400", "404", "422")

_SPEC = re.compile(r"^([1-5])(?:xx|[0-9]{2})$")


def parse_record_statuses(spec: Iterable[str]) -> frozenset[int]:
    """`2xx`, `400`, … → the set of statuses; ValueError naming an entry that is neither."""
    statuses: set[int] = set()
    for raw in spec:
        text = raw.strip().lower()
        match = _SPEC.match(text)
        if not match:
            raise ValueError(f"{raw!r} is not a status: use a number from 100 to 599 or a class such as 2xx")
        if text.endswith("xx"):
            base = int(match.group(1)) * 100
            statuses.update(range(base, base + 100))
        else:
            statuses.add(int(text))
    return frozenset(statuses)


def is_client_error(status: int) -> bool:
    return 400 <= status < 500
