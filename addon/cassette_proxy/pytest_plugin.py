"""pytest plugin: one cassette proxy per test session (per xdist worker), opt-in per suite.

Opt in for the whole suite with `cassette = true` in the pytest configuration:
the proxy then starts before collection, so SDK clients created at import time
already go through it. Or request the `cassette_proxy` fixture, which starts it
on first use. Either way this process's environment points every common client
at the proxy until the session ends.

Mode: --cassette-mode, else $CASSETTE_MODE, else replay.
Cassette folder: --cassette-dir, else $CASSETTE_DIR, else the `cassette_dir` setting (relative to the rootdir).
A miss fails the test that caused it through the SDK's own exception (a 409 it does not retry).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .core.defaults import DEFAULT_DIR, DIR_VAR, MODES
from .core.report import Report
from .launch import launcher

PROXY = pytest.StashKey[launcher.RunningProxy]()
ENVIRONMENT = pytest.StashKey[pytest.MonkeyPatch]()
REPORTS = pytest.StashKey[list[Report]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cassette", "cassette proxy: record and replay LLM API calls")
    group.addoption(
        "--cassette-mode", choices=MODES, default=None, help="Cassette mode; defaults to $CASSETTE_MODE, else replay."
    )
    group.addoption(
        "--cassette-dir",
        default=None,
        help="Cassette folder; defaults to $CASSETTE_DIR, else the cassette_dir setting.",
    )
    group.addoption(
        "--cassette-ignore", action="append", default=[], metavar="PATH",
        help="JSON body field left out of the key, on top of the cassette_ignore setting. Repeatable.",
    )  # fmt: skip
    group.addoption(
        "--cassette-key-header", action="append", default=[], metavar="NAME",
        help="Key header on top of the defaults and the cassette_key_headers setting. Repeatable.",
    )  # fmt: skip
    group.addoption(
        "--cassette-ignore-value", action="append", default=[], metavar="REGEX",
        help="Volatile value pattern or preset, on top of the cassette_ignore_values setting. Repeatable.",
    )  # fmt: skip
    parser.addini("cassette_ignore", "JSON body fields left out of the key (dotted paths), one a line.", "linelist")
    parser.addini("cassette_key_headers", "Key headers on top of the defaults, one a line.", "linelist")
    parser.addini(
        "cassette_ignore_values", "Volatile value patterns (regular expressions or presets), one a line.", "linelist"
    )
    parser.addini("cassette", "Start the cassette proxy for every session of this suite.", type="bool", default=False)
    parser.addini("cassette_dir", "Cassette folder, relative to the rootdir.", default=DEFAULT_DIR)
    parser.addini("cassette_hosts", "Hosts under cassette control (globs); empty: the known LLM API hosts.", "linelist")
    parser.addini(
        "cassette_reverse",
        "Reverse listeners as NAME=URL lines, given by the cassette_base_urls fixture.",
        "linelist",
        default=["openai=https://api.openai.com", "anthropic=https://api.anthropic.com"],
    )


def _settings(config: pytest.Config) -> launcher.Settings:
    folder = config.getoption("cassette_dir") or os.environ.get(DIR_VAR) or config.getini("cassette_dir")
    mode = launcher.resolve_mode(config.getoption("cassette_mode"), os.environ)
    reverse = [launcher.parse_reverse(spec) for spec in config.getini("cassette_reverse")]
    return launcher.Settings(
        mitmdump=launcher.find_mitmdump(None, os.environ),
        mode=mode,
        cassette_dir=config.rootpath / Path(folder).expanduser(),
        hosts=config.getini("cassette_hosts"),
        reverse=reverse,
        extra_args=launcher.extra_args_from(os.environ),
        ignore=[*config.getini("cassette_ignore"), *config.getoption("cassette_ignore")],
        key_headers=[*config.getini("cassette_key_headers"), *config.getoption("cassette_key_header")],
        ignore_values=[*config.getini("cassette_ignore_values"), *config.getoption("cassette_ignore_value")],
    )


def _start(config: pytest.Config) -> launcher.RunningProxy:
    """Start the session's proxy and point this process's environment at it."""
    if PROXY not in config.stash:
        try:
            proxy = launcher.start(_settings(config))
        except launcher.LauncherError as e:
            raise pytest.UsageError(f"cassette: {e}") from None
        environment = pytest.MonkeyPatch()
        for name, value in proxy.client_env(os.environ, base_urls=False).items():
            if os.environ.get(name) != value:
                environment.setenv(name, value)
        config.stash[PROXY], config.stash[ENVIRONMENT] = proxy, environment
    return config.stash[PROXY]


def _is_xdist_controller(config: pytest.Config) -> bool:
    """With xdist the workers run the tests (one proxy each); the controller needs none."""
    return getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getini("cassette") and not _is_xdist_controller(session.config):
        _start(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the proxy before xdist sends this worker's output, so its report goes with it."""
    config = session.config
    if PROXY not in config.stash:
        return
    config.stash[ENVIRONMENT].undo()
    report = config.stash[PROXY].stop()
    del config.stash[PROXY]
    if report is None:
        return
    config.stash.setdefault(REPORTS, []).append(report)
    if hasattr(config, "workeroutput"):
        config.workeroutput["cassette_report"] = report.to_json()  # xdist sends plain data


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: collect each worker's report for the summary line."""
    report = getattr(node, "workeroutput", {}).get("cassette_report")
    if report:
        node.config.stash.setdefault(REPORTS, []).append(Report.from_json(report))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    reports = config.stash.get(REPORTS, [])
    if reports:
        terminalreporter.write_line(Report.merged(reports).summary())


@pytest.fixture(scope="session")
def cassette_proxy(pytestconfig: pytest.Config) -> launcher.RunningProxy:
    """The session's running proxy (one per xdist worker); starts it if the suite did not opt in globally."""
    return _start(pytestconfig)


@pytest.fixture(scope="session")
def cassette_proxy_url(cassette_proxy: launcher.RunningProxy) -> str:
    """The forward proxy's URL, e.g. http://127.0.0.1:41234."""
    return cassette_proxy.url


@pytest.fixture(scope="session")
def cassette_base_urls(cassette_proxy: launcher.RunningProxy) -> dict[str, str]:
    """Reverse-mode base URLs by name (cassette_reverse setting), e.g. {"openai": "http://127.0.0.1:41235/v1"}."""
    return dict(cassette_proxy.base_urls)


@pytest.fixture
def cassette_env(cassette_proxy: launcher.RunningProxy) -> dict[str, str]:
    """A complete environment for subprocesses (any runtime) that sends their API calls through the proxy."""
    return cassette_proxy.client_env(os.environ, base_urls=False)
