"""pytest plugin: one cassette proxy per test session (per xdist worker), opt-in per suite.

Opt in for the whole suite with `cassette = true` in the pytest configuration:
the proxy then starts before collection, so SDK clients created at import time
already go through it. Or request the `cassette_proxy` fixture, which starts it
on first use. Either way this process's environment points every common client
at the proxy until the session ends.

Mode: --cassette-mode, else $CASSETTE_MODE, else replay.
Cassette folder: --cassette-dir, else $CASSETTE_DIR, else the `cassette_dir` setting (relative to the rootdir).
A miss fails the test that caused it through the SDK's own exception (a 409 it does not retry).

The proxy knows the current test: before each test's setup the plugin announces
it (with its `@pytest.mark.cassette(...)` options and the run's scope) over the
control channel (proxy/control_channel.py), and ends it after its teardown; while a
fixture wider than a function is set up, requests belong to no test. So
`cassette_repeats=sequence` counts per test, `cassette_scope = test` stores a
test's recordings under its own folder, and the report knows which test made
each hit, miss and recording.

A warm proxy (`cassette serve`, `cassette run --keep`) with exactly the
session's settings is reused instead of starting one (launch/warm_proxy.py).

Reverse routes (`cassette_reverse`) are wired into this process too: their
base-URL variables (OPENAI_BASE_URL, OLLAMA_HOST, ... see launch/client_env.py)
are set before collection, so a client built with no arguments uses them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .core.defaults import DEFAULT_DIR, DIR_VAR, MODES
from .core.frameworks import DEFAULT_FRAMEWORKS
from .core.per_test import DEFAULT_SCOPE, SCOPES
from .core.report import Report
from .launch import client_env, launcher, silent_run, warm_proxy
from .launch.control_client import ControlError
from .launch.outer_proxy import OuterProxy, outer_proxy

PROXY = pytest.StashKey[launcher.RunningProxy | OuterProxy]()
ENVIRONMENT = pytest.StashKey[pytest.MonkeyPatch]()
REPORTS = pytest.StashKey[list[Report]]()
CURRENT = pytest.StashKey[tuple[str, dict]]()
"""The test announced to the proxy and its options, while it runs."""
FAILED_START = pytest.StashKey[str]()
"""Why the session's proxy did not come up, for the summary (a session that ran no test never asked)."""
ANNOUNCED = pytest.StashKey[str]()
"""The test the proxy takes as current: from its start until the next test's start, or the end of the last."""

MARKER_OPTIONS = ("mode", "ignore", "repeats", "scope", "record_statuses")
"""What `@pytest.mark.cassette(...)` accepts; the proxy applies what it knows and logs what it ignores."""


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
    parser.addini(
        "cassette_frameworks",
        f"Framework presets to key with, one a line ({', '.join(DEFAULT_FRAMEWORKS)}: all by default); empty for none.",
        "linelist",
        default=list(DEFAULT_FRAMEWORKS),
    )
    group.addoption(
        "--cassette-scope",
        choices=SCOPES,
        default=None,
        help="shared: one recording per distinct request; test: each test's recordings under its own folder. "
        "Defaults to the cassette_scope setting, else shared.",
    )
    parser.addini(
        "cassette_scope",
        "shared (one recording per distinct request) or test (each test's recordings under its own folder).",
        default=DEFAULT_SCOPE,
    )
    parser.addini(
        "cassette_telemetry",
        "Answer the known telemetry sinks (openai-agents' traces, LangSmith, Langfuse, Logfire) offline in replay.",
        type="bool",
        default=True,
    )
    parser.addini("cassette_telemetry_sinks", "More telemetry sinks, HOST/PATH globs, one a line.", "linelist")
    parser.addini("cassette", "Start the cassette proxy for every session of this suite.", type="bool", default=False)
    parser.addini("cassette_dir", "Cassette folder, relative to the rootdir.", default=DEFAULT_DIR)
    parser.addini("cassette_hosts", "Hosts under cassette control (globs); empty: the known LLM API hosts.", "linelist")
    parser.addini(
        "cassette_reverse",
        "Reverse routes as NAME=URL lines (openai=https://api.openai.com): each sets its base-URL variables "
        "(OPENAI_BASE_URL, ...) in the session before collection, and the cassette_base_urls fixture gives them.",
        "linelist",
    )


