"""A browser's own background traffic (core/traffic/browser_background.py) through the request hook: answered 204 here in
every mode, counted apart, never a miss, an offline refusal or a recording; a host of the scope stays the scope's."""

from __future__ import annotations

import pytest
from cassette_proxy.core.traffic.browser_background import background_of
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow


def browser_flow(host: str, path: str, method: str = "POST") -> object:
    flow = tflow.tflow()
    flow.request.method = method
    flow.request.scheme, flow.request.host, flow.request.port = "https", host, 443
    flow.request.path = path
    flow.request.content = b'{"request":{"@os":"linux","app":[{"appid":"ggkkehgbnfjpeggfpleeakpidbkibbmn"}]}}'
    return flow


@pytest.fixture
def proxy(tmp_path):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:

        def run(flow, **options) -> Addon:
            tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), **options)
            addon.configure(set(tctx.options.keys()))
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            return addon

        yield run


@pytest.mark.parametrize("mode", ["replay", "record", "update"])
@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("update.googleapis.com", "/service/update2/json"),  # what Playwright's chromium sends in every run
        ("safebrowsing.googleapis.com", "/v4/threatListUpdates:fetch"),
        ("r4---sn-4g5e6nzz.gvt1.com", "/edgedl/chrome/dict/en-us-10-1.bdic"),
        ("firefox.settings.services.mozilla.com", "/v1/buckets/monitor/collections/changes/changeset"),
    ],
)
def test_a_browsers_background_request_is_answered_here_and_counted_apart(proxy, tmp_path, mode, host, path):
    flow = browser_flow(host, path)
    addon = proxy(flow, cassette_mode=mode)
    assert flow.response is not None and flow.response.status_code == 204
    report = addon.report
    assert report.browser_background == 1
    assert (report.offline, report.misses, report.upstream, report.passthrough, report.recorded) == ([], [], 0, 0, 0)
    assert report.strict_failures() == []
    assert "1 browser background" in report.summary()
    assert not (tmp_path / "cassettes").exists()


def test_a_background_host_the_user_put_in_the_scope_is_keyed_like_any_other(proxy):
    flow = browser_flow("update.googleapis.com", "/service/update2/json")
    addon = proxy(flow, cassette_mode="replay", cassette_hosts=["update.googleapis.com"])
    assert flow.response.status_code == 409 and addon.report.browser_background == 0


@pytest.mark.parametrize("host", ["accounts.google.com", "www.googleapis.com", "example.com", "gvt1.com.evil.test"])
def test_hosts_an_application_calls_itself_are_not_background_traffic(host):
    assert background_of(host) is None


def test_an_unknown_host_in_replay_is_still_refused_as_offline(proxy):
    flow = browser_flow("example.com", "/")
    addon = proxy(flow, cassette_mode="replay")
    assert flow.response.status_code == 403 and addon.report.browser_background == 0
