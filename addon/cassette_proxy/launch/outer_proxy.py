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
from typing import Any

from ..core import option_table
from .control_client import CONTROL_TOKEN_VAR, ControlClient
from .launcher import RunningProxy, Settings

OUTER_PROXY_VAR = "CASSETTE_RUN_PROXY"


Described = dict[str, Any]
"""What the plugin compares: the settings that decide which cassette answers a request, in normal form. Every option
of the table (core/option_table.py) that is part of the fingerprint and that the plugin sets, by its short name
(mode, dir, ignore, …), and `routes`: reverse route name → upstream origin and base path."""

COMPARED = tuple(option for option in option_table.in_fingerprint() if option_table.plugin_sets(option))

FLAGS = {option.short: option.flag.spelling for option in COMPARED if option.flag} | {"routes": "--reverse"}
"""The `cassette run` flag behind each setting, for the message that asks for it."""


def described(settings: Settings) -> Described:
    return {
        **option_table.fingerprint_of(settings, COMPARED),
        "routes": {r.name: r.origin + r.base_path for r in settings.reverse},
    }


def run_flags(settings: Settings) -> list[str]:
    """The `cassette run` flags that start a proxy `described` as `settings` is (mode, folder, hosts, routes, key
    and telemetry settings, allowed hosts): for a plugin that runs its suite inside `cassette run --isolate`."""
    flags = []
    for option in option_table.in_fingerprint():
        if option.flag is not None and option.setting is not None:
            flags += option_table.flag_arguments(option, getattr(settings, option.setting))
    for route in settings.reverse:
        flags += [
            "--reverse",
            f"{route.name}={route.origin}{route.base_path}" + (f"@{route.port}" if route.port else ""),
        ]
    return flags


def describe(proxy: RunningProxy) -> str:
    """The value of CASSETTE_RUN_PROXY for the command `cassette run` starts."""
    return json.dumps({"url": proxy.url, "base_urls": proxy.base_urls, "settings": described(proxy.settings)})


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
        mine, theirs = described(suite), self.settings
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
        settings = dict(data["settings"])
        if settings.keys() != FLAGS.keys():
            raise TypeError(f"settings {sorted(settings)}, not {sorted(FLAGS)}")
        return OuterProxy(data["url"], dict(data["base_urls"]), settings, environ[CONTROL_TOKEN_VAR])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"${OUTER_PROXY_VAR} does not describe a proxy this plugin can use ({type(e).__name__}: {e}): the "
            "`cassette` command around pytest and the plugin must come from the same version of cassette-proxy"
        ) from None
