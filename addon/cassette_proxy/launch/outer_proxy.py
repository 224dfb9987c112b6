"""One proxy when `cassette run` wraps a suite whose pytest plugin would start its own.

`cassette run -- pytest` on a suite with `cassette = true` started two proxies:
the plugin's took every request (its variables replaced the outer ones), the
outer one's summary said `0 hits`, and the run paid for two starts. So `cassette
run` describes its proxy to the command (`CASSETTE_RUN_PROXY`), and the plugin
uses that proxy instead of starting one, announcing its tests to it. Settings
that would make the outer proxy answer otherwise than the suite expects (another
cassette folder, other key settings) stop the session with what to pass to
`cassette run`, instead of a run of misses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.defaults import DEFAULT_HOSTS, DEFAULT_KEY_HEADERS
from ..core.frameworks import DEFAULT_FRAMEWORKS
from .control_client import CONTROL_TOKEN_VAR, ControlClient
from .launcher import RunningProxy, Settings

OUTER_PROXY_VAR = "CASSETTE_RUN_PROXY"


@dataclass(frozen=True)
class Described:
    """What the plugin compares: the settings that decide which cassette answers a request."""

    mode: str
    dir: str
    ignore: list[str]
    key_headers: list[str]
    ignore_values: list[str]
    frameworks: list[str]
    hosts: list[str]
    telemetry: bool
    telemetry_sinks: list[str]
    routes: dict[str, str]
    """Reverse route name → upstream origin and base path."""


FLAGS = {
    "mode": "--mode",
    "dir": "--dir",
    "ignore": "--ignore",
    "key_headers": "--key-header",
    "ignore_values": "--ignore-value",
    "frameworks": "--frameworks",
    "hosts": "--hosts",
    "telemetry": "--no-telemetry",
    "telemetry_sinks": "--telemetry-sink",
    "routes": "--reverse",
}
"""The `cassette run` flag behind each setting, for the message that asks for it."""


def described(settings: Settings) -> Described:
    return Described(
        mode=settings.mode,
        dir=str(Path(settings.cassette_dir).resolve()),
        ignore=sorted(p.strip() for p in settings.ignore if p.strip()),
        key_headers=sorted({h.strip().lower() for h in [*DEFAULT_KEY_HEADERS, *settings.key_headers] if h.strip()}),
        ignore_values=sorted(settings.ignore_values),
        frameworks=sorted(DEFAULT_FRAMEWORKS if settings.frameworks is None else settings.frameworks),
        hosts=sorted(settings.hosts or DEFAULT_HOSTS),  # reverse targets join the scope with their routes
        telemetry=settings.telemetry,
        telemetry_sinks=sorted(settings.telemetry_sinks),
        routes={r.name: r.origin + r.base_path for r in settings.reverse},
    )


def run_flags(settings: Settings) -> list[str]:
    """The `cassette run` flags that start a proxy `described` as `settings` is (mode, folder, hosts, routes, key
    and telemetry settings): for a plugin that runs its suite inside `cassette run --isolate`."""
    flags = ["--mode", settings.mode, "--dir", str(Path(settings.cassette_dir).resolve())]
    for host in settings.hosts:
        flags += ["--hosts", host]
    for route in settings.reverse:
        flags += [
            "--reverse",
            f"{route.name}={route.origin}{route.base_path}" + (f"@{route.port}" if route.port else ""),
        ]
    for name, values in (("--ignore", settings.ignore), ("--key-header", settings.key_headers)):
        for value in values:
            flags += [name, value]
    for value in settings.ignore_values:
        flags += ["--ignore-value", value]
    if settings.frameworks is not None:
        flags += ["--frameworks", *settings.frameworks]
    if not settings.telemetry:
        flags.append("--no-telemetry")
    for sink in settings.telemetry_sinks:
        flags += ["--telemetry-sink", sink]
    for host in settings.allow_hosts:
        flags += ["--allow-host", host]
    return flags


def describe(proxy: RunningProxy) -> str:
    """The value of CASSETTE_RUN_PROXY for the command `cassette run` starts."""
    return json.dumps({"url": proxy.url, "base_urls": proxy.base_urls, "settings": asdict(described(proxy.settings))})


class OuterProxy:
    """The proxy of an enclosing `cassette run`, in the place of the one the plugin would start.

    The command's environment is already wired to it, so `client_env` changes nothing; its report is
    `cassette run`'s to print, so `stop` has none.
    """

    def __init__(self, url: str, base_urls: dict[str, str], settings: Described, token: str) -> None:
        self.url = url
        self.base_urls = base_urls
        self.settings = settings
        self.token = token
        self._control: ControlClient | None = None

    def control(self) -> ControlClient:
        if self._control is None:
            # Named: xdist workers share this proxy, each request names its worker's test (its carrier).
            self._control = ControlClient(self.url, self.token, runner=str(os.getpid()))
        return self._control

    def client_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        return dict(environ)

    def wait_ready(self) -> None:
        """Up already: `cassette run` started it."""

    def stop(self) -> None:
        if self._control is not None:
            self._control.close()

    def conflicts(self, suite: Settings) -> list[str]:
        """What the suite asks for that this proxy does not do, one line each: `name: suite's → cassette run's`.

        Routes: the suite's must all be there (the outer proxy may have more).
        """
        mine, theirs = asdict(described(suite)), asdict(self.settings)
        out = []
        for name, flag in FLAGS.items():
            wanted, given = mine[name], theirs[name]
            if name == "routes":
                missing = {n: u for n, u in wanted.items() if given.get(n) != u}
                if missing:
                    routes = " ".join(f"{flag} {n}={u}" for n, u in missing.items())
                    out.append(f"reverse routes: the suite's cassette_reverse needs {routes}")
            elif wanted != given:
                out.append(f"{name}: {wanted!r} in the suite, {given!r} in `cassette run` ({flag})")
        return out


def outer_proxy(environ: Mapping[str, str] | None = None) -> OuterProxy | None:
    """The enclosing `cassette run`'s proxy, or None when there is none; ValueError for a description this version
    cannot read (a `cassette` command of another version around this plugin)."""
    environ = os.environ if environ is None else environ
    if not environ.get(OUTER_PROXY_VAR):
        return None
    try:
        data = json.loads(environ[OUTER_PROXY_VAR])
        return OuterProxy(
            data["url"], dict(data["base_urls"]), Described(**data["settings"]), environ[CONTROL_TOKEN_VAR]
        )
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"${OUTER_PROXY_VAR} does not describe a proxy this plugin can use ({type(e).__name__}: {e}): the "
            "`cassette` command around pytest and the plugin must come from the same version of cassette-proxy"
        ) from None
