"""Routes: which way a request reached the proxy (the forward listener, or a named reverse listener).

Two jobs, both on every request before it is keyed:

- Name the route, so the report can count requests per route: a suite whose reverse route is silently
  bypassed (its base-URL variable deleted by a conftest, so every call takes the forward proxy) shows
  `forward 12, openai 0` instead of nothing.
- Undo a detour: a client told to use a reverse listener (`OLLAMA_BASE_URL=http://127.0.0.1:PORT`) may
  still send that request through the forward proxy (NO_PROXY no longer names loopback once a loopback
  upstream is under cassette control, or the client ignores NO_PROXY). Keyed as it comes, the key would
  name the listener's random port and miss on the next run; forwarded as it comes, the proxy would call
  itself. So a forward request addressed to one of this proxy's own reverse listeners is rewritten to
  that listener's upstream, exactly as the listener itself would have done.

Pure apart from reading and rewriting the flow's attributes: no mitmproxy import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ...core.option_table import route_names as parse_route_names  # noqa: F401 (tests read it here)

FORWARD = "forward"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class ReverseListener:
    """One of this proxy's reverse listeners: the port it listens on, the upstream it stands for, its route name."""

    port: int
    scheme: str
    host: str
    upstream_port: int
    name: str


def route_label(origin: str) -> str:
    """A reverse listener nobody named (mitmdump started by hand): its upstream, which is stable across runs."""
    return f"reverse:{origin}"


class RouteTable:
    def __init__(self, listeners: Iterable[ReverseListener] = ()) -> None:
        self.by_port = {listener.port: listener for listener in listeners}

    @classmethod
    def of_servers(cls, servers: Iterable, names: dict[int, str]) -> RouteTable:
        """The table of mitmproxy's running servers (`proxyserver.servers`); `names` from parse_route_names()."""
        listeners = []
        for server in servers:
            mode = server.mode
            if mode.type_name != "reverse":
                continue
            origin = mode.data if "://" in mode.data else f"{mode.scheme}://{mode.data}"
            for _, port, *_ in server.listen_addrs:
                name = names.get(port) or route_label(origin)
                listeners.append(ReverseListener(port, mode.scheme, mode.address[0], mode.address[1], name))
        return cls(listeners)

    def names(self) -> list[str]:
        """Every route this proxy serves, for the report to list even when no request took it."""
        return [FORWARD, *dict.fromkeys(listener.name for listener in self.by_port.values())]

    def route(self, flow) -> str:
        """The route of `flow`; a forward request for one of our reverse listeners is rewritten to its upstream."""
        mode = flow.client_conn.proxy_mode
        if mode.type_name == "reverse":
            sockname = flow.client_conn.sockname
            listener = self.by_port.get(sockname[1]) if sockname else None
            if listener:
                return listener.name
            return route_label(mode.data if "://" in mode.data else f"{mode.scheme}://{mode.data}")
        request = flow.request
        listener = self.by_port.get(request.port)
        if listener is None or request.host.lower() not in LOOPBACK:
            return FORWARD
        request.scheme = listener.scheme
        request.host = listener.host
        request.port = listener.upstream_port
        return listener.name
