"""In-process tests of the control channel (proxy/control_channel.py): the addon answers `cassette.control` itself,
only with the run's token, and a test's announcement changes the rules of that test's requests only."""

from __future__ import annotations

import json
import logging

import pytest
from cassette_proxy.core.files.cassette_file import body_fields, dumps, new_cassette
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

TOKEN = "control-token-for-tests-0123456789"


def control_flow(path: str, body: dict | None = None, token: str | None = TOKEN, method: str = "POST") -> object:
    flow = tflow.tflow()
    flow.request.method = method
    flow.request.scheme, flow.request.host, flow.request.port = "http", "cassette.control", 80
    flow.request.path = path
    flow.request.headers["content-type"] = "application/json"
    if token is not None:
        flow.request.headers["x-cassette-control-token"] = token
    flow.request.content = json.dumps(body or {}).encode()
    return flow


def chat_flow(prompt: str = "hello") -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", "api.openai.com", 443
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["content-type"] = "application/json"
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
    flow.request.content = json.dumps(body).encode()
    return flow


@pytest.fixture
def proxy(tmp_path):
    """The addon in mitmproxy's test context; `proxy.send(flow)` runs its request hook."""
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:

        def configure(**options) -> Addon:
            options.setdefault("cassette_dir", str(tmp_path / "cassettes"))
            options.setdefault("cassette_control_token", TOKEN)
            tctx.options.update(**options)
            addon.configure(set(tctx.options.keys()))
            return addon

        def send(flow) -> object:
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            return flow

        addon.configure_with, addon.send = configure, send
        configure()
        yield addon


def answer(flow) -> dict:
    return json.loads(flow.response.content)


@pytest.mark.parametrize(
    ("token", "configured"),
    [(None, TOKEN), ("wrong-token", TOKEN), ("", TOKEN), ("tøken-ü", TOKEN), ("", ""), (TOKEN, "")],
    ids=["missing", "wrong", "empty", "not-ascii", "no-token-configured-empty-sent", "no-token-configured"],
)
def test_without_the_runs_token_the_control_host_answers_403_and_nothing_changes(proxy, token, configured):
    proxy.configure_with(cassette_control_token=configured)
    flow = proxy.send(control_flow("/v1/test/start", {"test": "t::a", "options": {"scope": "test"}}, token=token))
    assert flow.response.status_code == 403  # answered here: mitmproxy does not forward an answered flow
    assert answer(flow)["error"]["type"] == "cassette_control_refused"
    assert proxy.control.rules.test is None and proxy.control.rules.scope == "shared"
    assert proxy.report.upstream == proxy.report.passthrough == proxy.report.hits == 0
    assert proxy.report.misses == [] and proxy.report.tests == {}


@pytest.mark.parametrize("mode", ["replay", "record", "off"])
def test_the_control_host_is_answered_in_every_mode_and_never_forwarded(proxy, mode):
    proxy.configure_with(cassette_mode=mode)
    flow = proxy.send(control_flow("/v1/test/start", {"test": "t::a"}))
    assert flow.response.status_code == 200
    assert proxy.report.upstream == proxy.report.passthrough == 0


def test_the_token_is_taken_off_the_request_and_never_logged(proxy, caplog):
    caplog.set_level(logging.DEBUG)
    flow = proxy.send(control_flow("/v1/test/start", {"test": "t::a"}))
    assert "x-cassette-control-token" not in flow.request.headers
    refused = proxy.send(control_flow("/v1/test/start", {"test": "t::a"}, token=TOKEN + "x"))
    assert refused.response.status_code == 403
    assert TOKEN not in caplog.text and TOKEN not in refused.response.text


def test_a_started_test_owns_its_requests_until_it_ends(proxy):
    started = proxy.send(control_flow("/v1/test/start", {"test": "tests/test_app.py::test_a"}))
    assert answer(started) == {"test": "tests/test_app.py::test_a", "applied": {}, "ignored": {}}
    miss = proxy.send(chat_flow())
    assert miss.response.status_code == 409
    error = answer(miss)["error"]
    assert (error["test"], error["scope"]) == ("tests/test_app.py::test_a", "shared")
    assert "for test tests/test_app.py::test_a (shared scope)" in error["message"]
    proxy.send(control_flow("/v1/test/end", {"test": "tests/test_app.py::test_a"}))
    proxy.send(chat_flow())
    assert [m["test"] for m in proxy.report.misses] == ["tests/test_app.py::test_a", None]
    assert {t: e["misses"] for t, e in proxy.report.tests.items()} == {"tests/test_app.py::test_a": 1, "<no test>": 1}


def test_a_test_scope_miss_names_the_test_and_the_folder_it_looked_in(proxy):
    proxy.send(
        control_flow("/v1/test/start", {"test": "tests/test_app.py::test_renamed", "options": {"scope": "test"}})
    )
    error = answer(proxy.send(chat_flow()))["error"]
    assert error["cassette"].startswith("tests/tests/test_app.py/test_renamed/api.openai.com/v1/chat/completions/")
    assert "in the test scope of test tests/test_app.py::test_renamed" in error["message"]
    assert "a renamed test loses them" in error["message"]


