"""What a cassette says, in a few fields a reviewer reads: model, first user message, finish reason, content.

A projection of conversation.py's model, the one reader of every API's
requests and answers (whole or streamed): `show`, `ls` and `diff` print and
compare these fields, `cassette view` renders the model itself, so a refusal,
a tool call, reasoning or a stream reads the same in all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .conversation import REFUSAL, THINKING, Answer, Conversation, Part, answer_of, conversation_from


@dataclass(frozen=True)
class RequestSummary:
    method: str
    url: str
    model: str
    first_user_message: str


@dataclass(frozen=True)
class ResponseSummary:
    status: int | None
    model: str
    finish_reason: str
    content: str
    """The answer's parts one after another: text as said, reasoning, refusals and tool calls labelled, an
    error's JSON; empty when no reader knew the body (`cassette diff` then compares its fields instead)."""


def one_line(text: str, limit: int) -> str:
    """Whitespace folded to single spaces, cut to `limit` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fence(lines: list[str]) -> str:
    """A Markdown code fence longer than any backtick run in the lines, so recorded content cannot break out of it."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    return "`" * max(3, longest + 1)


def code_span(text: str) -> str:
    """`text` on one line as an inline code span that no backtick in it can close, `|` escaped for a table cell."""
    text = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}".replace("|", "\\|")


def part_text(part: Part) -> str:
    """One part as a line of a summary: `[call name] {…}`, `[thinking] …`, `[refusal] …`, else its text."""
    if part.kind == "tool_call":
        return f"[call {part.name}] {part.text}" if part.name else part.text
    if part.kind == "tool_result":
        return f"[result {part.name}] {part.text}" if part.name else part.text
    if part.kind == "text" and part.name in (THINKING, REFUSAL):
        return f"[{part.name}] {part.text}"
    return part.text


def answer_content(answer: Answer) -> str:
    return "" if answer.raw else "\n".join(part_text(part) for part in answer.parts if part.text or part.name)


def turn_lines(conversation: Conversation) -> list[tuple[str, str]]:
    """(role, text) of every turn a request sends, its parts on one line: what `cassette show` lists."""
    return [(turn.role, " ".join(filter(None, map(part_text, turn.parts)))) for turn in conversation.turns]


def summarize_request(request: dict[str, Any]) -> RequestSummary:
    conversation = conversation_from(request)
    return RequestSummary(
        method=conversation.method,
        url=conversation.url,
        model=conversation.model,
        first_user_message=conversation.first_user_message,
    )


def summarize_response(response: dict[str, Any]) -> ResponseSummary:
    answer = answer_of(response)
    return ResponseSummary(
        status=answer.status, model=answer.model, finish_reason=answer.finish_reason, content=answer_content(answer)
    )
