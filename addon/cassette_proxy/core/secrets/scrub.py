"""The one scrubber: a known secret's value taken out of text, in whatever form it was printed, before anyone sees it.

Redaction (redact.py) finds secrets by their shape; this finds the values we
know are secret (the credentials `cassette drift` sends, a failing request's
auth headers) however they were printed. An exception seldom shows a value as
it is: `ValueError: Invalid header value b'Bearer sk-…\\n'` holds its bytes'
repr, JSON holds it escaped, a URL percent-encoded, a log line stripped. So
each secret is searched in all of those forms (`printed_forms`), and in the
pieces a line break in it would split it into.

Every output path goes through `scrub`: the loggers and the `cassette`
command's stdout and stderr (printable.py), the drift outputs, the proxy's own
error answers. A value is registered once (`register`) where it is first read,
and stays registered for the process.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from ..printable import printable

PLACEHOLDER = "[credential]"
MIN_PIECE = 8
"""A secret, and a piece of one (a line of it, a whitespace-separated part), is searched for from this length:
shorter ones would match ordinary words (no provider issues such keys; a test's `"k"` is not one)."""
MAX_SECRETS = 1024
"""Secrets kept at most, the oldest dropped first: the proxy registers the auth headers of failing requests, and a
client sending endless different keys must not grow the process without bound."""

_PERCENT = re.compile(r"%[0-9A-F]{2}")


def _variants(secret: str) -> set[str]:
    """The secret, stripped, with its whitespace removed, and its pieces."""
    variants = {secret, secret.strip(), "".join(secret.split())}
    variants |= set(re.split(r"[\s\x00-\x1f\x7f]+", secret))
    return {variant for variant in variants if len(variant) >= MIN_PIECE}


def printed_forms(secret: str) -> set[str]:
    """Every way `secret` (and each of its variants) is likely to be printed: raw, its str and bytes repr, JSON
    escaped (ASCII or not), percent-encoded (either case of hex), HTML-escaped, control characters escaped."""

    forms: set[str] = set()
    for value in _variants(secret):
        encoded = [quote(value, safe=""), quote(value), quote_plus(value)]
        forms |= {
            value,
            repr(value)[1:-1],
            repr(value.encode("utf-8", "surrogatepass"))[2:-1],
            json.dumps(value)[1:-1],
            json.dumps(value, ensure_ascii=False)[1:-1],
            html.escape(value),
            printable(value),
            printable(value, keep_newlines=True),
            *encoded,
            *(_PERCENT.sub(lambda m: m.group().lower(), text) for text in encoded),
        }
    return {form for form in forms if form}


class Scrubber:
    """Known secrets, and one pattern finding any of their printed forms; thread-safe."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._secrets: dict[str, None] = {}
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.register(secret)

    def register(self, secret: str) -> None:
        """Scrub `secret` from now on (one under MIN_PIECE characters once stripped is too short to search for)."""
        if len(secret.strip()) < MIN_PIECE or secret in self._secrets:
            return
        with self._lock:
            self._secrets[secret] = None
            while len(self._secrets) > MAX_SECRETS:
                del self._secrets[next(iter(self._secrets))]
            forms = {form for known in self._secrets for form in printed_forms(known)}
            # Longest first: a secret's whole repr is replaced before a piece of it could be.
            ordered = sorted(forms, key=lambda form: (-len(form), form))
            self._pattern = re.compile("|".join(map(re.escape, ordered)))

    def scrub(self, text: str) -> str:
        """`text` with every printed form of every registered secret replaced by `[credential]`."""
        pattern = self._pattern
        if pattern is None or not text:
            return text
        return pattern.sub(PLACEHOLDER, text)


SECRETS = Scrubber()
"""The process's scrubber: what every output path uses."""


def register(*secrets: str) -> None:
    """Scrub these values from everything this process prints, logs or writes as a report."""
    for secret in secrets:
        SECRETS.register(secret)


def scrub(text: str) -> str:
    """`text` without any registered secret, in any printed form."""
    return SECRETS.scrub(text)
