"""Drift: what changed between a recorded answer and the live answer to the same request, by severity.

`cassette drift` re-sends recorded requests and hands each pair of responses
(the cassette's, and the re-recording's, both as the proxy stores them) to
`compare`. Four severities, worst first:

- status: the recorded status no longer comes back (a retired model, a removed
  parameter): the error's message is shown, and nothing else is compared;
- shape: the schema of the answer (fields added, removed, or of another type),
  in the JSON body or in a stream's events, values left aside;
- behaviour: model, finish reason, tool calls (names and argument keys), a
  refusal, the number of choices or content blocks;
- text: what the model said, with a similarity figure and a short word diff;
  expected for sampled answers, so the least severe.

Behaviour and text are read through conversation.py, the one reader of
answers (`cassette view`, `show` and `diff` read the same), so a stream is
compared as its assembled answer. Pure: no I/O, no mitmproxy.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..files import json_depth
from ..reading.conversation import REFUSAL, THINKING, Answer, Part, answer_of, stream_payloads
from ..reading.summary import one_line


class Severity(IntEnum):
    """How much a change matters to code that handles the answer; a higher value is worse."""

    TEXT = 1
    BEHAVIOUR = 2
    SHAPE = 3
    STATUS = 4

    @property
    def label(self) -> str:
        return self.name.lower()


SEVERITY_NAMES = tuple(severity.label for severity in sorted(Severity, reverse=True))
"""`status`, `shape`, `behaviour`, `text`: what `--fail-on` takes, worst first."""


def parse_severity(name: str) -> Severity:
    try:
        return Severity[name.strip().upper()]
    except KeyError:
        raise ValueError(f"{name!r} is not a drift severity: use one of {', '.join(SEVERITY_NAMES)}") from None


@dataclass(frozen=True)
class Finding:
    severity: Severity
    field: str
    """What changed: `status`, `added`, `removed`, `type`, `finish_reason`, `tool_calls`, `text`, …"""
    old: str
    new: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity.label, "field": self.field, "old": self.old, "new": self.new,
                "detail": self.detail}  # fmt: skip


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Finding]:
    """What changed from the recorded response `old` to the live `new` (cassette `response` objects), worst first."""
    before, after = answer_of(old), answer_of(new)
    if before.status != after.status:
        message = error_message(after)
        return [Finding(Severity.STATUS, "status", str(before.status), str(after.status), message)]
    findings = shape_changes(old, new) + behaviour_changes(before, after) + text_changes(before, after)
    return sorted(findings, key=lambda finding: -finding.severity)


def worst(findings: list[Finding]) -> Severity | None:
    return max((finding.severity for finding in findings), default=None)


def error_message(answer: Answer) -> str:
    """The message of an error answer (`error.message` in every API's error body), else its error JSON or text."""
    failed = answer.raw and (answer.status or 0) >= 400
    for part in answer.parts:
        if (part.kind == "json" and part.name == "error") or (failed and part.text):
            try:
                error = json_depth.loads(part.text)
            except ValueError:
                return one_line(part.text, 300)
            if isinstance(error, dict) and isinstance(error.get("error"), dict):
                error = error["error"]
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return one_line(error["message"], 300)
            return one_line(part.text, 300)
    return ""


# -- shape --------------------------------------------------------------------------------------------------------

OPAQUE = frozenset({"input", "args", "arguments", "metadata", "parameters", "schema", "properties"})
"""Objects whose keys are data (a tool's arguments, the caller's metadata, a JSON schema echoed back): their
keys are behaviour (tool calls) or the request's, not the answer's schema."""

ANSWER_KEYS = frozenset({"tool_calls", "function_call", "refusal"})
"""OpenAI chat message fields that some answers leave out, present when the model calls a tool or refuses:
behaviour, compared as tool calls and refusals."""

PART_KINDS = ("text", "functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
              "codeExecutionResult", "toolUse", "toolResult", "reasoningContent")  # fmt: skip
"""What tells the elements of an untyped content list apart (Gemini parts, Bedrock blocks)."""


_KIND_NAMES: dict[type[Any], str] = {str: "string", list: "array", dict: "object"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return _KIND_NAMES.get(type(value), type(value).__name__)


def _element(item: Any) -> str:
    """The variant of a list element: its `type` (Anthropic blocks, Responses items), else its part kind."""
    if isinstance(item, dict):
        if isinstance(kind := item.get("type"), str):
            return kind
        return next((kind for kind in PART_KINDS if kind in item), "")
    return ""


def schema(value: Any, prefix: str = "") -> dict[str, set[str]]:
    """Every field path of a JSON value and the kinds seen there; list elements as `[variant]`."""
    out: dict[str, set[str]] = {}
    _walk(value, prefix, out)
    return out


def _walk(value: Any, path: str, out: dict[str, set[str]]) -> None:
    if path:
        out.setdefault(path, set()).add(_kind(value))
    if isinstance(value, dict) and path.rsplit(".", 1)[-1] not in OPAQUE:
        for name, item in value.items():
            if name not in ANSWER_KEYS:
                _walk(item, f"{path}.{name}" if path and not path.endswith(":") else f"{path}{name}", out)
    elif isinstance(value, list):
        for item in value:
            _walk(item, f"{path}[{_element(item)}]", out)


def _stream_schema(response: dict[str, Any]) -> dict[str, set[str]] | None:
    """The schema of a stream's events, each event's fields under its name (`content_block_delta:delta.text`)."""
    events = stream_payloads(response)
    if events is None:
        return None
    out: dict[str, set[str]] = {}
    for _, name, payload in events:
        if isinstance(payload, dict):
            label = name or str(payload.get("type") or payload.get("object") or "event")
            for path, kinds in schema(payload, f"{label}:").items():
                out.setdefault(path, set()).update(kinds)
    return out


def _json_schema(response: dict[str, Any]) -> dict[str, set[str]] | None:
    body = response.get("body")
    if response.get("body_format") == "text" and isinstance(body, str) and "json" in _content_type(response):
        try:
            body = json_depth.loads(body)  # a big JSON answer is stored as its text (cassette_file.large_json_as_text)
        except ValueError:
            return None
    elif response.get("body_format") != "json":
        return None
    return schema(body)


def _content_type(response: dict[str, Any]) -> str:
    headers = stored if isinstance(stored := response.get("headers"), dict) else {}
    return str(headers.get("content-type", "")).split(";", 1)[0].strip().lower()


def shape_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Finding]:
    """Fields added, removed or of another kind, in the JSON answer or a stream's events."""
    before, after = _stream_schema(old), _stream_schema(new)
    if (before is None) != (after is None):
        was, now = ("events", "whole") if before is not None else ("whole", "events")
        return [Finding(Severity.SHAPE, "streamed", was, now, f"content-type {_content_type(old) or '-'} → "
                        f"{_content_type(new) or '-'}")]  # fmt: skip
    if before is None or after is None:
        before, after = _json_schema(old), _json_schema(new)
    if before is None or after is None:
        return []
    return _schema_changes(before, after)


def _schema_changes(before: dict[str, set[str]], after: dict[str, set[str]]) -> list[Finding]:
    findings = []
    for path in sorted(before.keys() | after.keys()):
        if not _variants_on_both_sides(path, before, after):
            continue  # a content block or event of a type only one side has: behaviour, not schema
        if path not in before or path not in after:
            side, other = (after, before) if path not in before else (before, after)
            parent = _parent(path)
            # The topmost new or missing field only, and none under a field the other side has only as null.
            if not parent or other.get(parent, {"null"}) != {"null"}:
                change = "added" if path not in before else "removed"
                kinds = "|".join(sorted(side[path]))
                old, new = (kinds, "") if change == "removed" else ("", kinds)
                findings.append(Finding(Severity.SHAPE, change, old, new, path))
            continue
        was, now = before[path] - {"null"}, after[path] - {"null"}
        if was and now and not was & now:
            findings.append(Finding(Severity.SHAPE, "type", "|".join(sorted(was)), "|".join(sorted(now)), path))
    return findings


def _parent(path: str) -> str:
    """`a.b[x].c` → `a.b[x]`, `a.b[x]` → `a.b`, `ev:a` → `` (an event's top-level fields have no parent field)."""
    cut = max(path.rfind("."), path.rfind("["), path.rfind(":") + 1 if ":" in path else -1)
    if cut <= 0:
        return ""
    parent = path[:cut]
    return "" if parent.endswith(":") else parent


def _variants_on_both_sides(path: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether every `[variant]` and the event along `path` exist on both sides."""
    if ":" in path:
        event = path.split(":", 1)[0] + ":"
        if not any(p.startswith(event) for p in before) or not any(p.startswith(event) for p in after):
            return False
    for end in (i for i, char in enumerate(path) if char == "]"):
        prefix = path[: end + 1]
        if prefix not in before or prefix not in after:
            return False
    return True


# -- behaviour and text -------------------------------------------------------------------------------------------


def _call(part: Part) -> str:
    """`name(key, key)`: a tool call by its name and argument keys, the values left to the text."""
    try:
        arguments = json_depth.loads(part.text) if part.text.strip() else {}
    except ValueError:
        arguments = None
    keys = ", ".join(sorted(arguments)) if isinstance(arguments, dict) else "…"
    return f"{part.name or '?'}({keys})"


def _arguments(part: Part) -> str:
    """A tool call's arguments as compact sorted JSON, so spacing and key order are not a change."""
    try:
        return f"{part.name}({json.dumps(json_depth.loads(part.text), sort_keys=True, ensure_ascii=False)})"
    except ValueError:
        return f"{part.name}({part.text})"


def _blocks(answer: Answer) -> list[str]:
    """The answer's parts by kind (reasoning, refusal, an in-stream error labelled), tool calls aside."""
    return [part.name if part.name in (THINKING, REFUSAL, "error") else part.kind
            for part in answer.parts if part.kind != "tool_call"]  # fmt: skip


def behaviour_changes(before: Answer, after: Answer) -> list[Finding]:
    findings = []
    pairs = [
        ("model", before.model, after.model),
        ("finish_reason", before.finish_reason, after.finish_reason),
        ("tool_calls", ", ".join(map(_call, before.tool_calls)), ", ".join(map(_call, after.tool_calls))),
        ("refusal", "refused" if before.refusal else "", "refused" if after.refusal else ""),
        ("choices", str(before.choices or ""), str(after.choices or "")),
        ("content_blocks", ", ".join(_blocks(before)), ", ".join(_blocks(after))),
    ]
    for name, was, now in pairs:
        if was != now and not (name == "model" and not (was and now)):
            findings.append(Finding(Severity.BEHAVIOUR, name, was or "-", now or "-"))
    return findings


MAX_DIFF_WORDS = 12
"""Words of each removed or inserted run a word diff shows before it is cut."""


def word_diff(old: str, new: str, limit: int = 300) -> str:
    """`-[removed words] +[inserted words]` for each change, cut to `limit` characters."""
    a, b = old.split(), new.split()
    pieces = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            pieces.append(f"-[{_words(a[i1:i2])}]")
        if op in ("insert", "replace"):
            pieces.append(f"+[{_words(b[j1:j2])}]")
    return one_line(" ".join(pieces), limit)


def _words(words: list[str]) -> str:
    cut = words[:MAX_DIFF_WORDS]
    return " ".join(cut) + (" …" if len(words) > len(cut) else "")


def similarity(old: str, new: str) -> float:
    """0 (nothing in common) to 1 (the same words in the same order)."""
    return difflib.SequenceMatcher(None, old.split(), new.split(), autojunk=False).ratio()


def text_changes(before: Answer, after: Answer) -> list[Finding]:
    findings = []
    embeddings = [[p.text for p in answer.parts if p.kind == "embedding"] for answer in (before, after)]
    same_calls = list(map(_call, before.tool_calls)) == list(map(_call, after.tool_calls))
    arguments = ["\n".join(map(_arguments, answer.tool_calls)) if same_calls else "" for answer in (before, after)]
    for name, was, now in (
        ("text", before.text, after.text),
        ("tool_arguments", arguments[0], arguments[1]),
        ("refusal_text", before.refusal, after.refusal),
        ("embedding", "\n".join(embeddings[0]), "\n".join(embeddings[1])),
        ("error_message", error_message(before), error_message(after)),
    ):
        if was != now and (name not in ("refusal_text", "error_message", "tool_arguments") or (was and now)):
            detail = f"similarity {similarity(was, now):.2f}: {word_diff(was, now)}"
            findings.append(Finding(Severity.TEXT, name, one_line(was, 200), one_line(now, 200), detail))
    if before.raw and after.raw and before.parts != after.parts:
        findings.append(Finding(Severity.TEXT, "body", "", "", "the body changed (no reader knows this API)"))
    return findings
