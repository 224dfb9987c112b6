"""Record and replay through a real mitmdump, with the real SDKs, against our fake upstream."""

import json
import ssl

import anthropic
import httpx
import openai
import pytest
from harness import FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY

CHAT = "https://api.openai.com/v1/chat/completions"


def ask_openai(prompt: str, **kwargs) -> str:
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, **kwargs)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}])
    return answer.choices[0].message.content


def ask_anthropic(prompt: str, **kwargs) -> str:
    client = anthropic.Anthropic(api_key=FAKE_ANTHROPIC_KEY, **kwargs)
    answer = client.messages.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": prompt}]
    )
    return answer.content[0].text


def files_under(folder):
    return sorted(p for p in folder.rglob("*") if p.is_file())


def proxied_httpx(proxy) -> httpx.Client:
    return httpx.Client(
        proxy=proxy.url, verify=ssl.create_default_context(cafile=proxy.ca_bundle), trust_env=False, timeout=10
    )


def test_openai_record_then_replay_with_the_upstream_stopped(upstream, start_proxy, client_env, cassette_dir):
    client_env(start_proxy(upstream, cassette_mode="record"))
    recorded = ask_openai("Say hello to the team")
    assert recorded == "echo: Say hello to the team"
    assert upstream.count == 1
    upstream.stop()

    proxy = start_proxy(cassette_mode="replay")
    client_env(proxy)
    assert ask_openai("Say hello to the team") == recorded
    assert proxy.stop()["counts"] == {
        "hits": 1, "misses": 0, "recorded": 0, "overwritten": 0, "upstream": 0, "passthrough": 0, "token_exchanges": 0, "telemetry": 0, "browser_background": 0, "offline": 0, "errors": 0,
    }  # fmt: skip


def test_anthropic_record_then_replay_with_the_upstream_stopped(upstream, start_proxy, client_env):
    client_env(start_proxy(upstream, cassette_mode="record"))
    recorded = ask_anthropic("Name three colours")
    assert recorded == "echo: Name three colours"
    upstream.stop()

    client_env(start_proxy(cassette_mode="replay"))
    assert ask_anthropic("Name three colours") == recorded


def test_reverse_mode_replays_what_the_forward_proxy_recorded(https_upstream, start_proxy, client_env, monkeypatch):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    recorded = ask_openai("Same key either way")
    https_upstream.stop()
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name)  # the base-URL route: the client talks to the proxy directly

    proxy = start_proxy(modes=["reverse:https://api.openai.com"])
    base_url = f"http://127.0.0.1:{proxy.port('reverse:https://api.openai.com')}/v1"
    assert ask_openai("Same key either way", base_url=base_url) == recorded
    assert proxy.stop()["counts"]["hits"] == 1


def test_reverse_mode_records_without_any_ca(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, modes=["reverse:https://api.anthropic.com"], cassette_mode="record")
    base_url = f"http://127.0.0.1:{proxy.port('reverse:https://api.anthropic.com')}"
    assert ask_anthropic("No CA needed", base_url=base_url) == "echo: No CA needed"
    assert [p.parent.relative_to(cassette_dir).as_posix() for p in files_under(cassette_dir)] == [
        "api.anthropic.com/v1/messages"
    ]


def test_a_one_word_prompt_change_raises_409_at_once_naming_the_key(https_upstream, start_proxy, client_env):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    ask_openai("Summarise the quarterly report")
    proxy = start_proxy(https_upstream, cassette_mode="replay")
    client_env(proxy)

    with pytest.raises(openai.ConflictError) as raised:
        ask_openai("Summarise the annual report")

    error = raised.value.body
    assert error["type"] == "cassette_miss"
    assert error["key"] in str(raised.value)
    assert "quarterly" in str(raised.value) and "annual" in str(raised.value)  # the field-level diff
    assert raised.value.response.headers["x-should-retry"] == "false"
    report = proxy.stop()
    assert len(report["misses"]) == 1, "the SDK retried the 409: the proxy saw it more than once"  # at once: no retry
    assert https_upstream.count == 1  # the miss never reached the network


