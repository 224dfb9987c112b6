"""Redaction rules: what never reaches a cassette file, and what `cassette scan` looks for.

A rule is a regular expression with a replacement, optionally scoped to a part
of the stored cassette (`request`, `response.body`, `request.body.messages.*.content`).
The built-in secret rules always apply; PII rules are added by name, custom
rules by spec (the `cassette_redact` option). Redaction changes only what is
written: the key is computed from the real request and the client gets the
real response, so matching never depends on it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from ..keys.url import SAS_QUERY_PARAMS, SECRET_QUERY_PARAMS
from .scrub import scrub

_IGNORECASE = int(re.IGNORECASE)
"""As a plain int: `flags & re.IGNORECASE` goes through the enum's `__and__`, which costs more than the hint check
it guards."""

SIDES = ("request", "response")
REDACTABLE = ("url", "headers", "body")
"""The fields of a stored request or response that carry data; method, status and body_format are structure."""


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    replacement: str
    targets: tuple[tuple[str, ...], ...] = ()
    """Dotted paths (with `*` for any key or item) under which the rule applies; empty: everywhere."""
    check: Callable[[str], bool] | None = None
    """A second opinion on a match (the Luhn check for card numbers); a match it rejects is left alone."""
    hints: tuple[str, ...] = ()
    """Substrings every match contains (lower case if the pattern ignores case): a text without any of them is
    skipped without running the pattern, which keeps redacting a large prompt cheap."""
    fields: frozenset[str] = frozenset()
    """JSON field names (compared by `field_name`) the rule is limited to: it applies to a string whose own
    field has one of these names, at any depth. Empty: any field."""

    def applies_to(self, path: tuple[str | int, ...]) -> bool:
        if self.fields and not (path and isinstance(path[-1], str) and field_name(path[-1]) in self.fields):
            return False
        return not self.targets or any(_starts_with(path, target) for target in self.targets)

    def matches(self, text: str) -> Iterator[tuple[int, int, str]]:
        """(start, end, replacement) of each match: only the `secret` group when the pattern has one (so `Bearer `
        stays), else the whole match; the replacement is a `re.sub` template (`\\1` refers to a group)."""
        haystack = text.lower() if self.hints and self.pattern.flags & _IGNORECASE else text
        if self.hints and not any(hint in haystack for hint in self.hints):
            return
        group = "secret" if "secret" in self.pattern.groupindex else 0
        for m in self.pattern.finditer(text):
            if self.check is None or self.check(m.group(group)):
                yield (*m.span(group), m.expand(self.replacement))

    def apply(self, text: str) -> str:
        out, last = [], 0
        for start, end, replacement in self.matches(text):
            out += [text[last:start], replacement]
            last = end
        return "".join(out) + text[last:] if out else text


def _starts_with(path: tuple[str | int, ...], target: tuple[str, ...]) -> bool:
    return len(path) >= len(target) and all(t in ("*", str(p)) for p, t in zip(path, target, strict=False))


def luhn_valid(number: str) -> bool:
    """The check digit card numbers carry: separates a card from any 16-digit number."""
    digits = [int(c) for c in number if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


_NOT_A_PHONE = re.compile(r"\d{4}-\d\d-\d\d|\d{1,3}(?:\.\d{1,3}){3}$|[\d ]+\.\d+$")
"""Dates, IPv4 addresses and decimals: digit groups that the phone pattern would otherwise take."""


def _looks_like_phone(text: str) -> bool:
    return 9 <= sum(c.isdigit() for c in text) <= 15 and not _NOT_A_PHONE.match(text)


def _has_digit(text: str) -> bool:
    """Real keys mix digits in; `sk-learn-compatible-estimators` is prose."""
    return any(c.isdigit() for c in text)


def _rule(
    name: str, pattern: str, hints: tuple[str, ...] = (), check: Callable[[str], bool] | None = None, flags: int = 0
) -> Rule:
    return Rule(name, re.compile(pattern, flags), f"[REDACTED:{name}]", check=check, hints=hints)


def field_name(name: str) -> str:
    """A JSON field name as the credential-field rule compares it: `Client-Secret` is `client_secret`."""
    return name.lower().replace("-", "_")


CREDENTIAL_FIELDS = frozenset(
    {
        "api_key", "apikey", "x_api_key", "password", "passwd", "secret", "client_secret", "secret_key",
        "aws_secret_access_key", "access_token", "refresh_token", "id_token", "auth_token", "session_token",
        "authorization", "authorization_token", "private_key",
    }
)  # fmt: skip
"""JSON fields whose name says their string value is a credential, whatever its shape (`"password": "hunter2"`).
Only string values: a tool schema's `password` property (an object) is left alone. Not `token` or `key`: those
are a logprob's text and ordinary ids."""

