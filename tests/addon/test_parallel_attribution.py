"""Several runners share one proxy (vitest's workers, `node --test` files): each request follows its own test's rules,
named by its carrier (core/traffic/attribution.py); a request no test can be named for is refused in the test scope."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.proxy.state import state_of
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

TOKEN = "control-token-for-tests-0123456789"
CHAT = "https://api.openai.com/v1/chat/completions"


def control(path: str, test: str, runner: str | None, options: dict | None = None) -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "http", "cassette.control", 80
    flow.request.path = path
    flow.request.headers["x-cassette-control-token"] = TOKEN
    body = {"test": test, "options": options or {}}
    if runner is not None:
        body["runner"] = runner
    flow.request.content = json.dumps(body).encode()
    return flow


def chat(prompt: str = "hello", **headers: str) -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", "api.openai.com", 443
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["content-type"] = "application/json"
    for name, value in headers.items():
        flow.request.headers[name.replace("_", "-")] = value
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}
    flow.request.content = json.dumps(body).encode()
    return flow


@pytest.fixture
def proxy(tmp_path):
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


def error(flow) -> dict:
    return json.loads(flow.response.content)["error"]


def start_two_workers(proxy, **options) -> None:
    for runner, test in (("101", "a.test.js > writes a haiku"), ("102", "b.test.js > writes a limerick")):
        assert proxy.send(control("/v1/test/start", test, runner, options)).response.status_code == 200


def test_each_request_follows_the_test_its_header_names_and_the_header_goes_no_further(proxy):
    start_two_workers(proxy, scope="test")
    b = proxy.send(chat(x_cassette_test="b.test.js%20%3E%20writes%20a%20limerick"))
    a = proxy.send(chat(x_cassette_test="a.test.js%20%3E%20writes%20a%20haiku"))
    assert error(a)["cassette"].startswith("tests/a.test.js_writes_a_haiku/api.openai.com/")
    assert error(b)["cassette"].startswith("tests/b.test.js_writes_a_limerick/api.openai.com/")
    assert error(a)["key"] == error(b)["key"]  # the carrier is not part of the key
    assert "x-cassette-test" not in a.request.headers and "x-cassette-test" not in b.request.headers
    assert [m["test"] for m in proxy.report.misses] == ["b.test.js > writes a limerick", "a.test.js > writes a haiku"]


def test_a_baggage_member_names_the_test_and_only_that_member_is_taken_off(proxy):
    start_two_workers(proxy, scope="test")
    flow = proxy.send(chat(baggage="tenant=7, cassette-test=b.test.js%20%3E%20writes%20a%20limerick;p=1"))
    assert error(flow)["test"] == "b.test.js > writes a limerick"
    assert flow.request.headers["baggage"] == "tenant=7"
    alone = proxy.send(chat(baggage="cassette-test=a.test.js%20%3E%20writes%20a%20haiku"))
    assert error(alone)["test"] == "a.test.js > writes a haiku" and "baggage" not in alone.request.headers


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_in_the_test_scope_a_request_without_a_carrier_is_refused_and_reported(proxy, mode):
    proxy.configure_with(cassette_mode=mode, cassette_scope="test")
    start_two_workers(proxy)
    flow = proxy.send(chat())
    assert flow.response.status_code == 428
    assert error(flow)["type"] == "cassette_unattributed"
    assert "2 test(s) run now (a.test.js > writes a haiku, b.test.js > writes a limerick)" in error(flow)["message"]
    assert proxy.report.upstream == 0 and proxy.report.misses == [] and proxy.report.recorded == 0
    assert [e.kind.value for e in proxy.report.errors] == ["cassette_unattributed"]
    assert any("1 errors" in f for f in proxy.report.strict_failures())
    assert "refused POST https://api.openai.com/v1/chat/completions" in proxy.report.summary()


def test_a_process_running_two_tests_at_once_is_refused_naming_both(proxy):
    start_two_workers(proxy, scope="test")
    flow = proxy.send(chat(x_cassette_test="a,b"))
    assert flow.response.status_code == 428
    assert "ran 2 tests at once (a, b)" in error(flow)["message"]


def test_in_the_shared_scope_an_ambiguous_request_still_finds_its_shared_recording(proxy):
    start_two_workers(proxy)  # scope shared: the folder does not depend on the test
    flow = proxy.send(chat())
    assert flow.response.status_code == 409
    assert error(flow)["test"] is None and not error(flow)["cassette"].startswith("tests/")


def test_an_empty_header_is_a_request_outside_any_test(proxy):
    start_two_workers(proxy, scope="test")
    flow = proxy.send(chat(x_cassette_test=""))
    assert error(flow)["test"] is None and error(flow)["cassette"].startswith("api.openai.com/")


def test_one_serial_runner_needs_no_carrier(proxy):
    proxy.send(control("/v1/test/start", "t.py::test_a", "7", {"scope": "test"}))
    assert error(proxy.send(chat()))["test"] == "t.py::test_a"


def test_interleaved_workers_each_count_their_own_sequence(proxy):
    proxy.configure_with(cassette_mode="record")
    start_two_workers(proxy, scope="test", repeats="sequence")
    carriers = ("a.test.js%20%3E%20writes%20a%20haiku", "b.test.js%20%3E%20writes%20a%20limerick") * 2
    targets = [state_of(proxy.send(chat(x_cassette_test=carrier))).target.relative for carrier in carriers]
    assert [(t.split("/")[1], t.rsplit("/", 1)[1].split(".", 1)[1]) for t in targets] == [
        ("a.test.js_writes_a_haiku", "json"),
        ("b.test.js_writes_a_limerick", "json"),
        ("a.test.js_writes_a_haiku", "2.json"),
        ("b.test.js_writes_a_limerick", "2.json"),
    ]


def test_announcements_that_do_not_add_up_are_in_the_report(proxy):
    proxy.send(control("/v1/test/start", "t::a", "7"))
    proxy.send(control("/v1/test/start", "t::b", "7"))
    proxy.send(control("/v1/test/end", "t::c", "7"))
    proxy.send(control("/v1/test/start", "t::x", None))
    proxy.send(control("/v1/test/end", "t::y", None))
    assert proxy.report.test_notices == [
        "start of t::b in runner 7 while t::a had not ended",
        "end of t::c in runner 7, which was not running there (its current test: t::a, t::b)",
        "end of t::y, which was not running there (its current test: t::x)",
    ]
    assert set(proxy.control.running) == {"t::a", "t::b"}  # the unnamed runner's end ended its one test
    assert "cassette: test announcements: start of t::b in runner 7" in proxy.report.summary()


def test_with_the_shared_fallback_an_ambiguous_request_takes_the_shared_scope_and_is_noted(proxy):
    proxy.configure_with(cassette_unattributed="shared")
    start_two_workers(proxy, scope="test")
    flow = proxy.send(chat())
    assert flow.response.status_code == 409  # a miss in the shared folder, not a refusal
    assert error(flow)["cassette"].startswith("api.openai.com/") and error(flow)["test"] is None
    assert proxy.report.errors == []
    [notice] = proxy.report.test_notices
    assert notice.startswith("POST https://api.openai.com/v1/chat/completions in the shared scope: 2 test(s) run now")


def test_a_typo_in_the_fallback_option_is_refused_naming_the_choices(proxy):
    with pytest.raises(Exception, match=r"cassette_unattributed.*refuse, shared"):
        proxy.configure_with(cassette_unattributed="share")
