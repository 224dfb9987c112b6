"""The agent frameworks people use, as a newcomer runs them: no flags, no rules, record once, replay `--strict`.

One application, with no proxy code, runs openai-agents (its tracing on, as by default), a pydantic-ai agent
whose Gemini tool call comes back without an id (so pydantic-ai invents `pyd_ai_…`), langchain-openai
with few-shot tool examples (fresh UUIDs each run) and LangSmith tracing on, an llm-gemini tool chain (the
plugin invents `call_<32 hex>`), litellm with its LangSmith callback, and a PostHog client. `cassette run --mode record`
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

import llm as simonw_llm


def forecast(city: str = "Paris") -> str:
    return f"sunny in {city}"


# llm-gemini: the fake Gemini returns the tool call without an id, so the plugin makes up call_<32 hex>
chain = simonw_llm.get_model("gemini-2.5-flash").chain("hello llm", tools=[forecast], key="fake-gemini-key")
print("llm:", chain.text())

import litellm

litellm.success_callback = ["langsmith"]  # its LangSmith callback posts to /api/v1/runs/batch
answer = litellm.completion(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hello litellm"}])
print("litellm:", answer.choices[0].message.content)

from posthog import Posthog

analytics = Posthog("phc_fake_project_key", host="https://us.i.posthog.com", sync_mode=True)
analytics.capture("suite ran", distinct_id="tester")
analytics.shutdown()
"""

EXPECTED = ["agents: echo: hello agents", "pydantic-ai: echo: hello pydantic-ai", "langchain: echo: hello langchain",
            "llm: echo: hello llm", "litellm: echo: hello litellm"]  # fmt: skip

ENVIRONMENT = {
    "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    "LANGSMITH_TRACING": "true",
    "LANGSMITH_API_KEY": "lsv2_fake_DO_NOT_STORE_0123456789",
    "OPENAI_AGENTS_DISABLE_TRACING": "",  # tracing on, whatever the machine says
    "POSTHOG_DISABLED": "",
    "LANGSMITH_BATCH_SIZE": "1",  # litellm's callback sends each run at once, not when its batch fills
}


def run(tmp_path, *flags: str, env: dict) -> dict:
    report = tmp_path / f"report{len(list(tmp_path.glob('report*')))}.json"
    result = cassette("run", *flags, "--report", str(report), "--", sys.executable, str(tmp_path / "app.py"),
                      cwd=tmp_path, env={**ENVIRONMENT, "LLM_USER_PATH": str(tmp_path / "llm"), **env}, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split("\n")[: len(EXPECTED)] == EXPECTED, result.stdout + result.stderr
    return json.loads(report.read_text())


def test_openai_agents_pydantic_ai_langchain_and_llm_replay_strict_with_no_flags(tmp_path, upstream_certificate):
    (tmp_path / "app.py").write_text(APP)
    upstream = FakeUpstream(tmp_path / "upstream", upstream_certificate).start()
    try:
        recorded = run(tmp_path, "--mode", "record", env={"CASSETTE_MITMDUMP_ARGS": redirect_args(upstream)})
    finally:
        upstream.stop()
    # agents 1, pydantic-ai 2 (the tool call, then its result), langchain 1, llm 2, litellm 1; no trace is recorded
    assert recorded["counts"]["recorded"] == 7
    assert recorded["passthrough_hosts"] == {}  # litellm's model map: the copy it ships (launch/client_env.py)
    assert recorded["counts"]["telemetry"] >= 3  # openai-agents' /v1/traces/ingest, LangSmith's runs, PostHog
    assert {"openai-agents traces", "LangSmith", "PostHog"} <= set(recorded["telemetry_sinks"])
    cassettes = {p.relative_to(tmp_path / "cassettes").as_posix(): p for p in (tmp_path / "cassettes").rglob("*.json")}
    assert sorted(name.rsplit("/", 1)[0] for name in cassettes) == [
        "api.openai.com/v1/chat/completions", "api.openai.com/v1/responses", "api.openai.com/v1/responses",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash_generateContent",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash_generateContent",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash_streamGenerateContent",
        "generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash_streamGenerateContent",
    ]  # fmt: skip
    stored = {name: json.loads(path.read_text()) for name, path in cassettes.items()}
    requests = json.dumps([c["request"] for c in stored.values()])
    assert "agents-sdk:run:" in requests and "pyd_ai_" in requests and '"call_' in requests  # what presets key
    assert all(
        c["keyed_with"]["frameworks"] == ["langchain", "llm", "openai-agents", "pydantic-ai"] for c in stored.values()
    )
    assert "DO_NOT_STORE" not in requests

    for _ in range(2):  # upstream stopped: anything not answered here fails; twice, each run making new ids
        replayed = run(tmp_path, "--strict", env={})
        counts = replayed["counts"]
        assert (counts["hits"], counts["misses"], counts["upstream"], counts["offline"]) == (7, 0, 0, 0)
        assert counts["telemetry"] >= 3 and replayed["telemetry_sinks"].get("PostHog", 0) >= 1
        # what the presets keyed is listed per cassette, each preset's own values in its own places
        keyed = {(v["preset"], v["path"]) for values in replayed["preset_values"].values() for v in values}
        assert {("openai-agents", "prompt_cache_key"), ("pydantic-ai", "contents[1].parts[0].functionCall.id"),
                ("llm", "contents[1].parts[0].function_call.id"),
                ("llm", "contents[2].parts[0].function_response.id")} <= keyed, keyed  # fmt: skip
