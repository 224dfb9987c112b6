"""In-process tests of the addon's hooks (mitmproxy's taddons/tflow): what a bug of ours, an out-of-scope host
or a stranger can make the proxy do. No mitmdump process: each test calls the hooks the way mitmproxy would."""

from __future__ import annotations

import ipaddress
import json
import socket

import pytest
from cassette_proxy.proxy.seal import Seal
from in_process import Addon
from mitmproxy import connection, exceptions, http
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.proxy import server_hooks
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow
from second_user import NOBODY, accepted_from


def chat_flow(host: str = "api.openai.com", body: dict | None = None) -> object:
    flow = tflow.tflow()
    flow.request.method = "POST"
    flow.request.scheme, flow.request.host, flow.request.port = "https", host, 443
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["content-type"] = "application/json"
    flow.request.content = json.dumps(body or {"model": "gpt-4o-mini", "messages": []}).encode()
    return flow


def configure(tctx, addon: Addon, **options) -> None:
    """Set options as `--set` would, then configure the addon with every option, as mitmproxy does at start."""
    tctx.options.update(**options)
    addon.configure(set(tctx.options.keys()))


@pytest.fixture
def proxy(tmp_path):
    """The addon in mitmproxy's test context; `proxy(flow, **options)` configures it and runs the request hook."""
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:

        def run(flow, break_key: bool = False, **options) -> Addon:
            configure(tctx, addon, cassette_dir=str(tmp_path / "cassettes"), **options)
            if break_key:
                addon.keys.keyed = lambda facts: 1 / 0
            tctx.master.event_loop.run_until_complete(addon.request(flow))
            return addon

        yield run


def error_of(flow) -> dict:
    assert flow.response.headers["content-type"] == "application/json"
    assert flow.response.headers["x-should-retry"] == "false"
    return json.loads(flow.response.content)["error"]


@pytest.mark.parametrize("mode", ["replay", "record", "update"])
def test_a_bug_in_the_request_hook_answers_500_and_forwards_nothing(proxy, mode):
    flow = chat_flow()
    addon = proxy(flow, break_key=True, cassette_mode=mode)
    assert flow.response is not None and flow.response.status_code == 500  # answered: mitmproxy will not forward
    error = error_of(flow)
    assert error["type"] == "cassette_error" and "ZeroDivisionError" in error["message"]
    assert not flow.intercepted
    assert addon.report.upstream == 0
    assert [e.kind for e in addon.report.errors] == ["cassette_error"]
    assert addon.report.strict_failures() == ["1 errors"]


@pytest.mark.parametrize("host", ["exfil.localhost", "db", "localhost.localdomain"])
def test_a_name_that_only_looks_local_is_refused_offline_in_replay(proxy, host):
    flow = chat_flow(host)
    addon = proxy(flow)
    assert flow.response.status_code == 403
    assert error_of(flow)["type"] == "cassette_offline"
    assert [entry["host"] for entry in addon.report.offline] == [host]


def test_an_out_of_scope_host_is_refused_offline_in_replay(proxy):
    flow = chat_flow("api.cerebras.example")
    addon = proxy(flow)
    assert flow.response.status_code == 403
    assert error_of(flow)["type"] == "cassette_offline"
    assert addon.report.offline == [
        {"host": "api.cerebras.example", "method": "POST", "url": "https://api.cerebras.example/v1/chat/completions"}
    ]
    assert addon.report.passthrough == 0


@pytest.mark.parametrize(
    ("host", "options"),
    [
        ("127.0.0.1", {}),
        ("localhost", {}),
        ("cdn.images.example", {"cassette_allow_hosts": ["*.images.example"]}),
        ("api.cerebras.example", {"cassette_mode": "record"}),
    ],
)
def test_loopback_allowed_hosts_and_other_modes_pass_through(proxy, host, options):
    flow = chat_flow(host)
    addon = proxy(flow, **options)
    assert flow.response is None
    assert dict(addon.report.passthrough_hosts) == {host: 1}


