"""Which hosts are under cassette control, checked on the one normal form of a host name (url.normal_host).

`API.OpenAI.com.` and `api.openai.com` are the same host to DNS, so they must
be the same host to the scope check and to the key: every host goes through
`normal_host` before either.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable

from .url import normal_host


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


def host_path_glob(entry: str, what: str, examples: str) -> tuple[str, str, str]:
    """A `HOST/PATH` glob (an extra telemetry sink, token endpoint): the entry stripped, its host lowercased, its
    path without the slash. ValueError naming the entry (as a `what`, with `examples` of the right form) when it
    has a scheme or lacks a host or a path: such a glob could match far more than meant."""
    glob = entry.strip()
    host, slash, path = glob.partition("/")
    if not slash or not host or "://" in glob or not path:
        raise ValueError(f"{entry!r} is not a {what}; write HOST/PATH without a scheme, e.g. {examples}")
    return glob, host.lower(), path


class HostScope:
    """Host globs (`*` for every host), each optionally narrowed to paths: `chatgpt.com/backend-api/codex/*`.

    `host in scope` asks whether any entry names the host (what the seal and NO_PROXY need: a connection is to a
    host, not a path); `covers(host, path)` whether a request is under cassette control.
    """

    def __init__(self, globs: Iterable[str]) -> None:
        entries = [g.strip() for g in globs if g.strip()]
        whole = [normal_host(e) for e in entries if "/" not in e]
        narrowed = [
            (normal_host(host), f"/{path}") for host, _, path in (e.partition("/") for e in entries if "/" in e)
        ]
        self.globs = (*whole, *(host for host, _ in narrowed))
        # One regular expression for every glob: the scope is checked on every request.
        self._pattern = _alternation(self.globs)
        self._whole = _alternation(whole)
        self._narrowed = [
            (re.compile(fnmatch.translate(host)), re.compile(fnmatch.translate(path))) for host, path in narrowed
        ]

    def __contains__(self, host: str) -> bool:
        return self._pattern.match(normal_host(host)) is not None

    def covers(self, host: str, path: str) -> bool:
        """Whether a request for `host` and `path` (its query aside) is under cassette control."""
        return self.covers_normal(normal_host(host), path)

    def covers_normal(self, host: str, path: str) -> bool:
        """`covers` for a host already through `url.normal_host` (the request hook has it: once per request)."""
        if self._whole.match(host) is not None:
            return True
        path = path.partition("?")[0]
        return any(h.match(host) and p.match(path) for h, p in self._narrowed)


def _alternation(globs: Iterable[str]) -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(g) for g in globs) or r"(?!)")