def test_the_409_body_is_structured_for_every_sdk(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"model": "m", "messages": [{"role": "user", "content": "one"}], "temperature": 0})
    proxy = start_proxy(https_upstream, cassette_mode="replay")
    with proxied_httpx(proxy) as client:
        response = client.post(CHAT, json={"model": "m", "messages": [{"role": "user", "content": "two"}]})

    assert response.status_code == 409
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-should-retry"] == "false"
    body = response.json()
    assert body["type"] == "error"
    error = body["error"]
    assert {error["type"], error["code"]} == {"cassette_miss"}
    assert error["method"] == "POST" and error["url"] == CHAT and error["mode"] == "replay"
    assert error["cassette"] == f"api.openai.com/v1/chat/completions/{error['key']}.json"
    assert not (cassette_dir / error["cassette"]).exists()
    [closest] = error["closest"]
    assert (cassette_dir / closest["cassette"]).exists()
    assert closest["differences"] == [
        'messages[0].content: "one" → "two"',
        "temperature: removed (was 0)",
    ]


def test_an_offline_proxy_answers_misses_without_connecting(start_proxy):
    """No upstream at all and no DNS: with mitmproxy's default eager connections this CONNECT would fail."""
    proxy = start_proxy(cassette_mode="replay")
    with proxied_httpx(proxy) as client:
        response = client.post(CHAT, json={"model": "m"})
    assert response.status_code == 409
    assert proxy.stop()["counts"]["misses"] == 1


def test_reordered_json_keys_hit(https_upstream, start_proxy):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    with proxied_httpx(proxy) as client:
        first = client.post(CHAT, content=b'{"model": "m", "temperature": 0.2, "messages": [{"role": "user", "content": "hi"}]}',
                            headers={"content-type": "application/json"})  # fmt: skip
    https_upstream.stop()
    proxy = start_proxy(cassette_mode="replay")
    with proxied_httpx(proxy) as client:
        again = client.post(CHAT, content=b'{"messages":[{"content":"hi","role":"user"}],"temperature":0.2,"model":"m"}',
                            headers={"content-type": "application/json"})  # fmt: skip
    assert again.status_code == 200
    assert again.json() == first.json()


def test_no_secret_reaches_the_cassette_folder_or_report_or_log(https_upstream, start_proxy, client_env, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    client_env(proxy)
    ask_openai("Keep my key", organization="org-fake-DO-NOT-STORE", project="proj_fake-DO-NOT-STORE")
    ask_anthropic("Keep my key too")
    with proxied_httpx(proxy) as client:
        gemini = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
        client.post(f"{gemini}?key=AIza-fake-DO-NOT-STORE-query", json={"contents": []},
                    headers={"x-goog-api-key": "AIza-fake-DO-NOT-STORE-header", "cookie": "sid=fake-DO-NOT-STORE"})  # fmt: skip
    proxy.stop()

    written = files_under(cassette_dir)
    assert len(written) == 3
    for path in [*written, proxy.report_path, proxy.log]:
        text = path.read_text()
        for secret in (FAKE_OPENAI_KEY, FAKE_ANTHROPIC_KEY, "DO-NOT-STORE", "fake-cookie-value"):
            assert secret not in text, f"{secret} leaked into {path}"
    [gemini_cassette] = [p for p in written if "generativelanguage.googleapis.com" in p.parts]
    assert json.loads(gemini_cassette.read_text())["request"]["url"] == gemini  # the ?key= is gone


def test_the_report_counts_exactly_what_happened(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record", cassette_hosts=["api.openai.com"])
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"n": 1})  # recorded
        client.post(CHAT, json={"n": 1})  # hit
        client.post(CHAT, json={"n": 2})  # recorded
        client.post(CHAT, json={"n": 3}, headers={"x-fake-status": "500"})  # upstream, not saved
        client.post("https://api.anthropic.com/v1/messages", json={})  # out of scope: passthrough
    report = proxy.stop()
    assert report["counts"] == {
        "hits": 1, "misses": 0, "recorded": 2, "overwritten": 0, "upstream": 3, "passthrough": 1, "token_exchanges": 0, "telemetry": 0, "browser_background": 0, "offline": 0, "errors": 1,
    }  # fmt: skip
    [not_saved] = report["errors"]  # the 500: the next replay of it will miss, and the report says so now
    assert (not_saved["type"], not_saved["reason"], not_saved["status"]) == ("not_recorded", "status 500", 500)
    assert report["passthrough_hosts"] == {"api.anthropic.com": 1}
    assert sorted(report["cassettes_used"]) == sorted(
        p.relative_to(cassette_dir).as_posix() for p in files_under(cassette_dir)
    )

    proxy = start_proxy(cassette_mode="replay")
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"n": 1})
        client.post(CHAT, json={"n": 4})
    report = proxy.stop()
    assert report["counts"]["hits"] == 1
    assert [(m["method"], m["url"]) for m in report["misses"]] == [("POST", CHAT)]
    assert "cassette miss: POST https://api.openai.com/v1/chat/completions" in proxy.log_text()