@pytest.mark.parametrize("spelling", ["API.OpenAI.com.", "api.openai.com.", "Api.OPENAI.com"])
def test_a_host_spelled_otherwise_is_still_under_cassette_control(proxy, spelling):
    plain = chat_flow("api.openai.com")
    proxy(plain)
    flow = chat_flow(spelling)
    addon = proxy(flow)
    assert flow.response.status_code == 409  # a miss, never a passthrough
    assert addon.report.misses[0]["cassette"] == json.loads(plain.response.content)["error"]["cassette"]


def server_data(host: str, port: int = 443, sni: str | None = None) -> server_hooks.ServerConnectionHookData:
    server = connection.Server(address=(host, port))
    server.sni = sni
    return server_hooks.ServerConnectionHookData(server=server, client=tflow.tclient_conn())


@pytest.fixture
def listener():
    """A listening socket on 127.0.0.1, for real loopback connections whose owner the seal asks the kernel for."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


@pytest.fixture
def seal():
    """A seal configured with `seal(**options)` in mitmproxy's test context (the addon declares its options)."""
    addon, seal = Addon(), Seal()
    with taddons.context(addon, Proxyserver()) as tctx:

        def configured(**options) -> Seal:
            configure(tctx, addon, **options)
            seal.configure(set(tctx.options.keys()))
            return seal

        yield configured


@pytest.mark.parametrize(
    ("host", "sni", "mode", "refused"),
    [
        ("api.openai.com", None, "replay", True),
        ("API.OPENAI.COM.", None, "replay", True),
        ("203.0.113.7", "api.anthropic.com", "replay", True),  # the name the TLS handshake would use counts too
        ("api.cerebras.example", None, "replay", True),
        ("127.0.0.1", None, "replay", False),
        ("localhost", None, "replay", False),
        ("exfil.localhost", None, "replay", True),  # a name resolves wherever its resolver says
        ("127.0.0.1", "exfil.localhost", "replay", True),
        ("api.openai.com", None, "record", False),
        ("api.openai.com", None, "off", False),
    ],
)
def test_the_seal_refuses_upstream_connections_in_replay(seal, host, sni, mode, refused):
    data = server_data(host, sni=sni)
    seal(cassette_mode=mode).server_connect(data)
    assert bool(data.server.error) is refused


UPSTREAM = "upstream:http://127.0.0.1:3128"


def through_upstream_proxy(
    seal: Seal, *named: tuple[str, int], connect: bool = True
) -> server_hooks.ServerConnectionHookData:
    """A client of the upstream-mode listener that named these targets (CONNECT, or requests), then mitmproxy's
    connection to the upstream proxy for it: all `server_connect` is given."""
    client = tflow.tclient_conn()
    client.proxy_mode = ProxyMode.parse(UPSTREAM)
    for host, port in named:
        flow = tflow.tflow(client_conn=client)
        flow.request.host, flow.request.port = host, port
        if connect:
            flow.request.method = "CONNECT"
            seal.http_connect(flow)
        else:
            seal.request(flow)
    return server_hooks.ServerConnectionHookData(server=connection.Server(address=("127.0.0.1", 3128)), client=client)


@pytest.mark.parametrize(
    ("named", "connect", "allowed", "refused"),
    [
        ([("api.openai.com", 22)], True, [], True),  # a raw CONNECT to a cassette host, on any port
        ([("api.openai.com", 443)], True, [], True),
        ([("evil.example", 443)], True, [], True),
        ([("exfil.localhost", 80)], False, [], True),
        ([], True, [], True),  # a tunnel no request asked for
        ([("cdn.images.example", 443)], True, ["*.images.example"], False),
        ([("127.0.0.1", 8080)], False, [], False),
        ([("cdn.images.example", 443), ("api.openai.com", 443)], False, ["*.images.example"], True),
    ],
)
def test_through_an_upstream_proxy_the_seal_judges_the_targets_not_the_proxy(seal, named, connect, allowed, refused):
    sealed = seal(cassette_mode="replay", mode=[UPSTREAM], cassette_allow_hosts=allowed)
    data = through_upstream_proxy(sealed, *named, connect=connect)
    sealed.server_connect(data)
    assert bool(data.server.error) is refused, data.server.error
    if refused and named:
        assert "through the upstream proxy 127.0.0.1:3128" in data.server.error


