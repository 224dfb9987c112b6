"""Every request has a name the file system can hold (core/files/location.py), decided in the hit path, in-process."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.files.location import MAX_NAME, relative_name
from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

KEY = "0" * 32


def path_of_length(total: int) -> str:
    """A URL path whose cassette name, before the key's own length counts, is `total` bytes (segments of 150)."""
    path = "/v1"
    while (left := total - len(relative_name("https", "api.openai.com", 443, path, KEY))) > 0:
        path += "s" if left == 1 else "/" + "s" * min(150, left - 1)
    return path


def miss_of(tmp_path, folder, path: str) -> tuple[dict, Addon]:
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(folder), cassette_mode="replay")
        addon.configure(set(tctx.options.keys()))
        flow = tflow.tflow()
        flow.request.scheme, flow.request.host, flow.request.port = "https", "api.openai.com", 443
        flow.request.method, flow.request.path, flow.request.content = "GET", path, b""
        tctx.master.event_loop.run_until_complete(addon.request(flow))
    return json.loads(flow.response.content)["error"], addon


@pytest.mark.parametrize(("length", "shortened"), [(MAX_NAME, False), (MAX_NAME + 1, True)])
def test_names_up_to_the_limit_are_kept_and_longer_ones_shortened(tmp_path, length, shortened):
    error, _ = miss_of(tmp_path, tmp_path / "cassettes", path_of_length(length))
    assert (len(error["cassette"]) < 300) is shortened
    if not shortened:
        assert len(error["cassette"]) == MAX_NAME


def test_a_path_the_file_system_refuses_is_named_once(tmp_path):
    folder = tmp_path.joinpath(*["d" * 200] * 6)  # a cassette folder over 1 KB: MAX_NAME no longer fits below it
    folder.mkdir(parents=True)
    error, addon = miss_of(tmp_path, folder, path_of_length(MAX_NAME))
    assert error["type"] == "cassette_invalid" and "File name too long" in error["message"]
    [entry] = addon.report.errors
    assert entry.message.count(entry.cassette) == 1 and error["message"].count(entry.cassette) == 1
