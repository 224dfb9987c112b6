"""Framework presets: what each framework makes up keys alike across runs, and a real change still misses."""

from __future__ import annotations

import json
import random
import uuid

import pytest
from cassette_proxy.core.keys.frameworks import DEFAULT_FRAMEWORKS, parse_frameworks
from cassette_proxy.core.keys.key import RequestFacts, request_key
from cassette_proxy.core.keys.recipe import make_recipe, recipe_of, stored_key
from cassette_proxy.core.keys.volatile import Replaced, with_placeholders

ON = make_recipe()
OFF = make_recipe(frameworks=())


def key(body: dict, recipe=ON) -> str:
    return stored_key({"method": "POST", "url": "https://api.openai.com/v1/responses", "headers": {},
                       "body_format": "json", "body": body}, recipe)  # fmt: skip


def agents_request(prompt: str, cache_key: str) -> dict:
    return {"model": "gpt-4.1", "input": [{"role": "user", "content": prompt}], "prompt_cache_key": cache_key}


def run_key() -> str:
    return f"agents-sdk:run:{uuid.uuid4().hex}"


def test_presets_are_all_on_by_default():
    assert ON.frameworks == DEFAULT_FRAMEWORKS == ("langchain", "llm", "openai-agents", "pydantic-ai")


def test_openai_agents_run_cache_key_keys_alike_across_runs_and_a_prompt_change_still_misses():
    first, second = agents_request("hi", run_key()), agents_request("hi", run_key())
    assert key(first) == key(second)
    assert key(first, OFF) != key(second, OFF)
    assert key(agents_request("hello", run_key())) != key(first)


def test_openai_agents_keys_made_from_the_users_own_ids_still_count():
    # conversation, session and group ids are hashed into agents-sdk:<kind>:<hash>: the same every run for the same id
    assert key(agents_request("hi", "agents-sdk:group:" + "a" * 32)) != key(
        agents_request("hi", "agents-sdk:group:" + "b" * 32)
    )
    # the run key's shape anywhere but prompt_cache_key is the user's text
    assert key(agents_request(run_key(), "x")) != key(agents_request(run_key(), "x"))


def gemini_tool_turn(call_id: str, city: str = "Paris") -> dict:
    return {"contents": [
        {"role": "user", "parts": [{"text": f"weather in {city}?"}]},
        {"role": "model", "parts": [{"function_call": {"id": call_id, "name": "weather", "args": {"city": city}}}]},
        {"role": "user", "parts": [{"function_response": {"id": call_id, "name": "weather", "response": {"t": 20}}}]},
    ]}  # fmt: skip


def test_pydantic_ai_tool_call_ids_key_alike_and_keep_their_pairing():
    a, b = f"pyd_ai_{uuid.uuid4().hex}", f"pyd_ai_{uuid.uuid4().hex}"
    assert key(gemini_tool_turn(a)) == key(gemini_tool_turn(b))
    assert key(gemini_tool_turn(a, "Rome")) != key(gemini_tool_turn(b))
    crossed = gemini_tool_turn(a)
    crossed["contents"][2]["parts"][0]["function_response"]["id"] = b  # the answer to another call
    assert key(crossed) != key(gemini_tool_turn(a))


def tool_example(call_id: str, content: str = "Fiona traveled far from France to Spain.") -> dict:
    """What langchain_core's tool_example_to_messages() sends: a fresh uuid4 per few-shot tool call."""
    return {"model": "gpt-4o-mini", "messages": [
        {"role": "user", "content": content},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "Person", "arguments": "{\"name\": \"Fiona\"}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "You have correctly called this tool."},
        {"role": "user", "content": "Mark went to Rome."},
    ]}  # fmt: skip


def test_langchain_tool_example_uuids_key_alike_across_runs():
    assert key(tool_example(str(uuid.uuid4()))) == key(tool_example(str(uuid.uuid4())))
    assert key(tool_example(str(uuid.uuid4())), OFF) != key(tool_example(str(uuid.uuid4())), OFF)
    assert key(tool_example(str(uuid.uuid4()), "Fiona went to Rome.")) != key(tool_example(str(uuid.uuid4())))