REDACTED_MARKER = re.compile(r"\[REDACTED(?::[^\]]*)?\]")


def _not_redacted(value: str) -> bool:
    """A value already replaced by a marker is not a secret: scanning a redacted cassette finds nothing."""
    return not REDACTED_MARKER.fullmatch(value)


SECRET_RULES = (
    Rule(
        "credential-field",
        re.compile(r".+", re.DOTALL),
        "[REDACTED:credential-field]",
        check=_not_redacted,
        fields=CREDENTIAL_FIELDS,
    ),
    _rule(
        "private-key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?-----END[A-Z ]*PRIVATE KEY-----",
        ("PRIVATE KEY",),
    ),
    _rule("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", ("sk-ant-",), _has_digit),
    _rule("openai-key", r"\bsk-[A-Za-z0-9_-]{20,}", ("sk-",), _has_digit),
    _rule("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", ("AIza",)),
    _rule("aws-access-key-id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", ("AKIA", "ASIA", "ABIA", "ACCA")),
    _rule(
        "aws-secret-access-key",
        r"aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        ("secret",),
        flags=re.IGNORECASE,
    ),
    _rule(
        "github-token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyJ",)),
    _rule("bearer-token", r"\bbearer\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)", ("bearer",), flags=re.IGNORECASE),
)
"""Credential shapes and credential field names, always on: a key pasted into a prompt or echoed in a response
never reaches disk."""

STRING_SECRET_RULES = tuple(rule for rule in SECRET_RULES if not rule.fields)
"""The rules that apply to any text, field or not: what a URL in a log line goes through."""


def loggable_url(url: str) -> str:
    """The URL with its credential query parameters removed (as `key.public_query` does) and the secret rules
    applied: every URL the addon logs or reports goes through this. Keeps the rest of the query as it was.
    Never raises."""
    base, question, query = url.partition("?")
    if question:
        pairs = [(unquote_plus(part.partition("=")[0]).lower(), part) for part in query.split("&")]
        secret = (
            SECRET_QUERY_PARAMS | SAS_QUERY_PARAMS if any(name == "sig" for name, _ in pairs) else SECRET_QUERY_PARAMS
        )
        kept = "&".join(part for name, part in pairs if name not in secret)
        url = f"{base}?{kept}" if kept else base
    for rule in STRING_SECRET_RULES:
        url = rule.apply(url)
    return url


def loggable_error(error: BaseException, limit: int = 300) -> str:
    """`Type: message` of an exception as every logged error of ours shows it: the secret rules applied, then every
    registered secret scrubbed (core/secrets/scrub.py), then cut to `limit` characters (after, so no prefix of a key
    survives). Never raises."""
    return f"{type(error).__name__}: {scrub(redacted(str(error), ('log',), SECRET_RULES))}"[:limit]


PII_RULES = (
    # `%40` too: the stored URL's query is percent-encoded.
    _rule("email", r"\b[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b", ("@", "%40")),
    # The digit comes before the look-behind so the engine can skip ahead to digits: twice as fast on prose.
    _rule("card", r"\d(?<![\d+-]\d)(?:[ -]?\d){12,18}(?![\d-])", check=luhn_valid),
    _rule(
        "phone",
        r"(?<![\w+.-])(?:\+\d{8,15}|(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,5}){1,4})(?![\w.-])",
        check=_looks_like_phone,
    ),
)
"""Personal data rules, by name (`email`, `card`, `phone`, or `pii` for all): opt-in, as they can match ordinary data."""

