"""A run the proxy saw nothing of: a warning naming the likely cause, and a `--strict` failure.

A record run whose client went around the proxy ended `0 recorded`, exit 0, and
the user found out in CI; a Node 20 suite without undici replayed `0 hits, 0
misses` and passed the same way. When no request for a cassette host reached the
proxy (record, update: nothing recorded or replayed; replay: no hit and no miss),
`cassette run` and the plugin say so with what the environment shows of the
cause, and `cassette run --strict` fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from ..core.keys.hosts import HostScope, is_loopback
from ..core.report import Report
from .client_env import ROUTE_VARIABLES

BASE_URL_VARIABLES = sorted(
    {variable for _, variables in ROUTE_VARIABLES.values() for variable, _ in variables}
    | {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"}
)
"""Variables that send an SDK somewhere of their own: one pointing around the proxy explains a silent run."""

STRICT_FAILURE = "no request for a controlled host reached the proxy"


def saw_nothing(report: Report) -> bool:
    """No request for a cassette host reached the proxy: record and update recorded and replayed nothing, replay
    neither hit nor missed. `off` passes everything through and expects nothing."""
    if report.mode == "off":
        return False
    if report.mode == "replay":
        return report.hits == 0 and not report.misses
    # A miss, in any mode, is a request that reached the proxy: never a silent run.
    return report.hits == 0 and report.recorded == 0 and report.upstream == 0 and not report.misses


def warning(
    report: Report,
    environ: Mapping[str, str],
    hosts: Sequence[str],
    node_bypassed: bool = False,
    hosts_flag: str = "--hosts",
) -> str | None:
    """The warning for a run that saw nothing (None otherwise): what it means, then each likely cause.

    `environ`: the command's environment before the proxy's variables; `hosts`: the cassette hosts; `node_bypassed`:
    the Node preload found no undici; `hosts_flag`: how the user adds a host.
    """
    if not saw_nothing(report):
        return None
    what = "nothing was recorded or replayed" if report.mode != "replay" else "no request hit or missed a cassette"
    lines = [
        f"cassette: warning: no request for a controlled host reached the proxy in this {report.mode} run: {what}."
    ]
    causes = []
    if node_bypassed:
        causes.append(
            "Node's fetch ignored the proxy (this Node has no undici to route it; see the notice above): "
            "`npm install --save-dev undici@6`, or Node >= 22.21"
        )
    scope = HostScope(hosts)
    for name in BASE_URL_VARIABLES:
        value = environ.get(name, "")
        host = urlsplit(value).hostname if "://" in value else None
        if host is None:
            continue
        if is_loopback(host):
            causes.append(f"{name}={value} sends clients straight to a local server (loopback stays in NO_PROXY): "
                          f"record it through a reverse route, e.g. `--reverse NAME={value}`")  # fmt: skip
        elif host not in scope:
            causes.append(f"{name}={value} sends clients to {host}, outside cassette_hosts: add it ({hosts_flag})")
    if report.passthrough_hosts:
        passed = ", ".join(f"{host} ({n})" for host, n in sorted(report.passthrough_hosts.items()))
        causes.append(
            f"requests went to hosts outside cassette_hosts: {passed}; if one is your model API, add it ({hosts_flag})"
        )
    causes.append(
        "a client that ignores the proxy variables: httpx or requests built with trust_env=False or a proxy or "
        "transport of its own, aiohttp without trust_env=True, a conftest that deletes HTTPS_PROXY or the base-URL "
        "variables"
    )
    if report.mode == "replay":
        causes.append("or these tests make no model call (a -k selection, skipped tests): then nothing is wrong")
    lines.append("cassette:   likely causes:")
    lines += [f"cassette:   - {cause}" for cause in causes]
    return "\n".join(lines)
