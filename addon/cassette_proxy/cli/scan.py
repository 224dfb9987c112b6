"""`cassette scan`: find secrets (and, asked for, personal data) in cassette files before they are committed.

It uses the redaction rules (so whatever recording would have redacted is
caught in files written before, or edited by hand) plus a detector for
random-looking tokens of unknown shape. Findings name the file, the JSON path
and the rule, and show a masked excerpt: the scanner's output is safe to paste
into a CI log.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..core.defaults import default_dir
from ..core.files import json_depth
from ..core.files.location import cassette_files
from ..core.files.safe_read import CassetteError, folder_for, read_limited
from ..core.files.stream_events import payload_lines
from ..core.secrets.redact import SIDES, Rule, parse_rules
from . import add_command

TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{20,}")
MAX_TOKEN = 128
"""Longer runs are data (base64 images, audio, embeddings), not credentials; the shaped rules still see them."""

DATA_KEYS = frozenset(
    {"embedding", "embeddings", "b64_json", "partial_image_b64", "signature", "thoughtSignature", "encrypted_content",
     "encrypted_index"}
)  # fmt: skip
"""JSON keys whose values are encoded data by design: base64 embeddings, images, thinking signatures, the opaque
indexes of web-search citations."""

PUBLIC_FIELDS = frozenset({"url", "uri", "href", "link", "src", "id", "ids", "container", "model", "data"})
"""JSON fields whose own value is public by design: addresses, object and container ids, model names, inline data
(an image's base64). The random-token detector skips them; the named secret rules still apply."""

PUBLIC_SUFFIXES = ("_url", "_uri", "_href", "_id", "_ids", "-id", "Url", "Uri", "Id", "Ids")
"""`image_url`, `tool_call_id`, `tool_use_id`, `responseId`: the same, by suffix."""

PUBLIC_SPANS = re.compile(r"https?://[^\s\"'<>()\[\]{}`]+|data:[\w.+/-]+;base64,[A-Za-z0-9+/=]+")
"""http(s) URLs and data URIs inside any text: a search result's link or an inline image is not a credential
(a named secret inside one, such as an `AKIA…` key id, is still found by its rule)."""

METADATA = frozenset({"cassette_format", "key", "recorded_at", "recorded_with"})
"""Written by the proxy, not by the API or the application: the hex key would otherwise pass for a card number."""

MIN_ENTROPY_RATIO = 0.8
MIN_CLASS_SWITCHES = 0.4
"""A random base62 token of 20+ characters reaches both in about 97% of cases (measured); camelCase names stay
below the class-switch ratio because their letters come in runs."""


class Line(int):
    """A line of a text body (an SSE or NDJSON stream), in a finding's path."""


@dataclass(frozen=True)
class Finding:
    file: str
    path: str
    rule: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path}: {self.rule}: {self.excerpt}"


def mask(secret: str) -> str:
    """Enough to recognise the value's shape, never enough to use it."""
    shown = secret[:4] if len(secret) >= 12 else secret[:1]
    return f"{shown}…({len(secret)} chars)"


def render_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, Line):
            out += f"[line {part}]"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(file)"


def strings(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string in a parsed cassette with its path; stream bodies (SSE, NDJSON) are opened up line by line."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from strings(item, (*path, name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings(item, (*path, i))
    elif isinstance(value, str):
        if len(path) == 2 and path[1] == "body" and value.lstrip()[:1] in ("{", "["):
            # A JSON answer above 1 MB is stored as its text: its fields are scanned as a parsed body's are.
            with contextlib.suppress(ValueError):  # TooDeep too: then scanned as text
                document = json_depth.loads(value)
                if isinstance(document, dict | list):
                    yield from strings(document, path)
                    return
        lines = payload_lines(value) if "\n" in value else None
        if lines is None:
            yield path, value
        for number, payload in lines or []:
            yield from strings(payload, (*path, Line(number)))


def entropy_ratio(token: str) -> float:
    """Shannon entropy per character, relative to the most a token of this length could have."""
    counts = Counter(token)
    entropy = -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())
    return entropy / math.log2(min(len(token), 64))


def _class(char: str) -> int:
    return 0 if char.isupper() else 1 if char.islower() else 2 if char.isdigit() else 3


