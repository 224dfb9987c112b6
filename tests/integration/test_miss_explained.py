"""A miss names every cause in what the SDK shows (`error.message`) and in the structured 409 body.

Real mitmdump, the real openai and anthropic SDKs, the fake upstream: record one way, replay another.
"""

from __future__ import annotations

import anthropic
import openai
import pytest
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY


def chat(messages: list[dict], base_url: str | None = None, **extra) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, base_url=base_url)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=messages, **extra)
    return answer.choices[0].message.content


def conversation(ids: tuple[str, str, str], last: str) -> list[dict]:
    return [
        {"role": "user", "content": "Plan a trip", "id": ids[0]},
        {"role": "assistant", "content": "Where to?", "id": ids[1]},
        {"role": "user", "content": last, "id": ids[2]},
    ]


def miss_of(call) -> tuple[str, dict]:
    with pytest.raises(openai.ConflictError) as raised:
        call()
    return raised.value.message, raised.value.body


def test_a_changed_anthropic_version_is_named_in_the_sdk_message(https_upstream, start_proxy, client_env):
    def ask(**headers) -> str:
        client = anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY, max_retries=0, default_headers=headers)
        reply = client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
        return reply.content[0].text

    client_env(start_proxy(https_upstream, cassette_mode="record"))
    ask(**{"anthropic-version": "2023-06-01"})
    client_env(start_proxy(cassette_mode="replay"))
    with pytest.raises(anthropic.ConflictError) as raised:
        ask(**{"anthropic-version": "2024-10-22"})
    assert 'header anthropic-version: "2023-06-01" → "2024-10-22"' in str(raised.value)
    [closest] = raised.value.body["error"]["closest"]
    assert closest["differences"] == ['header anthropic-version: "2023-06-01" → "2024-10-22"']


def test_a_changed_azure_api_version_is_named_in_the_sdk_message(https_upstream, start_proxy, client_env):
    def ask(api_version: str) -> str:
        client = openai.AzureOpenAI(
            api_key=FAKE_OPENAI_KEY, api_version=api_version, azure_endpoint="https://fake.openai.azure.com",
            azure_deployment="gpt-4o", max_retries=0,
        )  # fmt: skip
        reply = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        return reply.choices[0].message.content

    client_env(start_proxy(https_upstream, cassette_mode="record"))
    assert ask("2024-02-01") == "echo: hi"
    client_env(start_proxy(cassette_mode="replay"))
    message, body = miss_of(lambda: ask("2024-06-01"))
    assert 'query api-version: "2024-02-01" → "2024-06-01"' in message
    assert body["closest"][0]["differences"] == ['query api-version: "2024-02-01" → "2024-06-01"']


def test_ignored_fields_are_never_listed_and_the_real_change_is(https_upstream, start_proxy, client_env):
    ignore = {"cassette_ignore": ["messages.*.id"]}
    client_env(start_proxy(https_upstream, cassette_mode="record", **ignore))
    chat(conversation(("a1", "a2", "a3"), "Somewhere warm"))
    client_env(start_proxy(cassette_mode="replay", **ignore))
    assert chat(conversation(("b1", "b2", "b3"), "Somewhere warm")) == "echo: Somewhere warm"  # ids ignored: a hit

    message, body = miss_of(lambda: chat(conversation(("c1", "c2", "c3"), "Somewhere cold")))
    assert 'messages[2].content: "Somewhere warm" → "Somewhere cold"' in message
    assert ".id:" not in message and '"c1"' not in message
    assert body["closest"][0]["differences"] == ['messages[2].content: "Somewhere warm" → "Somewhere cold"']
    assert "settings" not in body["closest"][0]


def test_a_different_ignore_set_is_named_with_the_way_out(https_upstream, start_proxy, client_env):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    chat([{"role": "user", "content": "hi"}], metadata={"trace": "t-1"}, store=True)
    client_env(start_proxy(cassette_mode="replay", cassette_ignore=["metadata"]))

    message, body = miss_of(lambda: chat([{"role": "user", "content": "hi"}], metadata={"trace": "t-1"}, store=True))
    assert "recorded with a different ignore set: [] → ['metadata']" in message
    assert "cassette rekey" in message
    closest = body["closest"][0]
    assert closest["differences"] == []
    assert closest["settings"][0] == "recorded with a different ignore set: [] → ['metadata']"
    assert len(message) < 600, "a miss must stay readable in a CI log"


def test_a_changed_base_url_is_found_among_other_endpoints(https_upstream, start_proxy, client_env):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    chat([{"role": "user", "content": "route me"}])  # https://api.openai.com/v1/chat/completions
    client_env(start_proxy(cassette_mode="replay"))

    message, body = miss_of(
        lambda: chat([{"role": "user", "content": "route me"}], base_url="https://api.groq.com/openai/v1")
    )
    expected = "url: https://api.openai.com/v1/chat/completions → https://api.groq.com/openai/v1/chat/completions"
    assert expected in message
    assert "closest recording (another endpoint) api.openai.com/v1/chat/completions/" in message
    assert body["closest"][0]["endpoint"] == "other"
    assert body["closest"][0]["differences"] == [expected]


def test_equal_numbers_hit_across_spellings(https_upstream, start_proxy, client_env):
    """Python sends 1.0 and 100.0 where JavaScript sends 1 and 100: both replay one recording."""
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    chat([{"role": "user", "content": "n"}], temperature=1.0, max_tokens=100)
    https_upstream.stop()
    proxy = start_proxy(cassette_mode="replay")
    client_env(proxy)
    assert chat([{"role": "user", "content": "n"}], temperature=1, extra_body={"max_tokens": 1e2}) == "echo: n"
    message, _ = miss_of(lambda: chat([{"role": "user", "content": "n"}], temperature=0.5, max_tokens=100))
    assert "temperature: 1 → 0.5" in message
    assert proxy.stop()["counts"]["hits"] == 1


def test_anthropic_beta_flags_in_any_order_or_spelling_hit(https_upstream, start_proxy, client_env):
    """The SDK joins `betas` with commas; another client may order them differently or repeat the header."""

    def ask(**headers) -> str:
        client = anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY, max_retries=0, default_headers=headers)
        reply = client.messages.create(
            model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "beta"}]
        )
        return reply.content[0].text

    client_env(start_proxy(https_upstream, cassette_mode="record"))
    ask(**{"anthropic-beta": "files-api-2025-04-14,prompt-caching-2024-07-31"})
    https_upstream.stop()
    proxy = start_proxy(cassette_mode="replay")
    client_env(proxy)
    assert ask(**{"anthropic-beta": "prompt-caching-2024-07-31 ,files-api-2025-04-14"}) == "echo: beta"
    with pytest.raises(anthropic.ConflictError) as raised:
        ask(**{"anthropic-beta": "files-api-2025-04-14"})
    assert "header anthropic-beta:" in raised.value.message
    assert proxy.stop()["counts"]["hits"] == 1
