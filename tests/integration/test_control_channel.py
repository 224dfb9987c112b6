"""The control channel through a real mitmdump: only the run's token announces a test; anything else is refused
with 403 by the proxy itself, over plain HTTP or HTTPS, and never reaches an upstream."""

from __future__ import annotations

import json
import os
import ssl

import httpx
import pytest
from cassette_proxy.launch import launcher
from cassette_proxy.launch.control_client import ControlClient, ControlError

TOKEN = "integration-control-token-abcdef0123456789"
START = {"test": "tests/test_x.py::test_y", "options": {"scope": "test"}}


@pytest.mark.parametrize("mode", ["replay", "record", "off"])
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_control_request_without_the_token_gets_403_and_is_not_forwarded(upstream, start_proxy, mode, scheme):
    proxy = start_proxy(upstream, env={"CASSETTE_CONTROL_TOKEN": TOKEN}, cassette_mode=mode)
    with httpx.Client(proxy=proxy.url, verify=ssl.create_default_context(cafile=proxy.ca_bundle), timeout=30) as client:
        url = f"{scheme}://cassette.control/v1/test/start"
        missing = client.post(url, json=START)
        wrong = client.post(url, json=START, headers={"x-cassette-control-token": TOKEN[:-1] + "X"})
        right = client.post(url, json=START, headers={"x-cassette-control-token": TOKEN})
    assert (missing.status_code, wrong.status_code) == (403, 403)
    assert missing.json()["error"]["type"] == wrong.json()["error"]["type"] == "cassette_control_refused"
    assert right.status_code == 200 and right.json()["test"] == START["test"]
    report = proxy.stop()
    assert upstream.count == 0
    assert (report["upstream"], report["passthrough"], report["hits"], report["misses"]) == (0, 0, 0, [])
    assert TOKEN not in proxy.log_text() and TOKEN not in json.dumps(report)


def test_a_proxy_without_a_token_refuses_every_control_request(upstream, start_proxy):
    proxy = start_proxy(upstream, env={"CASSETTE_CONTROL_TOKEN": ""}, cassette_mode="record")
    with pytest.raises(ControlError, match="no control token is configured"):
        ControlClient(proxy.url, "").start("t::a")
    assert upstream.count == 0


def test_the_launcher_passes_a_fresh_token_through_the_environment_only(tmp_path):
    settings = launcher.Settings(mitmdump=os.environ["CASSETTE_MITMDUMP"], cassette_dir=tmp_path / "cassettes")
    first, second = launcher.start(settings), launcher.start(settings)
    try:
        assert first.control_token and first.control_token != second.control_token
        assert not any(first.control_token in arg for arg in first.process.args)  # not on the command line
        env = first.client_env({})
        assert env["CASSETTE_CONTROL_TOKEN"] == first.control_token
        assert env["CASSETTE_CONTROL_URL"] == "http://cassette.control"
        assert "CASSETTE_CONTROL_TOKEN" not in first.exports({})  # never in `cassette env` / serve's state file
        assert first.control().start("t::a")["test"] == "t::a"
        with pytest.raises(ControlError, match="missing or wrong"):
            ControlClient(first.url, second.control_token).start("t::a")  # one run's token opens no other proxy
        assert first.control().end("t::a") == {"test": None, "ended": "t::a"}
    finally:
        first.stop()
        report = second.stop()
    assert report is not None and report.tests == {}