def test_a_uuid_the_user_chose_still_counts():
    # inside a prompt, in a field that is no tool-call id, or name-based (uuid5: the same every run)
    assert key(tool_example("x", f"order {uuid.uuid4()}")) != key(tool_example("x", f"order {uuid.uuid4()}"))
    assert key({"metadata": {"order": str(uuid.uuid4())}}) != key({"metadata": {"order": str(uuid.uuid4())}})
    assert key(tool_example(str(uuid.uuid5(uuid.NAMESPACE_URL, "a")))) != key(
        tool_example(str(uuid.uuid5(uuid.NAMESPACE_URL, "b")))
    )


def test_langchain_run_ids_key_alike_where_langchain_sends_them_and_their_index_counts():
    def body(item_id: str) -> dict:
        return {"input": [{"type": "message", "role": "assistant", "id": item_id,
                           "content": [{"type": "output_text", "text": "hi"}]}]}  # fmt: skip

    assert key(body(f"lc_{uuid.uuid4()}")) == key(body(f"lc_{uuid.uuid4()}"))
    assert key(body(f"lc_run-{uuid.uuid4()}-0")) == key(body(f"lc_run-{uuid.uuid4()}-0"))
    assert key(body(f"lc_run-{uuid.uuid4()}-0")) != key(body(f"lc_run-{uuid.uuid4()}-1"))  # the index is not made up


# One request per API, `$A` and `$B` standing for two values a framework made up (two tool calls).
CHAT = {"model": "m", "messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "$A", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "$B", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "$A", "content": "sunny"},
    {"role": "tool", "tool_call_id": "$B", "content": "rainy"},
]}  # fmt: skip
RESPONSES = {"model": "m", "input": [
    {"role": "user", "content": "weather?"},
    {"type": "function_call", "call_id": "$A", "name": "weather", "arguments": "{}"},
    {"type": "function_call", "call_id": "$B", "name": "weather", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "$A", "output": "sunny"},
    {"type": "function_call_output", "call_id": "$B", "output": "rainy"},
]}  # fmt: skip
ANTHROPIC = {"model": "m", "max_tokens": 10, "messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "$A", "name": "weather", "input": {"city": "Paris"}},
                                      {"type": "tool_use", "id": "$B", "name": "weather", "input": {"city": "Rome"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "$A", "content": "sunny"},
                                 {"type": "tool_result", "tool_use_id": "$B", "content": "rainy"}]},
]}  # fmt: skip


def gemini(call: str, answer: str) -> dict:
    return {"contents": [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{call: {"id": "$A", "name": "weather", "args": {"city": "Paris"}}},
                                    {call: {"id": "$B", "name": "weather", "args": {"city": "Rome"}}}]},
        {"role": "user", "parts": [{answer: {"id": "$A", "name": "weather", "response": {"output": "sunny"}}},
                                   {answer: {"id": "$B", "name": "weather", "response": {"output": "rainy"}}}]},
    ]}  # fmt: skip


BEDROCK = {"messages": [
    {"role": "user", "content": [{"text": "weather?"}]},
    {"role": "assistant", "content": [{"toolUse": {"toolUseId": "$A", "name": "weather", "input": {"city": "Paris"}}},
                                      {"toolUse": {"toolUseId": "$B", "name": "weather", "input": {"city": "Rome"}}}]},
    {"role": "user", "content": [{"toolResult": {"toolUseId": "$A", "content": [{"text": "sunny"}]}},
                                 {"toolResult": {"toolUseId": "$B", "content": [{"text": "rainy"}]}}]},
]}  # fmt: skip

APIS = {"chat": CHAT, "responses": RESPONSES, "anthropic": ANTHROPIC, "bedrock": BEDROCK,
        "gemini": gemini("functionCall", "functionResponse"), "gemini-snake": gemini("function_call", "function_response")}  # fmt: skip

MADE_UP = {
    "pydantic-ai": lambda: f"pyd_ai_{uuid.uuid4().hex}",
    "langchain uuid": lambda: str(uuid.uuid4()),
    "langchain lc_": lambda: f"lc_{uuid.uuid4()}",
    "llm-gemini": lambda: f"call_{uuid.uuid4().hex}",
    "llm": lambda: "tc_" + "".join(random.choice("0123456789abcdefghjkmnpqrstvwxyz") for _ in range(26)),
}


def filled(template: object, **values: str) -> object:
    text = json.dumps(template)
    for name, value in values.items():
        text = text.replace(f'"${name}"', json.dumps(value))
    return json.loads(text)


