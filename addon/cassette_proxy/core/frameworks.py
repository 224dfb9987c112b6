"""Framework presets: the values agent frameworks make up on every run, keyed by shape, on by default.

An agent framework sends values no API returned and no user wrote: openai-agents
a fresh `prompt_cache_key` per run, pydantic-ai and LangChain fresh tool-call ids.
Keyed as sent, every run would miss, and the user would have to find each one in
a 409 and write a rule. Each rule here is narrowed to where only the framework
makes the value (its own prefix, or a UUID in a tool call's id field), so the
values a user or an API chose still count, and a real change still misses: a
placeholder is numbered by first appearance (`volatile.with_placeholders`), so
the same id stays the same placeholder and two ids stay two.

Presets are named in a cassette's `keyed_with` (`frameworks`), never stored as
expressions: a name is resolved from this table, so a cassette (untrusted input)
cannot bring its own expression. How each rule was found is written beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .volatile import ValuePattern

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_RANDOM_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
"""UUID versions 4 (random) and 7 (time and random): a name-based UUID (3, 5), made the same on every run, counts."""

TOOL_CALL_ID_FIELDS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id"})
"""Where a tool call's id travels: OpenAI chat `tool_calls[].id` and `tool_call_id`, the Responses API's
`call_id`, Anthropic's `tool_use.id` and `tool_use_id`, Gemini's `function_call.id`/`function_response.id`."""


@dataclass(frozen=True)
class Preset:
    name: str
    invents: str
    """What the framework makes up, in the words the docs and `--help` use."""
    patterns: tuple[ValuePattern, ...]


def _pattern(name: str, expression: str, label: str, needle: str, fields: frozenset[str] | None = None) -> ValuePattern:
    return ValuePattern(name, re.compile(expression), label, fields, needle)


PRESETS = {
    preset.name: preset
    for preset in (
        Preset(
            "openai-agents",
            "prompt_cache_key agents-sdk:run:<32 hex>, new each Runner.run()",
            # agents/run_internal/prompt_cache_key.py: `f"agents-sdk:run:{uuid4().hex}"` when the run has no
            # conversation, session or group id (those are hashed, so the same every run) and the model is
            # OpenAI's own (base URL api.openai.com).
            (
                _pattern(
                    "openai-agents",
                    r"\Aagents-sdk:run:[0-9a-f]{32}\Z",
                    "agents-sdk:run:",
                    "agents-sdk:run:",
                    frozenset({"prompt_cache_key"}),
                ),
            ),
        ),
        Preset(
            "pydantic-ai",
            "tool-call ids pyd_ai_<32 hex>, when a model (Gemini) returns a tool call without one",
            # pydantic_ai/_utils.py: generate_tool_call_id() is `f"pyd_ai_{uuid.uuid4().hex}"`; the id then travels
            # in later requests (function_call.id, function_response.id, tool_call_id).
            (_pattern("pydantic-ai", r"pyd_ai_[0-9a-f]{32}", "pyd_ai_", "pyd_ai_"),),
        ),
        Preset(
            "langchain",
            "tool-call ids as bare UUIDs (tool_example_to_messages, langchain-google-genai), lc_<uuid> and "
            "lc_run-<uuid> message and block ids, lc-image-<32 hex> tokens",
            (
                # langchain_core/utils/function_calling.py tool_example_to_messages(): `"id": str(uuid.uuid4())`
                # for each few-shot tool call, sent as tool_calls[].id / tool_call_id (chat) or call_id
                # (Responses API); langchain_google_genai makes the same when Gemini returns no id. Only a whole
                # value in a tool-call id field: a UUID inside a prompt, or anywhere else, still counts.
                _pattern("langchain", rf"\A{_RANDOM_UUID}\Z", "", "-", TOOL_CALL_ID_FIELDS),
                # langchain_core/utils/utils.py ensure_id(): `f"lc_{uuid4()}"`; chat_models.py: `f"lc_run-{run_id}"`.
                _pattern("langchain", rf"lc_(?:run-)?{_UUID}", "lc_", "lc_"),
                # langchain_openai/decisions/_input.py: `f"lc-image-{uuid.uuid4().hex}"`.
                _pattern("langchain", r"lc-image-[0-9a-f]{32}", "lc-image-", "lc-image-"),
            ),
        ),
    )
}
"""Every preset, by name. All of them are on unless `cassette_frameworks` says otherwise."""

DEFAULT_FRAMEWORKS = tuple(sorted(PRESETS))


def parse_frameworks(names: Iterable[str]) -> tuple[str, ...]:
    """Preset names, sorted and distinct (empty entries ignored, so `--set cassette_frameworks=` means none);
    ValueError naming an unknown one."""
    chosen = {name.strip().lower() for name in names if name.strip()}
    unknown = sorted(chosen - PRESETS.keys())
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is not a framework preset; choose from {', '.join(PRESETS)}")
    return tuple(sorted(chosen))


def framework_patterns(names: Iterable[str]) -> tuple[ValuePattern, ...]:
    """The value patterns of the named presets (known names, as `parse_frameworks` returns them)."""
    return tuple(pattern for name in names for pattern in PRESETS[name].patterns)
