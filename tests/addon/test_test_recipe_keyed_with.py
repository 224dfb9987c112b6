"""In-process tests of what a cassette says it was keyed with (`keyed_with`) when a test keys with ignore paths of
its own (`"options": {"ignore": [...]}` in its start, proxy/control_channel.py): the cassette names the test's
settings, not the run's, so `cassette rekey` and a miss's explanation read the settings that made its key."""

from __future__ import annotations

import json

from cassette_proxy.core.keys.recipe import make_recipe, stored_key
from in_process import chat_flow, json_answer

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

TOKEN = "control-token-for-tests-0123456789"
ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}], "metadata": {"trace_id": "t-1"}}


def key_again(cassette: dict) -> str:
    """The key its stored request gets under the settings it says keyed it, as `cassette rekey` computes it."""
    settings = cassette["keyed_with"]
    recipe = make_recipe(*(settings[name] for name in ("ignore", "key_headers", "ignore_values", "frameworks")))
    return stored_key(cassette["request"], recipe)


def record_in_test(proxies, upstream, options: dict | None) -> dict:
    proxy = proxies.start(
        cassette_mode="record", cassette_hosts=["127.0.0.1"], cassette_control_token=TOKEN, cassette_ignore=["user"]
    )
    proxy.control(TOKEN, "/v1/test/start", {"test": "t.py::test_one", **({"options": options} if options else {})})
    proxy.answer(proxy.request(chat_flow(ASK, upstream.url())), json_answer({"answer": "hi"}))
    proxy.control(TOKEN, "/v1/test/end", {"test": "t.py::test_one"})
    assert proxy.done()["counts"]["recorded"] == 1
    [path] = list(proxies.cassette_dir.rglob("*.json"))
    return json.loads(path.read_text())


def test_a_recording_keyed_with_a_tests_own_ignore_names_it(proxies, upstream):
    cassette = record_in_test(proxies, upstream, {"ignore": ["metadata.trace_id"]})
    assert cassette["keyed_with"]["ignore"] == ["user", "metadata.trace_id"]
    assert key_again(cassette) == cassette["key"]


def test_a_test_without_options_records_the_runs_settings(proxies, upstream):
    cassette = record_in_test(proxies, upstream, None)
    assert cassette["keyed_with"]["ignore"] == ["user"]
    assert key_again(cassette) == cassette["key"]
