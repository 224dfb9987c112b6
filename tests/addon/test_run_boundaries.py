"""In-process tests of runs on one proxy (proxy/runs.py): a run reusing a warm proxy starts with an empty report, its
repeat counters at 1 and no current test, and gets its own report at its end."""

from __future__ import annotations

import json

import pytest
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons
from test_control_channel_hooks import TOKEN, chat_flow, control_flow


@pytest.fixture
def proxy(tmp_path):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), cassette_control_token=TOKEN)
        addon.configure(set(tctx.options.keys()))

        def send(flow) -> object:
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            return flow

        addon.send = send
        yield addon


def answer(proxy: Addon, path: str, body: dict | None = None) -> dict:
    flow = proxy.send(control_flow(path, body))
    assert flow.response.status_code == 200, flow.response.text
    return json.loads(flow.response.content)


def test_a_run_ends_with_its_own_report_and_the_next_starts_empty(proxy):
    proxy.send(chat_flow("a miss in the first run"))
    ended = answer(proxy, "/v1/run/end")["report"]
    assert ended["counts"]["misses"] == 1
    answer(proxy, "/v1/run/start")
    proxy.send(chat_flow("another miss"))
    proxy.send(chat_flow("and one more"))
    second = answer(proxy, "/v1/run/end")["report"]
    assert second["counts"]["misses"] == 2
    assert second["mode"] == "replay"
    assert proxy.report.routes == second["routes"]


def test_a_new_run_forgets_the_test_the_last_one_left_current(proxy):
    answer(proxy, "/v1/test/start", {"test": "t::left_over", "options": {"scope": "test"}})
    answer(proxy, "/v1/run/start")
    assert proxy.control.rules.test is None
    assert proxy.control.rules.scope == "shared"


def test_a_new_run_counts_repeats_from_one(proxy):
    proxy.sequencer.next("key", "a/key.json", "/nowhere/", replaying=False)
    answer(proxy, "/v1/run/start")
    assert proxy.sequencer.next("key", "a/key.json", "/nowhere/", replaying=False) == "a/key.json"


def test_run_calls_need_the_token(proxy):
    flow = control_flow("/v1/run/end", token="wrong")
    proxy.send(flow)
    assert flow.response.status_code == 403


def test_the_report_object_the_recorder_holds_is_the_one_reset(proxy):
    held = proxy.recorder.report  # the addon's collaborators keep their reference: emptied in place, not replaced
    proxy.report.hits = 5
    answer(proxy, "/v1/run/start")
    assert held is proxy.report and held.hits == 0
