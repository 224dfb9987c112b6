"""The agent frameworks people use, as a newcomer runs them: no flags, no rules, record once, replay `--strict`.

One application, with no proxy code, runs openai-agents (its tracing on, as by default), a pydantic-ai agent
whose Gemini tool call comes back without an id (so pydantic-ai invents `pyd_ai_…`), and langchain-openai
with few-shot tool examples (fresh UUIDs each run) and LangSmith tracing on. `cassette run --mode record`
records it against the fake upstream; `cassette run --strict`, with no key settings, replays it offline:
every value these frameworks made up is keyed by its preset, and every trace export is answered as
telemetry, never recorded, never a miss.
"""

from __future__ import annotations

import json
import sys

from cassette_command import cassette, redirect_args
from harness import FAKE_OPENAI_KEY, FakeUpstream

APP = """
from agents import Agent, Runner

print("agents:", Runner.run_sync(Agent(name="Assistant", instructions="Answer briefly."), "hello agents").final_output)

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

weather_agent = PydanticAgent(GoogleModel("gemini-2.0-flash", provider=GoogleProvider(api_key="fake-gemini-key")))


@weather_agent.tool_plain
def weather(city: str = "Paris") -> str:
    return f"sunny in {city}"


print("pydantic-ai:", weather_agent.run_sync("hello pydantic-ai").output)

from langchain_core.utils.function_calling import tool_example_to_messages
from langchain_openai import ChatOpenAI
from pydantic import BaseModel


class Person(BaseModel):
    name: str | None = None


examples = tool_example_to_messages("Fiona traveled far from France to Spain.", [Person(name="Fiona")])
llm = ChatOpenAI(model="gpt-4o-mini", use_responses_api=True, max_retries=0)
print("langchain:", llm.invoke([*examples, ("user", "hello langchain")]).text)
"""

EXPECTED = ["agents: echo: hello agents", "pydantic-ai: echo: hello pydantic-ai", "langchain: echo: hello langchain"]

ENVIRONMENT = {
    "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    "LANGSMITH_TRACING": "true",
    "LANGSMITH_API_KEY": "lsv2_fake_DO_NOT_STORE_0123456789",
    "OPENAI_AGENTS_DISABLE_TRACING": "",  # tracing on, whatever the machine says
}


def run(tmp_path, *flags: str, env: dict) -> dict:
    report = tmp_path / f"report{len(list(tmp_path.glob('report*')))}.json"
    result = cassette("run", *flags, "--report", str(report), "--", sys.executable, str(tmp_path / "app.py"),
                      cwd=tmp_path, env={**ENVIRONMENT, **env}, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[:3] == EXPECTED, result.stdout + result.stderr
    return json.loads(report.read_text())


def test_openai_agents_pydantic_ai_and_langchain_replay_strict_with_no_flags(tmp_path, upstream_certificate):
    (tmp_path / "app.py").write_text(APP)
    upstream = FakeUpstream(tmp_path / "upstream", upstream_certificate).start()
    try:
        recorded = run(tmp_path, "--mode", "record", env={"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)})
    finally:
        upstream.stop()
    # agents 1, pydantic-ai 2 (the tool call, then its result), langchain 1; the traces are no recording
    assert recorded["counts"]["recorded"] == 4
    assert recorded["counts"]["telemetry"] >= 2  # openai-agents' /v1/traces/ingest, LangSmith's runs
    cassettes = {p.relative_to(tmp_path / "cassettes").as_posix(): p for p in (tmp_path / "cassettes").rglob("*.json")}
    assert sorted(name.rsplit("/", 1)[0] for name in cassettes) == [
        "api.openai.com/v1/responses", "api.openai.com/v1/responses",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash_generateContent",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash_generateContent",
    ]  # fmt: skip
    stored = {name: json.loads(path.read_text()) for name, path in cassettes.items()}
    requests = json.dumps([c["request"] for c in stored.values()])
    assert "agents-sdk:run:" in requests and "pyd_ai_" in requests  # what the presets had to key
    assert all(c["keyed_with"]["frameworks"] == ["langchain", "openai-agents", "pydantic-ai"] for c in stored.values())
    assert "DO_NOT_STORE" not in requests

    replayed = run(tmp_path, "--strict", env={})  # upstream stopped: anything not answered here fails
    counts = replayed["counts"]
    assert (counts["hits"], counts["misses"], counts["upstream"], counts["offline"]) == (4, 0, 0, 0)
    assert counts["telemetry"] >= 2
