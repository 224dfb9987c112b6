"""The seal: an independent guard that keeps a replay run off the network, whatever the cassette addon does.

The cassette addon answers replay requests itself; if a bug of ours made it
forget one, mitmproxy would forward it. So this guard refuses, at the last
moment (`server_connect`), any upstream connection to a controlled host in
replay mode, and any connection to a non-loopback host outside the scope that
`cassette_allow_hosts` does not allow. It shares no state with the cassette
addon: it reads the options itself. It also refuses clients that are not on
this machine (`client_connected`), unless `cassette_allow_clients` lets them in, and local clients of
another user (their socket's owner, core/socket_owner.py).

It judges the real target, never the next hop. In every mode but one,
`server_connect` is given that target (the CONNECT's, the request's, the SOCKS
or transparent destination, the reverse upstream). Through an upstream proxy
(`--mode upstream:`) it is given only the proxy's address: mitmproxy tunnels to
the target inside that connection. So there the seal notes every target a client
connection names (its CONNECT, each request's authority, before and after the
addon's own hook) and lets a connection to the upstream proxy be made only if
every one of them may be reached. mitmproxy's dns and wireguard modes answer
name queries themselves (its dns_resolver addon, before any script's hook), so
they cannot be sealed: replay refuses to run in them.

Both hooks fail closed: an error inside them refuses the connection.
"""

from __future__ import annotations

import ipaddress
import os
import weakref
from collections.abc import Sequence

from mitmproxy import connection, ctx, exceptions, http
from mitmproxy.proxy import mode_specs, server_hooks

from ..core import socket_owner
from ..core.keys.hosts import HostScope, is_loopback
from ..core.output import logger

log = logger(__name__)