@pytest.mark.parametrize(
    "mode", ["regular", UPSTREAM, "reverse:https://api.openai.com", "reverse:dns://9.9.9.9", "socks5", "transparent"]
)
def test_replay_runs_in_every_mode_the_seal_covers(mode):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.configure(addon, mode=[mode], cassette_mode="replay")


@pytest.mark.parametrize("mode", ["dns", "wireguard"])
def test_replay_refuses_to_run_in_a_mode_whose_name_queries_mitmproxy_answers_itself(mode):
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.configure(addon, mode=[mode], cassette_mode="record")  # record needs no seal
        with pytest.raises(
            exceptions.OptionsError, match=f"cassette_mode=replay cannot run in mitmproxy's mode '{mode}'"
        ):
            tctx.configure(addon, cassette_mode="replay")


def test_the_seal_fails_closed_when_its_own_check_breaks(seal, monkeypatch):
    sealed = seal(cassette_mode="replay")
    monkeypatch.setattr(sealed, "refusal", lambda server, client: 1 / 0)
    data = server_data("127.0.0.1")
    sealed.server_connect(data)
    assert data.server.error


@pytest.mark.parametrize(
    ("peer", "allowed", "refused"),
    [
        ("127.0.0.1", [], False),
        ("::1", [], False),
        ("::ffff:127.0.0.1", [], False),
        ("192.0.2.10", [], True),
        ("172.18.0.5", ["172.16.0.0/12"], False),
        ("172.18.0.5", ["10.0.0.0/8"], True),
    ],
)
def test_only_local_clients_unless_their_network_is_allowed(seal, peer, allowed, refused):
    client = tflow.tclient_conn()
    family = socket.AF_INET6 if peer == "::1" else socket.AF_INET
    with socket.socket(family) as listener:
        listener.bind(("::1" if peer == "::1" else "127.0.0.1", 0))
        listener.listen()
        with accepted_from(listener, None) as (real_peer, own):
            # A loopback peer is a real connection of this user's (the seal asks the kernel who owns it); a
            # mapped one is what a dual-stack listener sees of it.
            mapped = peer.startswith("::ffff:")
            client.peername = (peer, real_peer[1] if ipaddress.ip_address(peer).is_loopback or mapped else 50000)
            client.sockname = (peer, own[1]) if mapped else own
            seal(cassette_allow_clients=allowed).client_connected(client)
    assert bool(client.error) is refused


@pytest.mark.parametrize("uid", [None, NOBODY], ids=["the proxy's user", "another user"])
def test_a_local_client_of_another_user_is_refused(seal, listener, uid, caplog):
    client = tflow.tclient_conn()
    with accepted_from(listener, uid) as (client.peername, client.sockname):
        seal(cassette_mode="record").client_connected(client)
    assert bool(client.error) is (uid is not None)
    if uid is not None:
        assert f"uid {NOBODY}" in caplog.text and "serves only its own user" in caplog.text


def test_a_local_client_whose_socket_is_gone_is_refused(seal, listener):
    client = tflow.tclient_conn()
    client.peername, client.sockname = ("127.0.0.1", 1), listener.getsockname()
    seal().client_connected(client)
    assert client.error


def test_a_bad_client_network_stops_the_proxy_naming_the_option():
    addon = Addon()
    with taddons.context(addon, Proxyserver()) as tctx, pytest.raises(Exception, match="cassette_allow_clients"):
        tctx.configure(addon, cassette_allow_clients=["not-a-network"])


@pytest.mark.parametrize("spelling", ["oauth2.googleapis.com", "OAuth2.GoogleAPIs.com."])
def test_a_token_exchange_spelled_otherwise_is_still_answered_offline(proxy, spelling):
    flow = tflow.tflow()
    flow.request = http.Request.make(
        "POST",
        f"https://{spelling}/token",
        b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=x.y.z",
        {"content-type": "application/x-www-form-urlencoded"},
    )
    addon = proxy(flow)
    assert flow.response.status_code == 200
    assert json.loads(flow.response.content)["access_token"].startswith("cassette-placeholder-")
    assert addon.report.token_exchanges == 1 and addon.report.upstream == 0
