"""Which hosts are under cassette control, checked on the one normal form of a host name (key.normal_host).

`API.OpenAI.com.` and `api.openai.com` are the same host to DNS, so they must
be the same host to the scope check and to the key: every host goes through
`normal_host` before either.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable

from .key import normal_host


def is_loopback(host: str) -> bool:
    """A literal loopback address (127.0.0.0/8, ::1, ::ffff:127.x) or the bare name `localhost`; decided from the
    text alone, never by resolving it.

    A name is only as local as its resolver makes it: `exfil.localhost`, a hosts
    entry or a docker-compose service name may point anywhere, and asking the
    resolver would itself send the name to the network. So no other name counts:
    a replay run refuses it like any host outside the scope unless
    `cassette_allow_hosts` lists it.
    """
    host = normal_host(host).strip("[]")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


class HostScope:
    """A set of host globs (`*` for every host) checked against normal host names."""

    def __init__(self, globs: Iterable[str]) -> None:
        self.globs = tuple(normal_host(g) for g in globs if g.strip())
        # One regular expression for every glob: the scope is checked on every request.
        self._pattern = re.compile("|".join(fnmatch.translate(g) for g in self.globs) or r"(?!)")

    def __contains__(self, host: str) -> bool:
        return self._pattern.match(normal_host(host)) is not None
