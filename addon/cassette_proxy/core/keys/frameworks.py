"""Framework presets: the values agent frameworks make up on every run, keyed by shape, on by default.

An agent framework sends values no API returned and no user wrote: openai-agents
a fresh `prompt_cache_key` per run, pydantic-ai, LangChain and simonw's llm (and
its llm-gemini plugin) fresh tool-call ids.
Keyed as sent, every run would miss, and the user would have to find each one in
a 409 and write a rule. Each rule here is narrowed to where only the framework
makes the value: the exact places in each API's request where the framework
puts it (a tool call's id fields, `prompt_cache_key`; `TOOL_CALL_ID_PLACES`),
never a key name anywhere, so the values a user or an API chose (a tool's
arguments and results, metadata, schemas, prompt text) still count, and a real change still misses: a
placeholder is numbered by first appearance (`volatile.with_placeholders`), so
the same id stays the same placeholder and two ids stay two.

Presets are named in a cassette's `keyed_with` (`frameworks`), never stored as
expressions: a name is resolved from this table, so a cassette (untrusted input)
cannot bring its own expression. How each rule was found is written beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .volatile import ValuePattern, parse_place

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_RANDOM_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[47][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
"""UUID versions 4 (random) and 7 (time and random): a name-based UUID (3, 5), made the same on every run, counts."""

TOOL_CALL_ID_PLACES = (
    # OpenAI chat completions: the assistant's calls, and each tool message's answer to one
    "messages[].tool_calls[].id",
    "messages[].tool_call_id",
    # the Responses API: a call item and its output item
    "input[type=function_call|function_call_output|custom_tool_call|custom_tool_call_output].call_id",
    # Anthropic Messages: a tool_use block and the tool_result answering it
    "messages[].content[type=tool_use].id",
    "messages[].content[type=tool_result].tool_use_id",
    # Gemini (generateContent): camelCase as google-genai sends it, snake_case as llm-gemini does
    "contents[].parts[].functionCall.id",
    "contents[].parts[].functionResponse.id",
    "contents[].parts[].function_call.id",
    "contents[].parts[].function_response.id",
    # Amazon Bedrock Converse: a toolUse block and the toolResult answering it (langchain-aws, pydantic-ai)
    "messages[].content[].toolUse.toolUseId",
    "messages[].content[].toolResult.toolUseId",
)
"""Where a tool call's id travels in each API's request, and nowhere else: not in a call's arguments (`input`,
`args`, `arguments`), not in a tool's result (`content`, `response`, `output`), not in metadata or a schema."""


@dataclass(frozen=True)
class Rule:
    """One thing a framework makes up, and where it puts it."""

    what: str
    """In words, for `cassette frameworks` and the docs."""
    expression: str
    needle: str
    """Text every match contains (volatile.ValuePattern.needle); the label of the placeholder is the same."""
    places: tuple[str, ...]
    source: str
    """Where in the framework's source the value is made, so the rule can be checked again."""
    label: str | None = None
    """The placeholder's start when it is not the needle (a bare UUID's is empty: `…#1`)."""


@dataclass(frozen=True)
class Preset:
    name: str
    invents: str
    """What the framework makes up, in the words the docs and `--help` use."""
    rules: tuple[Rule, ...]
    patterns: tuple[ValuePattern, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "patterns",
            tuple(
                ValuePattern(
                    self.name,
                    re.compile(rule.expression),
                    rule.needle if rule.label is None else rule.label,
                    tuple(parse_place(place) for place in rule.places),
                    rule.needle,
                    preset=True,
                )
                for rule in self.rules
            ),
        )


PRESETS = {
    preset.name: preset
    for preset in (
        Preset(
            "llm",
            "tool-call ids call_<32 hex> (llm-gemini, when Gemini returns none) and tc_<ulid> (llm itself)",
            (
                Rule(
                    "llm-gemini's tool-call id when Gemini returns a call without one",
                    r"\Acall_[0-9a-f]{32}\Z",
                    "call_",
                    TOOL_CALL_ID_PLACES,
                    'llm_gemini.py: `function_call.get("id") or f"call_{uuid4().hex}"`, sent back as '
                    "function_call.id and function_response.id",
                ),
                Rule(
                    "llm's tool-call id for a plugin's call that has none",
                    r"\Atc_[0-9a-hjkmnp-tv-z]{26}\Z",
                    "tc_",
                    TOOL_CALL_ID_PLACES,
                    'llm/models.py _ensure_tool_call_id(): `f"tc_{str(monotonic_ulid()).lower()}"`',
                ),
            ),
        ),
        Preset(
            "openai-agents",
            "prompt_cache_key agents-sdk:run:<32 hex>, new each Runner.run()",
            (
                Rule(
                    "the run's prompt cache key, when the run has no conversation, session or group id",
                    r"\Aagents-sdk:run:[0-9a-f]{32}\Z",
                    "agents-sdk:run:",
                    ("prompt_cache_key",),
                    # Conversation, session and group ids are hashed (agents-sdk:<kind>:<hash>), the same every
                    # run; the key is sent only when the model is OpenAI's own (base URL api.openai.com).
                    'agents/run_internal/prompt_cache_key.py: `f"agents-sdk:run:{uuid4().hex}"`',
                ),
            ),
        ),
        Preset(
            "pydantic-ai",
            "tool-call ids pyd_ai_<32 hex>, when a model (Gemini) returns a tool call without one",
            (
                Rule(
                    "pydantic-ai's tool-call id when a model returns a call without one",
                    r"\Apyd_ai_[0-9a-f]{32}\Z",
                    "pyd_ai_",
                    TOOL_CALL_ID_PLACES,
                    'pydantic_ai/_utils.py generate_tool_call_id(): `f"pyd_ai_{uuid.uuid4().hex}"`, the default of '
                    "ToolCallPart.tool_call_id and ToolReturnPart.tool_call_id",
                ),
            ),
        ),
        Preset(
            "langchain",
            "tool-call ids as bare UUIDs (tool_example_to_messages, langchain-google-genai) and lc_<uuid>, "
            "lc_run-<uuid> ids",
            (
                Rule(
                    "a bare UUID as a tool call's id (few-shot tool examples; Gemini calls without an id)",
                    rf"\A{_RANDOM_UUID}\Z",
                    "-",
                    TOOL_CALL_ID_PLACES,
                    "langchain_core/utils/function_calling.py tool_example_to_messages(): "
                    '`"id": str(uuid.uuid4())`; langchain_google_genai the same when Gemini returns no id',
                    label="",
                ),
                Rule(
                    "lc_<uuid> and lc_run-<uuid> ids LangChain gives a tool call or message it made",
                    rf"\Alc_(?:run-)?{_UUID}(?=(?:-[0-9]+)?\Z)",
                    "lc_",
                    (*TOOL_CALL_ID_PLACES, "input[type=message].id"),
                    'langchain_core/utils/utils.py ensure_id(): `f"lc_{uuid4()}"` (content.py create_tool_call); '
                    'chat_models.py: `f"lc_run-{run_id}"` and `-<index>`; older langchain-openai sent the '
                    "message's as its Responses item id",
                ),
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