NAMED_RULES = {rule.name: (rule,) for rule in PII_RULES} | {"pii": PII_RULES}


def parse_target(text: str) -> tuple[str, ...]:
    """`request`, `response.body`, `request.body.messages.*.content`: a side, then url/headers/body, then JSON keys."""
    parts = tuple(text.strip().split("."))
    if parts[0] not in SIDES or any(not p for p in parts):
        raise ValueError(f"target {text!r} must start with request or response (e.g. request.body.messages.*.content)")
    if len(parts) > 1 and parts[1] not in (*REDACTABLE, "*"):
        raise ValueError(f"target {text!r}: after {parts[0]} comes one of {', '.join(REDACTABLE)}")
    return parts


def parse_rule(spec: str) -> tuple[Rule, ...]:
    """One entry of `cassette_redact`: a rule name, or `/[target/]regex/replacement` with any separator."""
    spec = spec.strip()
    if spec in NAMED_RULES:
        return NAMED_RULES[spec]
    if not spec or spec[0].isalnum():
        raise ValueError(
            f"{spec!r} is neither a rule name ({', '.join(NAMED_RULES)}) nor a /[target/]regex/replacement rule"
        )
    parts = spec[1:].split(spec[0])
    if len(parts) not in (2, 3):
        raise ValueError(f"{spec!r}: use /regex/replacement or /target/regex/replacement (any separator)")
    *target, pattern, replacement = parts
    if not pattern:
        raise ValueError(f"{spec!r}: the regular expression is empty")
    try:
        compiled = re.compile(pattern)
    except re.error as e:
        raise ValueError(f"{spec!r}: invalid regular expression: {e}") from None
    try:
        compiled.sub(replacement, "")  # parses the template, so a bad group reference fails here, not mid-recording
    except (re.error, IndexError) as e:
        raise ValueError(f"{spec!r}: invalid replacement: {e}") from None
    return (Rule(spec, compiled, replacement, (parse_target(target[0]),) if target else ()),)


def parse_rules(specs: Iterable[str]) -> tuple[Rule, ...]:
    """The built-in secret rules followed by the given ones (PII by name, custom specs)."""
    rules = list(SECRET_RULES)
    for spec in specs:
        rules.extend(r for r in parse_rule(spec) if r not in rules)
    return tuple(rules)


def needs_structure(rules: Iterable[Rule]) -> bool:
    """Some rule is scoped to a path inside a body, which only a parsed body can answer (see `_redacted_json_fields`)."""
    return any(len(target) > 2 for rule in rules for target in rule.targets)


def _redacted_json_fields(text: str, path: tuple[str | int, ...], rules: tuple[Rule, ...]) -> str:
    """A whole body stored as text that holds JSON (a JSON answer above 1 MB is stored as its text, as received)
    with the field-limited rules applied to its `"name": "string"` pairs, as they would apply to the parsed body.

    Only rules scoped no deeper than the body itself: where a pair sits in the document is not known here
    (the recorder parses a big body when a rule needs that). A pair inside a string that holds escaped JSON is
    redacted too: more, never less.
    """
    field_rules = [
        rule
        for rule in rules
        if rule.fields
        and all(len(target) <= len(path) for target in rule.targets)
        and (not rule.targets or any(_starts_with(path, target) for target in rule.targets))
    ]
    if not field_rules or '"' not in text:
        return text
    out, last = [], 0
    for m in _pairs_named(frozenset().union(*(rule.fields for rule in field_rules))).finditer(text):
        try:
            value = json.loads(f'"{m.group(2)}"')
        except ValueError:
            continue
        name, new = field_name(m.group(1)), value
        for rule in field_rules:
            if name in rule.fields:
                new = rule.apply(new)
        if new != value:
            out += [text[last : m.start(2)], json.dumps(new, ensure_ascii=False)[1:-1]]
            last = m.end(2)
    return "".join(out) + text[last:] if out else text