@pytest.mark.parametrize("status", [429, 500])
def test_upstream_errors_reach_the_client_unchanged_and_are_not_saved(status, https_upstream, start_proxy, client_env, cassette_dir):  # fmt: skip
    proxy = start_proxy(https_upstream, cassette_mode="record")
    client_env(proxy)
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], extra_headers={"x-fake-status": str(status)}
        )
    assert raised.value.status_code == status
    assert raised.value.body["message"] == f"fake upstream error {status}"
    if status == 429:
        assert raised.value.response.headers["retry-after"] == "7"
    assert files_under(cassette_dir) == []
    assert proxy.stop()["counts"]["recorded"] == 0


def test_update_mode_goes_upstream_and_overwrites(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record")
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"n": 1})
    [path] = files_under(cassette_dir)
    first = json.loads(path.read_text())["response"]["headers"]["x-fake-count"]

    proxy = start_proxy(https_upstream, cassette_mode="update")
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"n": 1})
    assert files_under(cassette_dir) == [path]
    assert (first, json.loads(path.read_text())["response"]["headers"]["x-fake-count"]) == ("1", "2")
    counts = proxy.stop()["counts"]
    assert (counts["overwritten"], counts["recorded"], counts["upstream"], counts["hits"]) == (1, 0, 1, 0)


def test_off_mode_passes_everything_through_and_writes_nothing(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="off")
    with proxied_httpx(proxy) as client:
        assert client.post(CHAT, json={"n": 1}).status_code == 200
        assert client.post(CHAT, json={"n": 1}).headers["x-fake-count"] == "2"
    assert not cassette_dir.exists()
    assert proxy.stop()["counts"]["passthrough"] == 2


def test_allowed_hosts_outside_scope_pass_through_in_replay_mode(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_hosts=["*.anthropic.com"], cassette_allow_hosts=["api.openai.com"])
    with proxied_httpx(proxy) as client:
        assert client.post(CHAT, json={"n": 1}).status_code == 200  # not ours, and allowed: reaches the upstream
        assert client.post("https://api.anthropic.com/v1/messages", json={}).status_code == 409
    assert https_upstream.count == 1
    report = proxy.stop()
    assert report["counts"] == {
        "hits": 0, "misses": 1, "recorded": 0, "overwritten": 0, "upstream": 0, "passthrough": 1, "token_exchanges": 0, "telemetry": 0, "browser_background": 0, "offline": 0, "errors": 0,
    }  # fmt: skip
    assert report["passthrough_hosts"] == {"api.openai.com": 1}


def test_other_hosts_are_refused_as_offline_in_replay_mode(https_upstream, start_proxy, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_hosts=["*.anthropic.com"])
    with proxied_httpx(proxy) as client:
        refused = client.post(CHAT, json={"n": 1})
    assert refused.status_code == 403 and refused.headers["x-should-retry"] == "false"
    assert refused.json()["error"]["type"] == "cassette_offline"
    assert "cassette_allow_hosts" in refused.json()["error"]["message"]
    assert https_upstream.count == 0
    report = proxy.stop()
    assert report["counts"]["offline"] == 1 and report["counts"]["passthrough"] == 0
    assert report["offline"] == [{"host": "api.openai.com", "method": "POST", "url": CHAT}]


def test_ignored_fields_are_left_out_of_the_key(https_upstream, start_proxy):
    proxy = start_proxy(https_upstream, cassette_mode="record", cassette_ignore=["metadata.trace_id"])
    with proxied_httpx(proxy) as client:
        client.post(CHAT, json={"model": "m", "metadata": {"trace_id": "run-1"}})
    https_upstream.stop()
    proxy = start_proxy(cassette_ignore=["metadata.trace_id"])
    with proxied_httpx(proxy) as client:
        assert client.post(CHAT, json={"model": "m", "metadata": {"trace_id": "run-2"}}).status_code == 200
        assert client.post(CHAT, json={"model": "m2", "metadata": {"trace_id": "run-2"}}).status_code == 409


def test_an_anthropic_miss_raises_at_once_with_the_cassette_error(start_proxy, client_env):
    proxy = start_proxy(cassette_mode="replay")
    client_env(proxy)
    with pytest.raises(anthropic.ConflictError) as raised:
        ask_anthropic("Never recorded")
    assert proxy.stop()["counts"]["misses"] == 1, "the SDK retried the 409"
    assert raised.value.body["error"]["type"] == "cassette_miss"
    assert raised.value.body["error"]["key"] in str(raised.value)
