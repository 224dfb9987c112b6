"""A recorded WebSocket upgrade reaches its server without the reachability probe's empty connection first, which
a WebSocket server (the `websockets` library, `ws`) logs as a failed handshake; a plain request is still probed
(proxy/upstream.py). In process, against a loopback socket that counts connections."""

from __future__ import annotations

import pytest
from in_process import LoopbackUpstream, Proxies
from mitmproxy import http
from mitmproxy.test import tflow

pytest_plugins = ["addon_fixtures"]  # the upstream and proxies fixtures


def flow_to(upstream: LoopbackUpstream, upgrade: bool) -> http.HTTPFlow:
    flow = tflow.tflow()
    headers = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13",
               "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="} if upgrade else {}  # fmt: skip
    flow.request = http.Request.make("GET", upstream.url("/v1/realtime"), b"", headers)
    return flow


@pytest.mark.parametrize(("upgrade", "probes"), [(True, 0), (False, 1)], ids=["websocket-upgrade", "plain-get"])
def test_only_plain_requests_are_probed_before_they_are_forwarded(tmp_path, upstream, upgrade, probes):
    proxies = Proxies(tmp_path)
    try:
        proxy = proxies.start(cassette_mode="record", cassette_hosts=["127.0.0.1"])
        flow = proxy.request(flow_to(upstream, upgrade))
        assert flow.response is None  # forwarded: mitmproxy makes the one connection the server sees
        assert upstream.connections() == probes
    finally:
        proxies.close()
