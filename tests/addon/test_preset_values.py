"""What a framework preset keyed as a placeholder, said: per cassette in the run report and its summary, beside the
placeholder in a miss, and in `cassette show`. In-process through the addon's hooks."""

from __future__ import annotations

import json
import uuid

from cassette_proxy.cli.show import show_text
from cassette_proxy.core.report import Report
from in_process import chat_flow, json_answer

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

ANSWER = {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": "sunny"}}]}


def tool_turn(first: str, second: str, answers: str | None = None) -> dict:
    """A chat request answering two tool calls pydantic-ai made up ids for; `answers`: the id the second result
    names, when it is not its own call's."""
    return {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": first, "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            {"id": second, "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": first, "content": "sunny"},
        {"role": "tool", "tool_call_id": answers or second, "content": "rainy"},
    ]}  # fmt: skip


def made_up() -> str:
    return f"pyd_ai_{uuid.uuid4().hex}"


PLACES = [
    {"path": "messages[1].tool_calls[0].id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#1"},
    {"path": "messages[1].tool_calls[1].id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#2"},
    {"path": "messages[2].tool_call_id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#1"},
    {"path": "messages[3].tool_call_id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#2"},
]


def test_the_report_lists_per_cassette_what_the_presets_keyed_as_placeholders(proxies, upstream, tmp_path):
    recording = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    recording.answer(recording.request(chat_flow(tool_turn(made_up(), made_up()), upstream.url())), json_answer(ANSWER))
    recorded = recording.done()
    [cassette] = recorded["cassettes_used"]
    assert recorded["preset_values"] == {cassette: PLACES}

    replay = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    flow = replay.request(chat_flow(tool_turn(made_up(), made_up()), upstream.url()))  # new ids: a new run
    assert flow.response.status_code == 200
    report = replay.done()
    assert report["counts"]["hits"] == 1
    assert report["preset_values"] == {cassette: PLACES}
    summary = [line for line in Report.read(tmp_path / "report1.json").summary().splitlines() if "presets" in line]
    assert summary == [
        "cassette: framework presets keyed 4 made-up values as placeholders in 1 cassettes (pydantic-ai 4): "
        "each is listed under preset_values in the run report"
    ]

    shown = show_text(proxies.cassette_dir / cassette, proxies.cassette_dir).splitlines()
    start = shown.index("presets:   keyed as placeholders, not as sent:")
    assert shown[start + 1 : start + 5] == [f"  {p['path']}: {p['placeholder']} (preset {p['preset']})" for p in PLACES]


def test_a_request_without_preset_values_lists_none(proxies, upstream):
    proxies.record(upstream, tool_turn("call_abc", "call_def"), ANSWER)
    replay = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    replay.request(chat_flow(tool_turn("call_abc", "call_def"), upstream.url()))
    report = replay.done()
    assert report["counts"]["hits"] == 1 and report["preset_values"] == {}


def test_a_miss_names_the_preset_beside_its_placeholder(proxies, upstream):
    proxies.record(upstream, tool_turn(made_up(), made_up()), ANSWER)
    replay = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    first = made_up()
    flow = replay.request(chat_flow(tool_turn(first, made_up(), answers=first), upstream.url()))  # both answer #1
    assert flow.response.status_code == 409
    message = json.loads(flow.response.content)["error"]["message"]
    assert 'messages[3].tool_call_id: "pyd_ai_…#2" → "pyd_ai_…#1" (placeholder of preset pydantic-ai)' in message
    assert replay.done()["counts"]["misses"] == 1


def test_worker_reports_merge_and_read_back_what_presets_keyed_and_the_sinks(tmp_path):
    one, two = Report(), Report()
    one.presets_replaced("a.json", PLACES[:1])
    one.telemetry_request("PostHog")
    two.presets_replaced("b.json", PLACES[1:2])
    two.telemetry_request("PostHog")
    two.telemetry_request("LangSmith")
    two.write(tmp_path / "two.json")
    merged = Report.merged([one, Report.read(tmp_path / "two.json")])
    assert merged.preset_values == {"a.json": PLACES[:1], "b.json": PLACES[1:2]}
    assert merged.telemetry_sinks == {"PostHog": 2, "LangSmith": 1} and merged.telemetry == 3
    assert "cassette: telemetry (never recorded): LangSmith 1, PostHog 2" in merged.summary().splitlines()