def test_a_test_scope_recording_answers_that_test_only(proxy, tmp_path):
    """The same request: the test's own folder answers it, another test and the shared scope miss."""
    probe = proxy.send(control_flow("/v1/test/start", {"test": "t.py::test_own", "options": {"scope": "test"}}))
    assert probe.response.status_code == 200
    relative = answer(proxy.send(chat_flow()))["error"]["cassette"]
    url = "https://api.openai.com/v1/chat/completions"
    request = {"method": "POST", "url": url, "headers": {}, "body_format": "json", "body": {}}
    body = body_fields(b'{"answer": "own"}', "application/json")
    response = {"status": 200, "headers": {"content-type": "application/json"}, **body}
    path = tmp_path / "cassettes" / relative
    path.parent.mkdir(parents=True)
    path.write_bytes(dumps(new_cassette(relative.rsplit("/", 1)[1][:-5], request, response, {})))
    hit = proxy.send(chat_flow())
    assert hit.response.status_code == 200, hit.response.content
    proxy.send(control_flow("/v1/test/start", {"test": "t.py::test_other", "options": {"scope": "test"}}))
    assert proxy.send(chat_flow()).response.status_code == 409
    proxy.send(control_flow("/v1/test/end", {"test": "t.py::test_other"}))
    assert proxy.send(chat_flow()).response.status_code == 409
    assert proxy.report.tests["t.py::test_own"]["hits"] == 1
    assert proxy.report.tests["t.py::test_own"]["cassettes"] == {relative}


def test_marker_options_apply_known_and_ignore_unknown_with_a_log_line(proxy, caplog):
    known = {"repeats": "sequence", "scope": "test", "ignore": ["metadata.trace_id"], "record_statuses": [200, 404]}
    flow = proxy.send(control_flow("/v1/test/start", {"test": "t::a", "options": {**known, "frobnicate": True}}))
    body = answer(flow)
    assert body["applied"] == known
    assert list(body["ignored"]) == ["frobnicate"]
    assert "option 'frobnicate' ignored" in caplog.text
    rules = proxy.control.rules
    assert (rules.repeats, rules.scope, rules.recipe.paths) == ("sequence", "test", (("metadata", "trace_id"),))
    assert rules.statuses == frozenset({200, 404})
    proxy.send(control_flow("/v1/test/end", {"test": "t::a"}))
    assert (proxy.control.rules.repeats, proxy.control.rules.recipe.paths) == ("reuse", ())


def test_a_replay_run_stays_offline_whatever_a_test_asks(proxy):
    flow = proxy.send(control_flow("/v1/test/start", {"test": "t::a", "options": {"mode": "record"}}))
    assert "replay run, which stays offline" in answer(flow)["ignored"]["mode"]
    assert proxy.send(chat_flow()).response.status_code == 409
    assert proxy.report.upstream == 0


def test_a_record_run_applies_a_tests_replay_mode(proxy):
    proxy.configure_with(cassette_mode="record")
    proxy.send(control_flow("/v1/test/start", {"test": "t::strict", "options": {"mode": "replay"}}))
    assert proxy.send(chat_flow()).response.status_code == 409
    assert proxy.report.upstream == 0


@pytest.mark.parametrize(
    ("path", "body", "method", "message"),
    [
        ("/v1/test/start", {"test": "t::a", "options": {"repeats": "sequential"}}, "POST", "is not a choice"),
        ("/v1/test/start", {"test": "t::a", "options": {"ignore": "a.b"}}, "POST", "must be a list"),
        ("/v1/test/start", {"test": ""}, "POST", "needs"),
        ("/v1/test/start", {"test": "t::a"}, "GET", "is not a control call"),
        ("/v1/tests", {"test": "t::a"}, "POST", "is not a control call"),
    ],
)
def test_a_bad_control_call_answers_400_and_changes_nothing(proxy, path, body, method, message):
    flow = proxy.send(control_flow(path, body, method=method))
    assert flow.response.status_code == 400
    assert message in answer(flow)["error"]["message"]
    assert proxy.control.rules.test is None


def test_a_tests_ignore_leaves_its_fields_out_of_that_tests_keys_only(proxy):
    def cassette_of(trace: str) -> str:
        flow = chat_flow()
        body = json.loads(flow.request.content)
        flow.request.content = json.dumps({**body, "metadata": {"trace_id": trace}}).encode()
        return answer(proxy.send(flow))["error"]["cassette"]

    proxy.send(control_flow("/v1/test/start", {"test": "t::a", "options": {"ignore": ["metadata.trace_id"]}}))
    assert cassette_of("trace-1") == cassette_of("trace-2")
    proxy.send(control_flow("/v1/test/end", {"test": "t::a"}))
    assert cassette_of("trace-1") != cassette_of("trace-2")
