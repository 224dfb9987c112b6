"""`cassette drift` end to end: cassettes recorded through mitmdump by the real openai and anthropic SDKs, then
re-sent by `cassette drift` (its own mitmdump, started by the launcher) to the fake upstream switched between
behaviours, as a provider changes under committed cassettes.

One recording for the module; each test is one drift run (one proxy), several cases per run.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
from pathlib import Path

import anthropic
import openai
import pytest
from cassette_command import redirect_args
from cassette_proxy.cli import main
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.core.reading.summary import summarize_response
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, FakeUpstream, Proxy

OPENAI_PROMPTS = {
    "steady": "Say hi to the steady team",
    "retired": "Which model is retired",
    "fields": "Count to three in fields",
    "finish": "Write a poem that ends",
    "tool": "What is the weather in Paris",
    "rate": "Rate limited question",
}
STREAMED_OPENAI = "Stream a steady answer"
ANTHROPIC_TEXT = "Name a colour please"
ANTHROPIC_STREAM = "Stream with a shape"

WEATHER_CALL = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]  # fmt: skip
FORECAST_CALL = [{"id": "call_2", "type": "function",
                  "function": {"name": "get_forecast", "arguments": '{"city": "Paris", "days": 3}'}}]  # fmt: skip


def tool_rule(calls: list[dict]) -> dict:
    return {"when": OPENAI_PROMPTS["tool"], "add": {"choices.0.message.content": None,
            "choices.0.message.tool_calls": calls, "choices.0.finish_reason": "tool_calls"}}  # fmt: skip


RECORDED = [tool_rule(WEATHER_CALL)]
"""What the provider answered when the cassettes were recorded (besides its echo)."""

DRIFTED = [
    {"when": OPENAI_PROMPTS["retired"], "status": 404, "body": {"error": {
        "message": "The model `gpt-4o-mini` has been deprecated", "type": "invalid_request_error",
        "code": "model_not_found"}}},
    {"when": OPENAI_PROMPTS["fields"], "add": {"service_tier": "default"}, "drop": ["usage.total_tokens"]},
    {"when": OPENAI_PROMPTS["finish"], "add": {"choices.0.finish_reason": "length"}},
    tool_rule(FORECAST_CALL),
    {"when": OPENAI_PROMPTS["rate"], "status": 429, "times": 1, "headers": {"retry-after": "1"},
     "body": {"error": {"message": "Rate limit reached", "type": "requests"}}},
    {"when": ANTHROPIC_TEXT, "text": "Teal, a blue green"},
    {"when": ANTHROPIC_STREAM, "event": "content_block_delta", "drop": ["index"], "add": {"delta.citations": []}},
]  # fmt: skip


def through(proxy: Proxy, sdk):
    """The SDK's own HTTP client (each SDK brings its httpx), sent through the proxy and trusting its CA."""
    context = ssl.create_default_context(cafile=proxy.ca_bundle)
    return sdk.DefaultHttpxClient(proxy=proxy.url, verify=context, trust_env=False)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    fake = FakeUpstream(tmp_path_factory.mktemp("upstream")).start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, upstream) -> Path:
    """A cassette folder recorded through a record-mode mitmdump by the real SDKs: chat, a tool call, streams."""
    folder = tmp_path_factory.mktemp("recording")
    upstream.behave(*RECORDED)
    proxy = Proxy(folder / "proxy", folder / "cassettes", upstream, cassette_mode="record").start()
    try:
        with through(proxy, openai) as http, through(proxy, anthropic) as claude_http:
            client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, http_client=http)
            tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
            for name, prompt in OPENAI_PROMPTS.items():
                extra = {"tools": tools} if name == "tool" else {}
                client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}],
                                               **extra)  # fmt: skip
            stream = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": STREAMED_OPENAI}], stream=True
            )
            assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            claude = anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY, http_client=claude_http)
            messages = [{"role": "user", "content": ANTHROPIC_TEXT}]
            claude.messages.create(model="claude-haiku-4-5", max_tokens=64, messages=messages)
            with claude.messages.stream(
                model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": ANTHROPIC_STREAM}]
            ) as streamed:
                assert streamed.get_final_text()
    finally:
        assert proxy.stop()["counts"]["recorded"] == 9
    return folder / "cassettes"


def snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def by_prompt(report: dict) -> dict[str, dict]:
    return {result["prompt"]: result for result in report["results"]}


