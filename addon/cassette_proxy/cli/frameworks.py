"""`cassette frameworks`: every framework preset's rules, one line each: what it keys as a placeholder, and where."""

from __future__ import annotations

import argparse

from ..core.keys.frameworks import PRESETS, TOOL_CALL_ID_PLACES
from . import add_command


def frameworks_text() -> str:
    lines = [
        "framework presets (all on by default; `--frameworks NAME...` keeps those, `--frameworks` alone none):",
    ]
    for preset in PRESETS.values():
        for rule in preset.rules:
            where = (
                "the tool-call id places"
                if rule.places == TOOL_CALL_ID_PLACES
                else ", ".join(p for p in rule.places if p not in TOOL_CALL_ID_PLACES)
                + (" and the tool-call id places" if set(TOOL_CALL_ID_PLACES) <= set(rule.places) else "")
            )
            lines.append(f"  {preset.name}: {rule.what}: {rule.expression} at {where}")
    lines.append("the tool-call id places (a tool's arguments, results, metadata and prompt text are never one):")
    lines += [f"  {place}" for place in TOOL_CALL_ID_PLACES]
    lines.append(
        "what a preset replaced: the run report's preset_values (per cassette), "
        "`cassette show KEY` (per recording), a miss's differences (placeholder of preset NAME)"
    )
    return "\n".join(lines)


def run_frameworks(args: argparse.Namespace) -> int:
    print(frameworks_text())
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    command = add_command(subparsers, "frameworks")
    command.set_defaults(func=run_frameworks)
