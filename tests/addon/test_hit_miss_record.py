"""The request's fate in each mode, in-process through the addon's hooks: a hit answered from disk, a miss's 409, a
recording written whole, an overwrite in update mode, passthrough in off mode and outside the scope, an offline
refusal, an upstream that cannot be reached. Through a real mitmdump and the real SDKs: test_record_replay.py."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from cassette_proxy.core.files.cassette_file import load
from cassette_proxy.proxy.state import ANSWERED_HERE, Outcome, state_of
from in_process import CHAT_PATH, LoopbackUpstream, chat_flow, files_under, json_answer

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures

SECRET = "sk-fake-openai-DO-NOT-STORE-0123456789abcdef"
ASK = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "one"}], "temperature": 0}
ANSWER = {"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": "echo: one"}}]}
COUNTS = [
    "hits",
    "misses",
    "recorded",
    "overwritten",
    "upstream",
    "passthrough",
    "token_exchanges",
    "telemetry",
    "browser_background",
]
NOTHING = dict.fromkeys([*COUNTS, "offline", "errors"], 0)


def test_record_saves_the_forwarded_answer_whole_in_its_cassette_and_returns_it(proxies, upstream, monkeypatch):
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(
        os, "replace", lambda src, dst: (renamed.append((Path(src), Path(dst))), real_replace(src, dst))
    )
    proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(chat_flow(ASK, upstream.url(), headers={"authorization": f"Bearer {SECRET}"}))
    assert flow.response is None  # let through: mitmproxy forwards it
    assert upstream.connections() == 1  # the addon's probe, before mitmproxy connects
    proxy.answer(flow, json_answer(ANSWER, **{"x-request-id": "req_1"}))
    assert flow.response.status_code == 200 and json.loads(flow.response.content) == ANSWER  # as the upstream sent it
    assert "x-cassette-error" not in flow.response.headers
    report = proxy.done()

    assert report["counts"] == {**NOTHING, "recorded": 1, "upstream": 1}
    [path] = files_under(proxy.cassette_dir)  # no temp file left beside it
    relative = path.relative_to(proxy.cassette_dir).as_posix()
    assert relative.startswith(f"127.0.0.1_{upstream.port}/v1/chat/completions/")
    assert report["cassettes_used"] == [relative]
    # Written whole or not at all: a temp file beside it, renamed over the name (core/files/atomic_write.py).
    [(temp, final)] = [(src, dst) for src, dst in renamed if dst.is_relative_to(proxy.cassette_dir)]
    assert final == path and temp.parent == path.parent and temp.name.startswith(f".{path.name}.")
    assert not temp.exists() and oct(path.stat().st_mode & 0o777) == "0o644"
    cassette = load(path, proxy.cassette_dir)
    assert path.stem == cassette["key"]
    assert cassette["request"]["method"] == "POST" and cassette["request"]["body"] == ASK
    assert (cassette["response"]["status"], cassette["response"]["body"]) == (200, ANSWER)
    assert cassette["response"]["headers"]["x-request-id"] == "req_1"
    assert SECRET not in path.read_text()


def test_a_recorded_request_is_answered_from_disk_and_never_reaches_the_upstream(proxies, upstream):
    path = proxies.record(upstream, ASK, ANSWER)
    connections = upstream.connections()
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    # The same JSON in another key order and spacing: the same request.
    reordered = b'{"temperature":0, "messages":[{"content":"one","role":"user"}],"model":"gpt-4o-mini"}'
    flow = proxy.request(chat_flow(reordered, upstream.url()))
    assert flow.response.status_code == 200 and json.loads(flow.response.content) == ANSWER
    assert flow.response.headers["content-type"] == "application/json"
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "hits": 1}
    assert report["cassettes_used"] == [path.relative_to(proxy.cassette_dir).as_posix()]
    assert upstream.connections() == connections


def test_a_miss_answers_409_naming_the_key_the_file_and_what_changed(proxies, upstream):
    recorded = proxies.record(upstream, ASK, ANSWER)
    connections = upstream.connections()
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(chat_flow({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "two"}]},
                                   upstream.url()))  # fmt: skip

    assert flow.response.status_code == 409
    assert flow.response.headers["content-type"] == "application/json"
    assert flow.response.headers["x-should-retry"] == "false"  # SDKs do not retry it
    body = json.loads(flow.response.content)
    assert body["type"] == "error"
    error = body["error"]
    assert error["type"] == error["code"] == "cassette_miss"
    assert (error["method"], error["url"], error["mode"]) == ("POST", upstream.url(), "replay")
    assert error["cassette"] == f"127.0.0.1_{upstream.port}{CHAT_PATH}/{error['key']}.json"
    assert not (proxy.cassette_dir / error["cassette"]).exists()
    [closest] = error["closest"]
    assert proxy.cassette_dir / closest["cassette"] == recorded
    assert closest["differences"] == ['messages[0].content: "one" → "two"', "temperature: removed (was 0)"]
    assert error["key"] in error["message"] and '"one" → "two"' in error["message"]
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "misses": 1}
    [miss] = report["misses"]
    assert (miss["key"], miss["url"], miss["cassette"]) == (error["key"], upstream.url(), error["cassette"])
    assert upstream.connections() == connections  # a miss never reaches the network


def test_record_mode_answers_what_it_has_from_disk_and_records_only_what_is_missing(proxies, upstream):
    first = proxies.record(upstream, ASK, ANSWER)
    connections = upstream.connections()
    proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    hit = proxy.request(chat_flow(ASK, upstream.url()))
    assert hit.response.status_code == 200 and json.loads(hit.response.content) == ANSWER
    assert upstream.connections() == connections  # answered here, upstream untouched
    new = proxy.request(chat_flow({**ASK, "temperature": 1}, upstream.url()))
    proxy.answer(new, json_answer({"n": 2}))
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "hits": 1, "recorded": 1, "upstream": 1}
    assert len(files_under(proxy.cassette_dir)) == 2 and first.exists()


@pytest.mark.parametrize("status", [429, 500])
def test_a_status_outside_cassette_record_statuses_reaches_the_client_unsaved(proxies, upstream, status):
    proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    flow = proxy.answer(proxy.request(chat_flow(ASK, upstream.url())), json_answer({"error": "busy"}, status))
    assert flow.response.status_code == status and json.loads(flow.response.content) == {"error": "busy"}
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "upstream": 1, "errors": 1}
    [not_saved] = report["errors"]  # the next replay of it will miss, and the report says so now
    assert (not_saved["type"], not_saved["reason"], not_saved["status"]) == ("not_recorded", f"status {status}", status)
    assert not proxy.cassette_dir.exists()


def test_update_mode_forwards_a_recorded_request_and_overwrites_its_cassette(proxies, upstream):
    path = proxies.record(upstream, ASK, {"n": 1})
    connections = upstream.connections()
    proxy = proxies.start(cassette_mode="update", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(chat_flow(ASK, upstream.url()))
    assert flow.response is None and upstream.connections() == connections + 1  # forwarded despite its cassette
    proxy.answer(flow, json_answer({"n": 2}))
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "overwritten": 1, "upstream": 1}
    assert files_under(proxy.cassette_dir) == [path]
    assert load(path, proxy.cassette_dir)["response"]["body"] == {"n": 2}


def test_off_mode_passes_everything_through_and_writes_nothing(proxies, upstream):
    proxy = proxies.start(cassette_mode="off", cassette_hosts=["127.0.0.1"])
    for _ in range(2):
        assert proxy.request(chat_flow(ASK, upstream.url())).response is None
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "passthrough": 2}
    assert report["passthrough_hosts"] == {"127.0.0.1": 2}
    assert upstream.connections() == 0  # no probe: nothing of ours between client and upstream
    assert not proxy.cassette_dir.exists()


def test_replay_lets_allowed_hosts_through_misses_controlled_ones_and_refuses_the_rest(proxies):
    proxy = proxies.start(
        cassette_mode="replay", cassette_hosts=["*.anthropic.com"], cassette_allow_hosts=["api.openai.com"]
    )
    allowed = proxy.request(chat_flow(ASK))
    controlled = proxy.request(chat_flow({}, "https://api.anthropic.com/v1/messages"))
    other = proxy.request(chat_flow(ASK, "https://api.cerebras.example/v1/chat/completions"))
    assert allowed.response is None  # not ours, and allowed: mitmproxy forwards it
    assert controlled.response.status_code == 409
    assert other.response.status_code == 403 and other.response.headers["x-should-retry"] == "false"
    error = json.loads(other.response.content)["error"]
    assert error["type"] == "cassette_offline" and "cassette_allow_hosts" in error["message"]
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "misses": 1, "passthrough": 1, "offline": 1}
    assert report["passthrough_hosts"] == {"api.openai.com": 1}
    url = "https://api.cerebras.example/v1/chat/completions"
    assert report["offline"] == [{"host": "api.cerebras.example", "method": "POST", "url": url}]


def test_ignored_fields_are_left_out_of_the_key(proxies, upstream):
    traced = {"model": "m", "metadata": {"trace_id": "run-1"}}
    proxies.record(upstream, traced, ANSWER, cassette_ignore=["metadata.trace_id"])
    proxy = proxies.start("cassette_ignore=metadata.trace_id", cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    again = proxy.request(chat_flow({**traced, "metadata": {"trace_id": "run-2"}}, upstream.url()))
    other = proxy.request(chat_flow({"model": "m2", "metadata": {"trace_id": "run-2"}}, upstream.url()))
    assert (again.response.status_code, other.response.status_code) == (200, 409)


def test_an_unreachable_upstream_answers_502_json_and_nothing_is_saved(proxies):
    gone = LoopbackUpstream()
    gone.close()  # nothing listens on its port any more
    proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    flow = proxy.request(chat_flow(ASK, gone.url()))
    assert flow.response.status_code == 502 and flow.response.headers["x-should-retry"] == "false"
    error = json.loads(flow.response.content)["error"]
    assert error["type"] == "cassette_upstream_error" and "nothing was saved" in error["message"]
    report = proxy.done()
    assert report["counts"] == {**NOTHING, "upstream": 1, "errors": 1}
    assert [entry["type"] for entry in report["errors"]] == ["cassette_upstream_error"]
    assert not proxy.cassette_dir.exists()


def test_a_miss_whose_closest_search_does_not_end_is_answered_without_it(proxies, upstream, monkeypatch):
    # Whatever the search costs (a bug, a hostile cassette), the 409 comes after a bounded wait.
    from cassette_proxy.core.reading.miss import ClosestSearch
    from cassette_proxy.proxy import answers

    proxies.record(upstream, ASK, ANSWER)
    release = threading.Event()
    monkeypatch.setattr(answers, "MISS_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(ClosestSearch, "closest", lambda *args: release.wait(30) and [])
    proxy = proxies.start(cassette_mode="replay", cassette_hosts=["127.0.0.1"])
    try:
        flow = proxy.request(chat_flow({**ASK, "temperature": 1}, upstream.url()))
    finally:
        release.set()
    assert flow.response.status_code == 409
    error = json.loads(flow.response.content)["error"]
    assert error["code"] == "cassette_miss" and error["closest"] == []
    assert "the search for the closest recording took over 0.2 s and was left out of this answer" in error["message"]
    assert proxy.done()["counts"] == {**NOTHING, "misses": 1}


def test_each_request_hook_decision_is_a_typed_outcome_the_response_hooks_read(proxies, upstream):
    """FlowState.outcome is an Outcome member, never a string compared by value (proxy/state.py)."""
    path = proxies.record(upstream, ASK, ANSWER)
    path.rename(path.with_name("kept.json"))
    proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
    forwarded = proxy.request(chat_flow(ASK, upstream.url()))
    path.with_name("kept.json").rename(path)
    hit = proxy.request(chat_flow(ASK, upstream.url()))
    outside = proxy.request(chat_flow(ASK, "https://example.org/v1/chat/completions"))
    states = [state_of(flow) for flow in (forwarded, hit, outside)]
    assert [state.outcome for state in states] == [Outcome.FORWARDED, Outcome.HIT, Outcome.PASSTHROUGH]
    assert [state.answered_here for state in states] == [False, True, False]
    assert all(isinstance(o, Outcome) for o in ANSWERED_HERE) and Outcome.SESSION not in ANSWERED_HERE