@pytest.fixture
def drift(tmp_path, upstream, monkeypatch, capsys):
    """`cassette drift ARGS` in this process against the fake upstream; returns (exit status, report, stdout)."""
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(upstream))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)

    def run(folder: Path, *args: str) -> tuple[int, dict, str]:
        report, markdown = tmp_path / "drift.json", tmp_path / "drift.md"
        code = main(["drift", "--dir", str(folder), "--report", str(report), "--markdown", str(markdown), *args])
        out, err = capsys.readouterr()
        written = [path.read_text() for path in folder.rglob("*.json")]
        for text in (out, err, report.read_text(), markdown.read_text(), *written):
            assert FAKE_OPENAI_KEY not in text and FAKE_ANTHROPIC_KEY not in text
        return code, json.loads(report.read_text()), out

    return run


def test_same_answers_are_no_drift_and_leave_the_folder_byte_identical(recorded, upstream, drift):
    before = snapshot(recorded)
    upstream.behave(*RECORDED)
    asked = len(upstream.stats()["log"])
    code, report, out = drift(recorded)
    assert code == 0, out
    assert report["counts"]["checked"] == 9 and report["counts"]["same"] == 9 and report["worst"] is None
    assert snapshot(recorded) == before
    sent = upstream.stats()["log"][asked:]
    assert len(sent) == 9
    headers = [{name.lower(): value for name, value in entry["headers"].items()} for entry in sent]
    keys = {entry.get("authorization") or entry.get("x-api-key") for entry in headers}
    assert keys == {f"Bearer {FAKE_OPENAI_KEY}", FAKE_ANTHROPIC_KEY}  # each provider's key, from its variable
    assert all(entry.get("anthropic-version") for entry in headers if "x-api-key" in entry)


def test_each_kind_of_drift_is_found_and_ordered_worst_first(recorded, upstream, drift):
    before = snapshot(recorded)
    upstream.behave(*RECORDED, *DRIFTED)
    asked = len(upstream.stats()["log"])
    code, report, out = drift(recorded)
    assert code == 1  # behaviour (and worse) fails by default
    results = by_prompt(report)
    retired = results[OPENAI_PROMPTS["retired"]]
    assert (retired["severity"], retired["findings"][0]["new"]) == ("status", "404")
    assert "has been deprecated" in retired["findings"][0]["detail"]
    fields = {(f["field"], f["detail"]) for f in results[OPENAI_PROMPTS["fields"]]["findings"]}
    assert fields == {("added", "service_tier"), ("removed", "usage.total_tokens")}
    finish = results[OPENAI_PROMPTS["finish"]]["findings"]
    assert [(f["field"], f["old"], f["new"]) for f in finish] == [("finish_reason", "stop", "length")]
    tool = [(f["field"], f["old"], f["new"]) for f in results[OPENAI_PROMPTS["tool"]]["findings"]]
    assert tool == [("tool_calls", "get_weather(city)", "get_forecast(city, days)")]
    text = results[ANTHROPIC_TEXT]
    assert (text["severity"], text["findings"][0]["new"]) == ("text", "Teal, a blue green")
    shape = {(f["field"], f["detail"]) for f in results[ANTHROPIC_STREAM]["findings"]}
    assert shape == {("added", "content_block_delta:delta.citations"), ("removed", "content_block_delta:index")}
    for same in (OPENAI_PROMPTS["steady"], STREAMED_OPENAI, OPENAI_PROMPTS["rate"]):
        assert results[same]["outcome"] == "same", results[same]
    rate = results[OPENAI_PROMPTS["rate"]]
    assert rate["attempts"] == 2 and "429" in rate["message"]  # retried, reported, never drift
    asks = [e["at"] for e in upstream.stats()["log"][asked:] if OPENAI_PROMPTS["rate"] in e["body"]]
    assert len(asks) == 2 and asks[1] - asks[0] >= 1  # the retry waited the retry-after second
    assert [r["severity"] for r in report["results"]][:6] == ["status", "shape", "shape", "behaviour", "behaviour",
                                                               "text"]  # fmt: skip
    assert out.splitlines()[0].startswith("cassette drift: 9 checked: 1 status, 2 shape, 2 behaviour, 1 text, 3 same")
    assert snapshot(recorded) == before  # nothing written without --write


def test_write_accepts_the_selected_re_recordings(recorded, tmp_path, upstream, drift):
    folder = tmp_path / "cassettes"
    shutil.copytree(recorded, folder)
    before = snapshot(folder)
    upstream.behave(*RECORDED, *DRIFTED)
    code, report, out = drift(folder, "--select-host", "api.anthropic.com", "--write", "--fail-on", "status")
    assert code == 0  # shape and text drift, below the status threshold
    assert report["counts"]["checked"] == 2
    changed = {path for path, digest in snapshot(folder).items() if before[path] != digest}
    assert changed == {result["cassette"] for result in report["results"]} and len(changed) == 2
    assert "--write: 2 re-recording(s) written" in out
    [text] = [r["cassette"] for r in report["results"] if r["prompt"] == ANTHROPIC_TEXT]
    assert summarize_response(load(folder / text)["response"]).content == "Teal, a blue green"
