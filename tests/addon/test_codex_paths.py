"""A host under cassette control for some paths only: chatgpt.com's Codex backend is keyed, its web site is not."""

from __future__ import annotations

import json

import pytest
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow


def flow_to(path: str) -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", "chatgpt.com", 443
    flow.request.path = path
    flow.request.headers["content-type"] = "application/json"
    flow.request.content = json.dumps({"model": "gpt-5-codex", "input": "hi"}).encode()
    return flow


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [("/backend-api/codex/responses", 409, "cassette_miss"), ("/backend-api/conversation", 403, "cassette_offline")],
)
def test_codex_paths_are_keyed_and_the_rest_of_the_host_stays_offline(tmp_path, path, status, error):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(tmp_path / "cassettes"))
        addon.configure(set(tctx.options.keys()))
        flow = flow_to(path)
        tctx.master.event_loop.run_until_complete(addon.request(flow))
    assert flow.response.status_code == status
    body = json.loads(flow.response.content)["error"]
    assert body["type"] == error
    if error == "cassette_offline":
        assert "cassette_hosts names only some paths of chatgpt.com" in body["message"]
    else:
        assert body["cassette"].startswith("chatgpt.com/backend-api/codex/responses/")
