"""A broken cassette file, in-process: 500 `cassette_invalid` naming the file and the problem, never a silent miss
inviting a re-record over it, in replay and in record mode; other requests keep hitting. Hostile files (header
injection, bad statuses, symlinks out, fifos, oversized) through a real mitmdump:
tests/integration/test_bad_input.py::test_hostile_cassettes_answer_500_cassette_invalid_and_nothing_is_forwarded."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
from in_process import chat_flow

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures


def ask(text: str) -> dict:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]}


def answer(text: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": f"echo: {text}"}}]}


def not_json(text: str) -> bytes:
    return text[: len(text) // 2].encode()


def wrong_version(text: str) -> bytes:
    return json.dumps({**json.loads(text), "cassette_format": 99}).encode()


def missing_response(text: str) -> bytes:
    return json.dumps({k: v for k, v in json.loads(text).items() if k != "response"}).encode()


def not_utf8(text: str) -> bytes:
    return text.replace("echo: broken", "echo: br\udcffoken").encode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (not_json, "invalid JSON"),
        (wrong_version, "cassette_format is 99"),
        (missing_response, "missing or invalid field 'response'"),
        (not_utf8, "not UTF-8"),
    ],
)
@pytest.mark.parametrize("mode", ["replay", "record"])
def test_broken_cassette_answers_500_naming_file_and_problem_and_others_still_hit(
    proxies, upstream, caplog, mode, damage: Callable[[str], bytes], problem: str
):
    broken = proxies.record(upstream, ask("broken"), answer("broken"))
    proxies.record(upstream, ask("intact"), answer("intact"))
    broken.write_bytes(damage(broken.read_text()))
    damaged = broken.read_bytes()
    connections = upstream.connections()

    caplog.set_level(logging.ERROR)
    proxy = proxies.start(cassette_mode=mode, cassette_hosts=["127.0.0.1"])
    flow = proxy.request(chat_flow(ask("broken"), upstream.url()))
    assert flow.response.status_code == 500
    assert flow.response.headers["x-should-retry"] == "false"
    error = json.loads(flow.response.content)["error"]
    assert error["type"] == "cassette_invalid"
    assert error["cassette"] == str(broken)
    assert problem in error["message"] and str(broken) in error["message"]
    intact = proxy.request(chat_flow(ask("intact"), upstream.url()))
    assert json.loads(intact.response.content)["choices"][0]["message"]["content"] == "echo: intact"
    report = proxy.done()
    assert report["counts"]["hits"] == 1
    assert report["counts"]["errors"] == 1
    assert broken.read_bytes() == damaged  # never re-recorded over, even in record mode
    assert upstream.connections() == connections  # nothing forwarded
    assert problem in caplog.text  # the proxy log says it too