def _settings(config: pytest.Config, mitmdump: str) -> launcher.Settings:
    folder = config.getoption("cassette_dir") or os.environ.get(DIR_VAR) or config.getini("cassette_dir")
    mode = launcher.resolve_mode(config.getoption("cassette_mode"), os.environ)
    reverse = [launcher.parse_reverse(spec) for spec in config.getini("cassette_reverse")]
    return launcher.Settings(
        mitmdump=mitmdump,
        mode=mode,
        cassette_dir=config.rootpath / Path(folder).expanduser(),
        hosts=config.getini("cassette_hosts"),
        reverse=reverse,
        # The run's scope is the proxy's too: a server shared by xdist workers sends this proxy calls of tests
        # announced to another worker's proxy (named by their carrier), which follow the run's rules.
        extra_args=[*launcher.extra_args_from(os.environ), *_scope_args(config)],
        ignore=[*config.getini("cassette_ignore"), *config.getoption("cassette_ignore")],
        key_headers=[*config.getini("cassette_key_headers"), *config.getoption("cassette_key_header")],
        ignore_values=[*config.getini("cassette_ignore_values"), *config.getoption("cassette_ignore_value")],
        frameworks=config.getini("cassette_frameworks"),
        started_by="pytest",
        telemetry=config.getini("cassette_telemetry"),
        telemetry_sinks=config.getini("cassette_telemetry_sinks"),
        # As `cassette run` chooses: in replay the proxy's CA alone, unless the environment trusts CAs of its own or
        # sends hosts around the proxy. The system's ~145 CAs cost every new SDK client tens of ms (once per proxy
        # variable); the plugin missed this default and paid it on every test.
        proxy_ca_only=launcher.proxy_ca_only_by_default(mode, os.environ),
    )


def _scope_args(config: pytest.Config) -> list[str]:
    scope = config.getoption("cassette_scope") or config.getini("cassette_scope")
    return ["--set", f"cassette_scope={scope}"] if scope and scope != DEFAULT_SCOPE else []


def _start(config: pytest.Config) -> launcher.RunningProxy | OuterProxy:
    """Start the session's proxy and point this process's environment at it; inside `cassette run`, use its proxy."""
    if PROXY not in config.stash:
        try:
            # Not waiting for it: collection (importing the suite and its SDKs) goes on while mitmdump starts,
            # and a client that connects before the proxy is ready waits in the queue (launcher.py).
            settings = _settings(config, launcher.find_mitmdump(None, os.environ))
            proxy = (
                _outer(config)
                or warm_proxy.attach(settings, os.environ, lambda message: print(message, file=sys.stderr))
                or launcher.start(settings, wait=False)
            )
        except launcher.LauncherError as e:
            raise pytest.UsageError(f"cassette: {e}") from None
        environment = pytest.MonkeyPatch()
        # With the routes' variables, clients built with no arguments (a bare `OpenAI()`) take the reverse routes.
        for name, value in proxy.client_env(os.environ).items():
            if os.environ.get(name) != value:
                environment.setenv(name, value)
        config.stash[PROXY], config.stash[ENVIRONMENT] = proxy, environment
    return config.stash[PROXY]


def _outer(config: pytest.Config) -> OuterProxy | None:
    """The enclosing `cassette run`'s proxy when there is one and it serves this suite as its own would."""
    try:
        outer = outer_proxy()
    except ValueError as e:
        raise pytest.UsageError(f"cassette: {e}") from None
    if outer is None:
        return None
    conflicts = outer.conflicts(_settings(config, mitmdump=""))
    if conflicts:
        raise pytest.UsageError(
            "cassette: this pytest runs inside `cassette run`, whose proxy serves it (one proxy, not two), but the "
            "suite's settings differ from that proxy's:\n  " + "\n  ".join(conflicts) + "\nGive `cassette run` the "
            "suite's settings with the flags named, or run pytest on its own: the plugin then starts its own proxy."
        )
    return outer


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(mode=None, ignore=None, repeats=None, scope=None, record_statuses=None): cassette proxy options "
        "for this test's requests only (a replay run stays in replay whatever the mode)",
    )
    scope = config.getoption("cassette_scope") or config.getini("cassette_scope")
    if scope not in SCOPES:
        raise pytest.UsageError(f"cassette_scope: {scope!r} is not a choice; use one of {', '.join(SCOPES)}")


def _test_options(item: pytest.Item) -> dict[str, Any]:
    """The run's scope, with the test's `cassette` markers on top (the closest marker wins)."""
    config = item.config
    options: dict[str, Any] = {"scope": config.getoption("cassette_scope") or config.getini("cassette_scope")}
    for marker in reversed(list(item.iter_markers("cassette"))):
        if marker.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.cassette takes keyword arguments only")
        unknown = sorted(set(marker.kwargs) - set(MARKER_OPTIONS))
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.cassette got {', '.join(unknown)}; it accepts {', '.join(MARKER_OPTIONS)}"
            )
        for name in ("ignore", "record_statuses"):
            value = marker.kwargs.get(name)
            if isinstance(value, str | int):
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.cassette({name}=...) takes a list, got {value!r}")
        options.update({name: list(v) if isinstance(v, tuple) else v for name, v in marker.kwargs.items()})
    return options


def _announce(config: pytest.Config, test: str | None, resume: bool = False) -> None:
    """Tell the proxy which test runs now (None: no test); a refusal fails the test with the proxy's reason."""
    proxy = config.stash.get(PROXY, None)
    if proxy is None:
        return
    _ready(config)
    try:
        if test is None:
            if ANNOUNCED in config.stash:
                proxy.control().end(config.stash[ANNOUNCED])
                del config.stash[ANNOUNCED]
        else:
            proxy.control().start(test, config.stash[CURRENT][1], resume=resume)
            config.stash[ANNOUNCED] = test
    except (ControlError, OSError) as e:
        raise pytest.UsageError(f"cassette: the proxy did not take the test {test!r}: {e}") from None
    _carrier().announce(test)