def looks_random(token: str) -> bool:
    """Mixed case and digits, near-maximal entropy, and character classes that switch like noise, not like words."""
    if not (any(c.isupper() for c in token) and any(c.islower() for c in token) and any(c.isdigit() for c in token)):
        return False
    switches = sum(_class(a) != _class(b) for a, b in pairwise(token)) / (len(token) - 1)
    return switches >= MIN_CLASS_SWITCHES and entropy_ratio(token) >= MIN_ENTROPY_RATIO


def entropy_applies(path: tuple[str | int, ...]) -> bool:
    """Not on stored headers, encoded-data fields, or fields whose name says public (urls, ids, containers)."""
    names = [p for p in path if isinstance(p, str)]
    if not names or (names[0] in SIDES and names[1:2] == ["headers"]):
        return False
    last = names[-1]
    return not (DATA_KEYS.intersection(names) or last.lower() in PUBLIC_FIELDS or last.endswith(PUBLIC_SUFFIXES))


def scan_document(document: Any, rules: tuple[Rule, ...], entropy: bool) -> Iterator[tuple[str, str, str]]:
    """(path, rule, masked excerpt) for every finding in a parsed cassette."""
    for path, text in strings(document):
        if path[:1] and path[0] in METADATA:
            continue
        spans = []
        for rule in rules:
            if rule.applies_to(path):
                for start, end, _ in rule.matches(text):
                    spans.append((start, end))
                    yield render_path(path), rule.name, mask(text[start:end])
        if not entropy or not entropy_applies(path):
            continue
        spans.extend(m.span() for m in PUBLIC_SPANS.finditer(text) if "/" in text)
        for m in TOKEN.finditer(text):
            token = m.group(0)
            overlaps = any(start < m.end() and m.start() < end for start, end in spans)
            if len(token) <= MAX_TOKEN and not overlaps and looks_random(token):
                yield render_path(path), "high-entropy", mask(token)


def scan_file(path: Path, root: Path, rules: tuple[Rule, ...], entropy: bool) -> list[Finding]:
    """The findings of one file; a file that cannot be read as a cassette (a fifo, a symlink to `/dev/zero` or out of
    `root`, one over the size limit) is itself a finding: the scan cannot vouch for it, and reading it could hang."""
    try:
        text = read_limited(path, root).decode("utf-8", errors="replace")
    except CassetteError as e:
        return [Finding(str(path), "(file)", "unreadable", e.problem)]
    try:
        document = json_depth.loads(text)
    except json_depth.TooDeep as e:  # walked, it would exhaust the stack: the scan cannot vouch for it
        return [Finding(str(path), "(file)", "unreadable", f"{e}: not a recording")]
    except ValueError:
        document = text
    return [
        Finding(str(path), where, rule, excerpt) for where, rule, excerpt in scan_document(document, rules, entropy)
    ]


def files_to_scan(paths: list[Path]) -> list[tuple[Path, Path]]:
    """(file, the folder it must resolve inside): folders give their cassette files; files named explicitly (as
    pre-commit passes them) are scanned as given, inside the cassette folder if they are in it, else their own."""
    found: list[tuple[Path, Path]] = []
    for path in paths:
        if path.is_dir():
            found.extend((file, path) for file in cassette_files(path))
        elif os.path.lexists(path):
            found.append((path, folder_for(path, default_dir())))
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return found


def run(args: argparse.Namespace) -> int:
    try:
        rules = parse_rules(args.rule)
        files = files_to_scan(args.paths or [default_dir()])
    except (ValueError, FileNotFoundError) as e:
        print(f"cassette scan: {e}")
        return 2
    findings = [finding for file, root in files for finding in scan_file(file, root, rules, not args.no_entropy)]
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"{len(findings)} finding(s) in {len({f.file for f in findings})} of {len(files)} file(s). "
            "Re-record with the redaction rule that covers it (cassette_redact) or edit the file, then scan again."
        )
        return 1
    print(f"no secrets found in {len(files)} file(s)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "scan", __doc__)
    parser.add_argument(
        "paths", nargs="*", type=Path, help="cassette files or folders (default: $CASSETTE_DIR or ./cassettes)"
    )
    parser.add_argument(
        "--rule",
        action="append",
        default=[],
        help="also look for this: a rule name (email, phone, card, pii) or a /[target/]regex/replacement rule, "
        "as in cassette_redact; repeatable",
    )
    parser.add_argument("--no-entropy", action="store_true", help="only the shaped rules, no random-token detection")
    parser.set_defaults(func=run)