def fresh(template: object, make=MADE_UP["pydantic-ai"]) -> object:
    return filled(template, A=make(), B=make())


@pytest.mark.parametrize("make", MADE_UP.values(), ids=MADE_UP.keys())
@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
def test_made_up_tool_call_ids_in_every_api_s_id_fields_key_alike_across_runs(api, make):
    assert key(fresh(api, make)) == key(fresh(api, make))
    assert key(fresh(api, make), OFF) != key(fresh(api, make), OFF)


@pytest.mark.parametrize("api", APIS.values(), ids=APIS.keys())
def test_a_result_answering_another_call_still_misses(api):
    a, b = MADE_UP["pydantic-ai"](), MADE_UP["pydantic-ai"]()
    assert key(filled(api, A=a, B=b)) != key(filled(api, A=a, B=a))  # both calls answered by the first one's id
    crossed = json.loads(json.dumps(filled(api, A=a, B=b)).replace(a, "@").replace(b, a).replace("@", b))
    assert key(crossed) == key(filled(api, A=a, B=b))  # renaming both everywhere is the same conversation
    text = json.dumps(filled(api, A=a, B=b))
    cut = text.rindex(b)  # the second call's result: it comes after the call
    never_made = json.loads(text[:cut] + MADE_UP["pydantic-ai"]() + text[cut + len(b) :])
    assert key(never_made) != key(filled(api, A=a, B=b))  # a result answering a call never made