def _carrier() -> Any:
    """This process's carrier (launch/python_site/cassette_carrier.py): its httpx requests name the current test,
    so a server shared by xdist workers (uvicorn, started once) can tell whose call it makes."""
    site = str(client_env.PYTHON_SITE)
    if site not in sys.path:
        sys.path.append(site)
    carrier = importlib.import_module("cassette_carrier")  # one module for the plugin and the sitecustomize
    carrier.install()
    return carrier


def _ready(config: pytest.Config) -> None:
    """The session's proxy is up, or the session stops with why not (mitmdump's log)."""
    try:
        config.stash[PROXY].wait_ready()
    except launcher.LauncherError as e:
        raise pytest.UsageError(f"cassette: {e}") from None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of the test: its requests (function fixtures included) are its own."""
    item.config.stash[CURRENT] = (item.nodeid, _test_options(item))
    _announce(item.config, item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the test's teardown. The next test's start ends this one: between the two no code of the suite runs,
    and one call per test instead of two is what the per-test route costs over `cassette run`."""
    try:
        return (yield)
    finally:
        if CURRENT in item.config.stash:
            if nextitem is None:
                _announce(item.config, None)
            del item.config.stash[CURRENT]


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef, request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    """A session, module or class fixture serves many tests: its requests belong to none (their own counter)."""
    config = request.config
    wider = fixturedef.scope != "function" and CURRENT in config.stash
    if wider:
        _announce(config, None)
    try:
        return (yield)
    finally:
        if wider:
            _announce(config, config.stash[CURRENT][0], resume=True)


def _is_xdist_controller(config: pytest.Config) -> bool:
    """With xdist the workers run the tests (one proxy each); the controller needs none."""
    return getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if config.getini("cassette") and not _is_xdist_controller(config):
        proxy = _start(config)
        if isinstance(proxy, OuterProxy) and not _is_xdist_worker(config):
            _say_outer(config, proxy)
    elif config.getini("cassette") and (outer := _outer(config)) is not None:
        _say_outer(config, outer)


def _say_outer(config: pytest.Config, outer: OuterProxy) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.write_line(
            f"cassette: using the proxy of the enclosing `cassette run` ({outer.url}, {outer.settings.mode}, "
            f"{outer.settings.dir}) instead of starting another; `cassette run` prints the summary"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the proxy before xdist sends this worker's output, so its report goes with it."""
    config = session.config
    if PROXY not in config.stash:
        return
    if ANNOUNCED in config.stash:  # the session stopped early (-x, an interrupt): no test runs any more
        with contextlib.suppress(pytest.UsageError):
            _announce(config, None)
    config.stash[ENVIRONMENT].undo()
    proxy = config.stash[PROXY]
    try:
        proxy.wait_ready()
    except launcher.LauncherError as e:
        config.stash[FAILED_START] = str(e)
    report = proxy.stop()
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
    if FAILED_START in config.stash:
        terminalreporter.write_line(f"cassette: {config.stash[FAILED_START]}")
    reports = config.stash.get(REPORTS, [])
    if not reports:
        return
    report = Report.merged(reports)
    terminalreporter.write_line(report.summary())
    hosts = _settings(config, mitmdump="").controlled_hosts()
    silence = silent_run.warning(report, os.environ, hosts, hosts_flag="the cassette_hosts setting")
    if silence:
        terminalreporter.write_line(silence)
    # Under xdist the controller holds every worker's test reports as well as their run reports.
    failed = {r.nodeid for name in ("failed", "error") for r in terminalreporter.stats.get(name, [])}
    missed = {test: n for test, n in report.tests_with_misses().items() if test in failed}
    if missed:
        terminalreporter.write_line(f"cassette: {len(missed)} test(s) failed on cassette misses:")
        for test, n in sorted(missed.items()):
            terminalreporter.write_line(f"cassette:   {test} ({n} miss{'es' if n > 1 else ''})")


@pytest.fixture(scope="session")
def cassette_proxy(pytestconfig: pytest.Config) -> launcher.RunningProxy | OuterProxy:
    """The session's running proxy (one per xdist worker, or the enclosing `cassette run`'s); starts it if the suite
    did not opt in globally."""
    return _start(pytestconfig)


@pytest.fixture(scope="session")
def cassette_proxy_url(cassette_proxy: launcher.RunningProxy | OuterProxy) -> str:
    """The forward proxy's URL, e.g. http://127.0.0.1:41234."""
    return cassette_proxy.url


@pytest.fixture(scope="session")
def cassette_base_urls(cassette_proxy: launcher.RunningProxy | OuterProxy) -> dict[str, str]:
    """Reverse-mode base URLs by name (cassette_reverse setting), e.g. {"openai": "http://127.0.0.1:41235/v1"}."""
    return dict(cassette_proxy.base_urls)


@pytest.fixture
def cassette_env(cassette_proxy: launcher.RunningProxy | OuterProxy) -> dict[str, str]:
    """A complete environment for subprocesses (any runtime) that sends their API calls through the proxy."""
    return cassette_proxy.client_env(os.environ)
