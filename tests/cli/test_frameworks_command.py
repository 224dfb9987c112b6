"""`cassette frameworks`: one line per preset rule, naming its shape and its places."""

from __future__ import annotations

from cassette_proxy.cli import main
from cassette_proxy.core.keys.frameworks import PRESETS, TOOL_CALL_ID_PLACES


def test_each_rule_is_one_line_with_its_shape_and_places(capsys):
    assert main(["frameworks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for preset in PRESETS.values():
        for rule in preset.rules:
            [line] = [line for line in lines if line.startswith(f"  {preset.name}: {rule.what}:")]
            assert rule.expression in line
            assert ("the tool-call id places" in line) is bool(set(TOOL_CALL_ID_PLACES) & set(rule.places))
    assert [line.strip() for line in lines if line.strip() in TOOL_CALL_ID_PLACES] == list(TOOL_CALL_ID_PLACES)
    assert "prompt_cache_key" in next(line for line in lines if line.startswith("  openai-agents:"))
