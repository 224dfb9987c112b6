"""Routes without a proxy: `--reverse NAME=URL[@PORT]` parsed, route names, which listener a request came through
(proxy/listening/routes.py, pure), NO_PROXY keeping the listeners, the summary's and merged reports' counts per route. Through
a real mitmdump and `cassette run`: tests/integration/test_routes.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from cassette_proxy.core.report import Report
from cassette_proxy.launch import client_env, launcher
from cassette_proxy.proxy.listening import routes


@pytest.mark.parametrize(
    ("spec", "origin", "base_path", "port"),
    [
        ("ollama=http://localhost:11434", "http://localhost:11434", "", None),
        ("ollama=http://localhost:11434@8181", "http://localhost:11434", "", 8181),
        ("vllm=http://127.0.0.1:8000/v1@9000", "http://127.0.0.1:8000", "/v1", 9000),
        ("openai=https://api.openai.com@7000", "https://api.openai.com", "/v1", 7000),
    ],
)
def test_reverse_spec_takes_an_optional_fixed_port(spec, origin, base_path, port):
    reverse = launcher.parse_reverse(spec)
    assert (reverse.origin, reverse.base_path, reverse.port) == (origin, base_path, port)


@pytest.mark.parametrize("spec", ["ollama=http://localhost:11434@", "ollama=http://localhost:11434@70000"])
def test_a_bad_fixed_port_is_refused_with_an_example(spec):
    with pytest.raises(launcher.LauncherError, match=r"is not a port; give the listener's port as 1-65535, e\.g\."):
        launcher.parse_reverse(spec)


def test_route_names_are_name_equals_port():
    assert routes.parse_route_names(["ollama=8181", "openai=9000"]) == {8181: "ollama", 9000: "openai"}
    with pytest.raises(ValueError, match="'ollama' is not NAME=PORT"):
        routes.parse_route_names(["ollama"])


def test_listener_ports_stay_in_no_proxy_even_when_loopback_is_under_control():
    env = client_env.client_environment(
        {"NO_PROXY": "internal.corp"},
        proxy_url="http://127.0.0.1:1",
        ca_bundle=Path("/nonexistent"),
        controlled_hosts=["127.0.0.1", "api.openai.com"],
        mode="replay",
        notice_file=Path("/nonexistent"),
        base_urls={},
        direct=["127.0.0.1:8181"],
    )
    assert env["NO_PROXY"].split(",") == ["internal.corp", "localhost", "::1", "127.0.0.1:8181"]


def test_summary_counts_requests_per_route_and_xdist_reports_add_up():
    one = Report(mode="replay", hits=2, token_exchanges=1, routes={"forward": 2, "openai": 0})
    text = one.summary()
    assert "cassette: replay: 2 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough, 1 token exchanges" in text
    assert "cassette: routes: forward 2, openai 0" in text
    other = Report(mode="replay", routes={"forward": 1, "openai": 3})
    assert Report.merged([one, other]).routes == {"forward": 3, "openai": 3}
    assert "routes" not in Report(mode="replay", hits=2, routes={"forward": 2}).summary()


class FakeMode:
    def __init__(self, type_name: str, data: str = "", scheme: str = "https") -> None:
        self.type_name, self.data, self.scheme = type_name, data, scheme


class FakeRequest:
    def __init__(self, scheme: str, host: str, port: int) -> None:
        self.scheme, self.host, self.port = scheme, host, port


class FakeFlow:
    """The three attributes RouteTable reads: the listener's mode and address, and the request's target."""

    def __init__(self, mode: FakeMode, listener_port: int, request: FakeRequest) -> None:
        self.client_conn = type("Client", (), {"proxy_mode": mode, "sockname": ("127.0.0.1", listener_port)})()
        self.request = request


OLLAMA = routes.ReverseListener(port=8181, scheme="http", host="localhost", upstream_port=11434, name="ollama")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST"])
def test_a_forward_request_for_our_own_listener_goes_to_its_upstream(host):
    request = FakeRequest("http", host, 8181)
    flow = FakeFlow(FakeMode("regular"), 8080, request)
    assert routes.RouteTable([OLLAMA]).route(flow) == "ollama"
    assert (request.scheme, request.host, request.port) == ("http", "localhost", 11434)


@pytest.mark.parametrize(("host", "port"), [("127.0.0.1", 9999), ("api.openai.com", 8181), ("10.0.0.8", 8181)])
def test_other_forward_requests_are_left_alone(host, port):
    request = FakeRequest("https", host, port)
    assert routes.RouteTable([OLLAMA]).route(FakeFlow(FakeMode("regular"), 8080, request)) == "forward"
    assert (request.scheme, request.host, request.port) == ("https", host, port)


def test_reverse_requests_are_named_by_listener_port_else_by_upstream():
    table = routes.RouteTable([OLLAMA])
    named = FakeFlow(
        FakeMode("reverse", "http://localhost:11434", "http"), 8181, FakeRequest("http", "localhost", 11434)
    )
    unnamed = FakeFlow(FakeMode("reverse", "api.openai.com"), 9000, FakeRequest("https", "api.openai.com", 443))
    assert table.route(named) == "ollama"
    assert table.route(unnamed) == "reverse:https://api.openai.com"
    assert table.names() == ["forward", "ollama"]


def test_litellm_keeps_to_the_model_map_it_ships_unless_the_user_says_otherwise():
    def env(environ: dict) -> dict:
        return client_env.client_environment(
            environ, proxy_url="http://127.0.0.1:1", ca_bundle=Path("/nonexistent"), controlled_hosts=[],
            mode="replay", notice_file=Path("/nonexistent"), base_urls={},
        )  # fmt: skip

    assert env({})["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env({"LITELLM_LOCAL_MODEL_COST_MAP": "False"})["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"
