"""In-process tests of runs on one proxy (proxy/runs.py): a run reusing a warm proxy starts with an empty report, its
repeat counters at 1 and no current test, and gets its own report at its end, with every recording it made."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from cassette_proxy.core.files import atomic_write
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons
from test_control_channel_hooks import TOKEN, chat_flow, control_flow
from test_session_hooks import recorded_flow


@pytest.fixture
def proxy(tmp_path):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), cassette_control_token=TOKEN)
        addon.configure(set(tctx.options.keys()))

        def send(flow) -> object:
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            return flow

        def reconfigure(**options: object) -> None:
            tctx.options.update(**options)
            addon.configure(set(options))

        addon.send, addon.reconfigure, addon.loop = send, reconfigure, tctx.master.event_loop
        yield addon
        addon.sessions.server.stop()


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


def test_a_session_closed_just_before_the_run_ends_is_counted_in_that_run(proxy, monkeypatch):
    """The session's write is held in its worker thread while the run's end is asked for: the end waits for it
    (without holding up the event loop) and its report counts the session; the next run's does not."""
    proxy.reconfigure(cassette_mode="record")
    proxy.upstream.forward = lambda flow: None  # no probe, no timer: nothing is connected in-process
    flow = recorded_flow()
    websocket_data, response = flow.websocket, flow.response
    flow.websocket = flow.response = None
    proxy.send(flow)
    flow.response, flow.websocket = response, websocket_data
    proxy.loop.run_until_complete(proxy.response(flow))

    writing, release = threading.Event(), threading.Event()
    write_file = atomic_write._written_beside

    def held(*args):
        writing.set()
        assert release.wait(30), "the test never released the write"
        return write_file(*args)

    monkeypatch.setattr(atomic_write, "_written_beside", held)
    loop = proxy.loop
    try:
        closed = loop.create_task(proxy.websocket_end(flow))
        assert loop.run_until_complete(asyncio.to_thread(writing.wait, 30)), "the session was never written"
        end = control_flow("/v1/run/end")
        ending = loop.create_task(proxy.request(end))
        for _ in range(10):
            loop.run_until_complete(asyncio.sleep(0))
        assert not ending.done(), "the run's end answered while the session was still being written"
    finally:
        release.set()
    loop.run_until_complete(asyncio.gather(closed, ending))

    report = json.loads(end.response.content)["report"]
    assert report["counts"]["recorded"] == 1
    assert report.get("errors", []) == []
    answer(proxy, "/v1/run/start")
    assert answer(proxy, "/v1/run/end")["report"]["counts"]["recorded"] == 0
