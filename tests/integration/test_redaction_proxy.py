"""Redaction at write time, through real mitmdump and the real openai SDK: the disk gets the redacted copy,
the client the real answer, and the key the real request."""

from __future__ import annotations

import json

import openai
import pytest
from cassette_proxy.core.files.location import cassette_files
from harness import FAKE_OPENAI_KEY

EMAIL, PHONE = "jane.doe@example.com", "+1 (555) 123-4567"
PROMPT = f"Contact {EMAIL} or {PHONE}; the key is {FAKE_OPENAI_KEY}"


def ask(prompt: str = PROMPT) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0)
    completion = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    return completion.choices[0].message.content


def test_recorded_prompt_is_redacted_on_disk_and_still_replays(upstream, start_proxy, client_env, cassette_dir):
    recorder = start_proxy(upstream, cassette_mode="record", cassette_redact=["pii"])
    client_env(recorder)
    assert ask() == f"echo: {PROMPT}"  # the client got the real upstream answer
    assert recorder.stop()["recorded"] == 1

    [path] = cassette_files(cassette_dir)
    text = path.read_text()
    for secret in (EMAIL, "555", FAKE_OPENAI_KEY, "sk-fake"):
        assert secret not in text
    stored = json.loads(text)
    redacted = "Contact [REDACTED:email] or [REDACTED:phone]; the key is [REDACTED:openai-key]"
    assert stored["request"]["body"]["messages"][0]["content"] == redacted
    assert stored["response"]["body"]["choices"][0]["message"]["content"] == f"echo: {redacted}"

    player = start_proxy(upstream, cassette_mode="replay", cassette_redact=["pii"])
    client_env(player)
    served = upstream.count
    assert ask() == f"echo: {redacted}"  # a hit: the key was computed from the real prompt
    report = player.stop()
    assert (report["hits"], report["misses"], upstream.count) == (1, [], served)


def test_miss_next_to_a_redacted_recording_shows_the_real_change_and_no_secret(https_upstream, start_proxy, client_env):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    ask()
    client_env(start_proxy(https_upstream, cassette_mode="replay"))
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.ConflictError) as miss:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": PROMPT}])
    message = miss.value.body["message"]
    assert 'differs in: model: "gpt-4o-mini" → "gpt-4o"' in message
    assert "messages" not in message and FAKE_OPENAI_KEY not in json.dumps(miss.value.body)


def test_several_rules_and_a_custom_rule_scoped_to_its_target(https_upstream, start_proxy, client_env, cassette_dir):
    rule = "/request.body.messages.*.content/order-[0-9]+/[REDACTED:order]"
    client_env(start_proxy(https_upstream, cassette_mode="record", cassette_redact=["email", rule]))
    assert ask(f"where is order-4711 for {EMAIL}?") == f"echo: where is order-4711 for {EMAIL}?"
    [path] = cassette_files(cassette_dir)
    stored = json.loads(path.read_text())
    assert stored["request"]["body"]["messages"][0]["content"] == "where is [REDACTED:order] for [REDACTED:email]?"
    answer = stored["response"]["body"]["choices"][0]["message"]["content"]
    assert answer == "echo: where is order-4711 for [REDACTED:email]?"  # the order rule targets the request only
