"""Deterministic client errors are recorded and replayed as the API sent them (`cassette_record_statuses`).

Real mitmdump, the real openai SDK; the fake upstream answers the status in `x-fake-status`, a header the key
does not read, so the replay sends the same request without it.
"""

from __future__ import annotations

import json

import openai
import pytest
from cassette_proxy.core.files.location import cassette_files
from harness import FAKE_OPENAI_KEY


def ask(status: int | None = None) -> str:
    headers = {"x-fake-status": str(status)} if status else {}
    client = openai.OpenAI(api_key=FAKE_OPENAI_KEY, max_retries=0, default_headers=headers)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "too long"}])
    return answer.choices[0].message.content


def test_a_recorded_400_replays_to_the_sdk_as_its_own_bad_request_error(
    upstream, start_proxy, client_env, cassette_dir
):
    recorder = start_proxy(upstream, cassette_mode="record")
    client_env(recorder)
    with pytest.raises(openai.BadRequestError) as live:
        ask(400)
    report = recorder.stop()
    [path] = cassette_files(cassette_dir)
    cassette = json.loads(path.read_text())
    assert cassette["response"]["status"] == 400
    assert report["counts"]["recorded"] == 1 and report["client_errors"] == {"hits": 0, "recorded": 1}
    upstream.stop()

    player = start_proxy(cassette_mode="replay")
    client_env(player)
    with pytest.raises(openai.BadRequestError) as replayed:
        ask()
    assert replayed.value.status_code == 400
    assert (
        replayed.value.body
        == live.value.body
        == {"message": "fake upstream error 400", "type": "fake_error", "code": 400}
    )
    assert replayed.value.message == live.value.message
    report = player.stop()
    assert report["counts"]["hits"] == 1 and report["client_errors"] == {"hits": 1, "recorded": 0}


@pytest.mark.parametrize("status", [401, 403, 408, 409, 429, 500, 503])
def test_statuses_that_depend_on_credentials_load_or_time_are_never_saved_by_default(
    https_upstream, start_proxy, client_env, cassette_dir, status
):
    client_env(start_proxy(https_upstream, cassette_mode="record"))
    with pytest.raises(openai.APIStatusError) as raised:
        ask(status)
    assert raised.value.status_code == status
    assert cassette_files(cassette_dir) == []


def test_record_statuses_can_be_narrowed_to_successes(https_upstream, start_proxy, client_env, cassette_dir):
    proxy = start_proxy(https_upstream, cassette_mode="record", cassette_record_statuses=["2xx"])
    client_env(proxy)
    with pytest.raises(openai.NotFoundError):
        ask(404)
    assert cassette_files(cassette_dir) == []
    assert ask() == "echo: too long"
    assert len(cassette_files(cassette_dir)) == 1
    assert "not in cassette_record_statuses" in proxy.log_text()