# Look-alikes: the same made-up shape where the user, a tool or an API put it. Each must still count.
LOOKALIKES = {
    "Gemini tool argument": {"contents": [{"role": "model", "parts": [
        {"functionCall": {"id": "x", "name": "order", "args": {"id": "$A"}}}]}]},
    "Gemini tool result": {"contents": [{"role": "user", "parts": [
        {"functionResponse": {"id": "x", "name": "order", "response": {"id": "$A"}}}]}]},
    "Anthropic tool input": {"messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "x", "name": "order", "input": {"id": "$A"}}]}]},
    "Anthropic tool result": {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "x", "content": [{"type": "text", "text": "$A"}]}]}]},
    "Bedrock tool input": {"messages": [{"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "x", "name": "order", "input": {"toolUseId": "$A"}}}]}]},
    "Bedrock tool result": {"messages": [{"role": "user", "content": [
        {"toolResult": {"toolUseId": "x", "content": [{"json": {"id": "$A"}}]}}]}]},
    "Anthropic block of another type": {"messages": [{"role": "user", "content": [
        {"type": "document", "id": "$A", "source": {"type": "text", "data": "d"}}]}]},
    "chat tool arguments": {"messages": [{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "order", "arguments": {"id": "$A"}}}]}]},
    "chat tool result": {"messages": [{"role": "tool", "tool_call_id": "x", "content": "$A"}]},
    "Responses call arguments": {"input": [{"type": "function_call", "call_id": "x", "name": "o", "arguments": "$A"}]},
    "Responses item of another type": {"input": [{"type": "web_search_call", "call_id": "$A"}]},
    "user metadata": {"metadata": {"id": "$A", "call_id": "$A", "tool_call_id": "$A"}},
    "a nested id anywhere": {"messages": [{"role": "user", "content": "hi"}], "extra": {"data": {"id": "$A"}}},
    "schema": {"tools": [{"type": "function", "function": {"name": "o", "parameters": {
        "type": "object", "properties": {"id": {"type": "string", "default": "$A"}}}}}]},
    "prompt text": {"messages": [{"role": "user", "content": "$A"}]},
    "a message's own id": {"messages": [{"role": "user", "content": "hi", "id": "$A"}]},
    "prompt_cache_key below the top": {"metadata": {"prompt_cache_key": "$A"}},
}  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [*MADE_UP.values(), lambda: f"agents-sdk:run:{uuid.uuid4().hex}"],
    ids=[*MADE_UP.keys(), "openai-agents"],
)
@pytest.mark.parametrize("body", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_a_made_up_shape_outside_the_framework_s_places_still_counts(body, make):
    assert key(fresh(body, make)) != key(fresh(body, make))


def test_the_run_cache_key_counts_only_at_the_top():
    assert key({"prompt_cache_key": run_key()}) == key({"prompt_cache_key": run_key()})
    assert key({"input": [{"prompt_cache_key": run_key()}]}) != key({"input": [{"prompt_cache_key": run_key()}]})


def test_an_api_s_own_call_ids_still_count():
    # OpenAI's `call_` + 24 letters and digits, Anthropic's `toolu_…`: not what llm-gemini makes up
    def openai_id() -> str:
        return "call_" + "".join(
            random.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") for _ in range(24)
        )

    assert key(fresh(CHAT, openai_id)) != key(fresh(CHAT, openai_id))
    assert key(fresh(ANTHROPIC, lambda: f"toolu_{uuid.uuid4().hex[:24]}")) != key(
        fresh(ANTHROPIC, lambda: f"toolu_{uuid.uuid4().hex[:24]}")
    )


def test_a_prefix_inside_a_longer_id_still_counts():
    # pyd_ai_ as part of a longer value is not what pydantic-ai makes: a whole value only
    assert key(fresh(CHAT, lambda: f"pyd_ai_{uuid.uuid4().hex}_retry")) != key(
        fresh(CHAT, lambda: f"pyd_ai_{uuid.uuid4().hex}_retry")
    )


def test_what_a_preset_replaced_is_named_by_path_and_preset():
    a, b = f"pyd_ai_{uuid.uuid4().hex}", str(uuid.uuid4())
    replaced: list[Replaced] = []
    with_placeholders(filled(APIS["gemini"], A=a, B=b), ON.patterns, None, replaced)
    assert [r.to_json() for r in replaced] == [
        {"path": "contents[1].parts[0].functionCall.id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#1"},
        {"path": "contents[1].parts[1].functionCall.id", "preset": "langchain", "placeholder": "…#2"},
        {"path": "contents[2].parts[0].functionResponse.id", "preset": "pydantic-ai", "placeholder": "pyd_ai_…#1"},
        {"path": "contents[2].parts[1].functionResponse.id", "preset": "langchain", "placeholder": "…#2"},
    ]


def test_an_escaped_spelling_keys_like_the_plain_one():
    """The raw-body shortcut (volatile.could_match) must not skip a value spelled with \\u escapes."""
    call_id = f"pyd_ai_{uuid.uuid4().hex}"
    plain = json.dumps(gemini_tool_turn(call_id)).encode()
    escaped = plain.replace(b"pyd_ai_", b"pyd\\u005fai_")
    other = json.dumps(gemini_tool_turn(f"pyd_ai_{uuid.uuid4().hex}")).encode()

    def facts(body: bytes) -> RequestFacts:
        return RequestFacts("POST", "https", "api.openai.com", 443, "/v1/x", [], {}, body, "application/json")

    keys = {
        request_key(facts(body), (), (), ON.patterns)
        for body in (plain, escaped, other, plain.decode().encode("utf-16"))
    }
    assert len(keys) == 1


def test_only_one_preset_can_be_chosen_and_unknown_names_are_refused():
    assert key(tool_example(str(uuid.uuid4())), make_recipe(frameworks=["langchain"])) == key(
        tool_example(str(uuid.uuid4())), make_recipe(frameworks=["langchain"])
    )
    assert parse_frameworks(["", " "]) == ()
    with pytest.raises(ValueError, match="'crewai' is not a framework preset; choose from"):
        parse_frameworks(["crewai"])


def test_cassettes_name_their_presets_and_older_ones_had_none():
    assert ON.to_json()["frameworks"] == ["langchain", "llm", "openai-agents", "pydantic-ai"]
    older = {"keyed_with": {"recipe": 2, "ignore": [], "key_headers": [], "ignore_values": []}}
    assert recipe_of(older).frameworks == ()


@pytest.mark.parametrize(
    ("body", "noted"),
    [({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, False), (tool_example("x"), False),
     (tool_example(str(uuid.uuid4())), True)],
)  # fmt: skip
def test_a_miss_names_the_presets_only_when_they_key_the_recording_otherwise(body, noted):
    request = {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {},
               "body_format": "json", "body": body}  # fmt: skip
    note = ON.framework_difference(recipe_of({"keyed_with": {"recipe": 2}}), request)
    assert (
        note == "recorded with different framework presets: [] → ['langchain', 'llm', 'openai-agents', 'pydantic-ai']"
    ) is noted
    assert note is None or noted