@functools.lru_cache(maxsize=32)
def _pairs_named(fields: frozenset[str]) -> re.Pattern[str]:
    """`"name": "value"` with a name `field_name` maps into `fields` (any case, `-` for `_`); group 2: the
    value as written (escaped). One pass finds only the wanted pairs, so a 200 MB body costs one scan."""
    names = "|".join(sorted(re.escape(name).replace("_", "[_-]") for name in fields))
    return re.compile(rf'"({names})"\s*:\s*"((?:[^"\\]|\\.)*)"', re.IGNORECASE)


def redact(cassette: dict[str, Any], rules: Iterable[Rule]) -> dict[str, Any]:
    """A copy of the cassette with every rule applied to the url, headers and body it stores."""
    rules = tuple(rules)
    out = dict(cassette)
    for side in SIDES:
        stored = cassette.get(side)
        if not isinstance(stored, dict):
            continue
        out[side] = dict(stored)
        for field in REDACTABLE:
            if field in stored and not (field == "body" and stored.get("body_format") in ("base64", "eventstream")):
                out[side][field] = redacted(stored[field], (side, field), rules)
        if stored.get("body_format") == "eventstream" and isinstance(stored.get("body"), list):
            # Frames kept as bytes (base64) stay whole: a rule matching inside base64 text would corrupt the frame.
            out[side]["body"] = [
                frame
                if isinstance(frame, dict) and "frame_base64" in frame
                else redacted(frame, (side, "body", i), rules)
                for i, frame in enumerate(stored["body"])
            ]
    return out


_last_hints: tuple[tuple[Rule, ...], tuple[str, ...]] = ((), ())
"""The rules last redacted with and their hints in lower case: nearly every call redacts with the same rules."""


def _hints_of(rules: tuple[Rule, ...]) -> tuple[str, ...]:
    global _last_hints
    if rules is not _last_hints[0] and rules != _last_hints[0]:
        _last_hints = (rules, tuple(dict.fromkeys(hint.lower() for rule in rules for hint in rule.hints)))
    return _last_hints[1]


def _holds_hint(text: str, hints: tuple[str, ...]) -> bool:
    """Whether the text holds any rule's hint, case-blind: one pass for all the rules, so that a text with none
    (nearly every string of a cassette) skips every hinted rule at once. Redacting langchain-openai's imported
    cassettes (11,000 strings) takes less than half the time it took with each rule checking its own hints."""
    return any(map(text.lower().__contains__, hints))


def as_stored(cassette: dict[str, Any], rules: Iterable[Rule]) -> dict[str, Any]:
    """The cassette as it is written: `redact`ed, and marked `request_redacted` in `keyed_with` when a rule changed
    its request, whose stored form then no longer gives its key (`cassette rekey` must not trust it)."""
    stored = redact(cassette, rules)
    if stored["request"] != cassette["request"]:
        stored["keyed_with"] = {**stored.get("keyed_with", {}), "request_redacted": True}
    return stored


def redacted(value: Any, path: tuple[str | int, ...], rules: tuple[Rule, ...]) -> Any:
    """A copy of a stored value (found at `path` in the cassette) with the rules that apply there applied."""
    if isinstance(value, str):
        if len(path) == 2 and path[1] == "body":  # first, as the field rules come first on a parsed body
            value = _redacted_json_fields(value, path, rules)
        hints = _hints_of(rules)
        hinted = _holds_hint(value, hints)
        for rule in rules:
            if (hinted or not rule.hints) and rule.applies_to(path):
                changed = rule.apply(value)
                if changed is not value:
                    value, hinted = changed, _holds_hint(changed, hints)
        return value
    # Numbers, booleans and null hold nothing to redact: not walked into (an event's `ms`, a usage count).
    if isinstance(value, dict):
        return {
            name: redacted(item, (*path, name), rules) if isinstance(item, _WALKED) else item
            for name, item in value.items()
        }
    if isinstance(value, list):
        return [
            redacted(item, (*path, i), rules) if isinstance(item, _WALKED) else item for i, item in enumerate(value)
        ]
    return value


_WALKED = (str, dict, list)
