"""The seal: an independent guard that keeps a replay run off the network, whatever the cassette addon does.

The cassette addon answers replay requests itself; if a bug of ours made it
forget one, mitmproxy would forward it. So this guard refuses, at the last
moment (`server_connect`), any upstream connection to a controlled host in
replay mode, and any connection to a non-loopback host outside the scope that
`cassette_allow_hosts` does not allow. It shares no state with the cassette
addon: it reads the options itself. It also refuses clients that are not on
this machine (`client_connected`), unless `cassette_allow_clients` lets them in.

Both hooks fail closed: an error inside them refuses the connection.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from mitmproxy import connection, ctx, exceptions
from mitmproxy.proxy import server_hooks

from ..core.hosts import HostScope, is_loopback
from ..core.printable import logger

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


class Seal:
    def __init__(self) -> None:
        self.exempt: set[tuple[str, int]] = set()
        """Loopback servers inside this proxy (timed replay) that a replayed flow is routed to."""
        self.mode = "replay"
        self.controlled = HostScope(["*"])
        self.allowed = HostScope([])
        self.networks: tuple = ()

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

    def client_connected(self, client: connection.Client) -> None:
        try:
            address = client_address(client.peername)
            if address is not None and (address.is_loopback or any(address in n for n in self.networks)):
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
            refusal = self.refusal(data.server)
        except Exception:
            refusal = "cassette: error in the replay seal; connection refused"
            log.exception(refusal)
        if refusal:
            data.server.error = refusal
            log.error(refusal)

    def refusal(self, server: connection.Server) -> str | None:
        """Why this upstream connection must not be made, or None."""
        if self.mode != "replay":
            return None
        host, port = server.address[0], server.address[1]
        if (host, port) in self.exempt:
            return None
        for name in {host, server.sni} - {None}:
            if name in self.controlled:
                return f"cassette: replay mode: refused an upstream connection to {name}:{port}, a cassette host"
            if not is_loopback(name) and name not in self.allowed:
                return (
                    f"cassette: replay mode: refused an upstream connection to {name}:{port}, outside the scope; "
                    "allow it with cassette_allow_hosts"
                )
        return None