def parse_networks(specs: Sequence[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """`10.0.0.0/8`, `172.17.0.2` (a single address), `::1/128`; raises ValueError naming the bad entry."""
    networks = []
    for spec in specs:
        try:
            networks.append(ipaddress.ip_network(spec.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{spec!r} is not a network or address, e.g. 172.16.0.0/12 or 10.1.2.3") from None
    return tuple(networks)


def client_address(peername: tuple | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not peername:
        return None
    try:
        address = ipaddress.ip_address(str(peername[0]).split("%", 1)[0])
    except ValueError:
        return None
    return getattr(address, "ipv4_mapped", None) or address


SEALED_MODES = frozenset({"regular", "reverse", "upstream", "socks5", "transparent", "local", "tun", "osproxy"})
"""mitmproxy modes whose every upstream connection the seal can judge by its real target; any other (dns, wireguard,
a mode added after this was written) refuses replay."""


def mode_type(spec: str) -> str | None:
    """`upstream` for `upstream:http://proxy:3128@8080`; None for a spec mitmproxy would not parse."""
    try:
        return mode_specs.ProxyMode.parse(spec).type_name
    except ValueError:
        return None


def foreign_owner(client: connection.Client) -> str | None:
    """Why a loopback client is refused: its socket is not this proxy's user's (core/socket_owner.py); None when it
    is, or where the system cannot say (not Linux). Every user of the machine can reach 127.0.0.1: a proxy, warm
    or not, serves only the user who started it, and its control channel with it."""
    if not socket_owner.SUPPORTED:
        return None
    owner = socket_owner.socket_owner(client.peername, client.sockname)
    if owner == os.getuid():
        return None
    who = f"uid {owner}" if owner is not None else "a socket already gone"
    return (
        f"cassette: refused a local client of {who}: this proxy serves only its own user (uid {os.getuid()}); "
        "each user starts a proxy of their own"
    )


class Seal:
    def __init__(self) -> None:
        self.exempt: set[tuple[str, int]] = set()
        """Loopback servers inside this proxy (timed replay) that a replayed flow is routed to."""
        self.mode = "replay"
        self.controlled = HostScope(["*"])
        self.allowed = HostScope([])
        self.networks: tuple = ()
        self.upstream = False
        """A listener runs in upstream mode: the targets each client names are noted (see the module's docstring)."""
        self.targets: weakref.WeakKeyDictionary[connection.Client, set[tuple[str, int]]] = weakref.WeakKeyDictionary()
        """What each client connection has named (CONNECT targets, request authorities): forgotten with the client."""

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        self.mode = opts.cassette_mode
        self.controlled = HostScope(opts.cassette_hosts)
        self.allowed = HostScope(opts.cassette_allow_hosts)
        if "cassette_allow_clients" in updated:
            try:
                self.networks = parse_networks(opts.cassette_allow_clients)
            except ValueError as e:
                raise exceptions.OptionsError(f"cassette_allow_clients: {e}") from None
        types = {spec: mode_type(spec) for spec in (opts.mode if "mode" in opts else ["regular"])}
        unsealed = [spec for spec, kind in types.items() if kind not in SEALED_MODES]
        if self.mode == "replay" and unsealed:
            raise exceptions.OptionsError(
                f"cassette_mode=replay cannot run in mitmproxy's mode {unsealed[0]!r}: its upstream traffic (name "
                "queries mitmproxy resolves itself) cannot be sealed off the network. Replay in regular, reverse, "
                "upstream, socks5, transparent, local or tun mode, or record in this one"
            )
        self.upstream = "upstream" in types.values()

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """A client's CONNECT: its target is what an upstream-mode tunnel leads to."""
        if self.upstream:
            self.targets.setdefault(flow.client_conn, set()).add((flow.request.host, flow.request.port))

    def request(self, flow: http.HTTPFlow) -> None:
        """A request's authority, as the addon got it and as it left it (a route may have rewritten it)."""
        if self.upstream:
            self.targets.setdefault(flow.client_conn, set()).add((flow.request.host, flow.request.port))

    def client_connected(self, client: connection.Client) -> None:
        try:
            address = client_address(client.peername)
            if address is not None and address.is_loopback:
                if (refusal := foreign_owner(client)) is None:
                    return
                client.error = "cassette: client refused: another user's"
                log.warning(refusal)
                return
            if address is not None and any(address in n for n in self.networks):
                return
            client.error = "cassette: client refused"
            log.warning(
                f"cassette: refused a client from {address or client.peername}: only this machine may use the proxy; "
                "to serve other hosts (a container network), list their networks in cassette_allow_clients "
                "(e.g. --set cassette_allow_clients=172.16.0.0/12)"
            )
        except Exception:
            client.error = "cassette: client refused (error in the client check)"
            log.exception("cassette: error while checking a client; refused it")

    def server_connect(self, data: server_hooks.ServerConnectionHookData) -> None:
        try:
            refusal = self.refusal(data.server, data.client)
        except Exception:
            refusal = "cassette: error in the replay seal; connection refused"
            log.exception(refusal)
        if refusal:
            data.server.error = refusal
            log.error(refusal)

    def refusal(self, server: connection.Server, client: connection.Client | None = None) -> str | None:
        """Why this upstream connection must not be made, or None."""
        if self.mode != "replay":
            return None
        if server.address is None:
            return "cassette: replay mode: refused an upstream connection with no address"
        host, port = server.address[0], server.address[1]
        if (host, port) in self.exempt:
            return None
        proxy_mode = getattr(client, "proxy_mode", None)
        if (
            client is not None
            and isinstance(proxy_mode, mode_specs.UpstreamMode)
            and (host, port) == proxy_mode.address
        ):
            return self._tunnel_refusal(client, host, port)
        for name in dict.fromkeys(name for name in (host, server.sni) if name):
            if refused := self._target_refusal(name, port):
                return refused
        return None

    def _tunnel_refusal(self, client: connection.Client, host: str, port: int) -> str | None:
        """A connection to the upstream proxy carries every target its client named: each must be reachable."""
        via = f" (through the upstream proxy {host}:{port})"
        targets = self.targets.get(client)
        if not targets:
            return f"cassette: replay mode: refused a connection to the upstream proxy {host}:{port}: no target named"
        for name, target_port in sorted(targets):
            if refused := self._target_refusal(name, target_port):
                return refused + via
        return None

    def _target_refusal(self, name: str, port: int) -> str | None:
        if name in self.controlled:
            return f"cassette: replay mode: refused an upstream connection to {name}:{port}, a cassette host"
        if not is_loopback(name) and name not in self.allowed:
            return (
                f"cassette: replay mode: refused an upstream connection to {name}:{port}, outside the scope; "
                "allow it with cassette_allow_hosts"
            )
        return None
