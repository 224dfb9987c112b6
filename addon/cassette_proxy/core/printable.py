"""Text made safe to show: control characters become visible escapes before any terminal or log sees them.

A request path, a header or a recorded body is data from a client, an
upstream or a pull request. Printed raw, `\\x1b]0;pwned\\x07` retitles the
terminal, `\\r` overwrites the line before it, a bidi override reorders what a
reviewer reads, and a newline forges a log line. So every path, header or body
fragment the proxy logs or the CLI prints goes through `printable`: the
proxy's loggers carry `PrintableRecords` (`logger`), the `cassette` command
writes through `PrintableStream` (both in output.py), and the run summary escapes its own lines.
The same two doors take every registered secret out (secrets/scrub.py), in any form.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
"""C0 (but tab and newline), DEL, C1 (`\\x9b` is a CSI to some terminals), the bidi marks, embeddings, overrides and
isolates, the Unicode line and paragraph separators, and lone surrogates (a terminal cannot even encode those)."""

_IN_A_LINE = re.compile(f"[{_CONTROLS}\n]")
_ACROSS_LINES = re.compile(f"[{_CONTROLS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every control character as a visible escape (`\\x1b`, `\\u202e`); tabs kept, and newlines only
    with `keep_newlines` (text meant to span lines: a traceback, a block of output). Plain text is returned as is."""
    return (_ACROSS_LINES if keep_newlines else _IN_A_LINE).sub(_escape, text)
