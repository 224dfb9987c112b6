"""Fail closed, in a real mitmdump: a bug of ours is an error the user sees, never a request that leaves."""

from __future__ import annotations

import httpx
import openai
import pytest
from harness import FAKE_OPENAI_KEY, SUPPORT

BREAK = SUPPORT / "break_cassette.py"


@pytest.mark.parametrize("mode", ["replay", "record"])
def test_a_request_the_addon_cannot_key_is_answered_500_not_forwarded(start_proxy, http_upstream, client_env, mode):
    proxy = start_proxy(http_upstream, cassette_mode=mode, scripts=[BREAK], break_cassette="key")
    client_env(proxy)
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=2)
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == 500
    assert raised.value.body["type"] == "cassette_error"  # the SDK shows it; x-should-retry: false stopped retries
    assert http_upstream.count == 0
    report = proxy.stop()
    assert report["counts"]["errors"] == 1 and report["counts"]["upstream"] == 0
    assert report["errors"][0]["type"] == "cassette_error"
    assert "planted bug" in proxy.log_text() and "Traceback" in proxy.log_text()


def test_a_request_the_addon_forgot_is_stopped_by_the_seal(start_proxy, http_upstream):
    """The request hook does nothing: mitmproxy would forward. The seal refuses the upstream connection."""
    proxy = start_proxy(cassette_hosts=["127.0.0.1"], scripts=[BREAK], break_cassette="forget")
    with httpx.Client(proxy=proxy.url) as client:
        answer = client.post(f"{http_upstream.url}/v1/chat/completions", json={"model": "m"})
    assert answer.status_code == 502  # mitmproxy's answer to a refused connection
    assert http_upstream.count == 0
    assert "refused an upstream connection to 127.0.0.1" in proxy.log_text()
