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

A coroutine test (pytest-asyncio, anyio, pytest-trio) runs on an event loop that
is not the next test's, while the suite may keep one async client for the whole
session (langchain-openai's `lru_cache`d `httpx.AsyncClient`): its pooled
connection to the proxy would belong to a loop that is gone ("Event loop is
closed"). Such a test is announced as running on its own loop, and the proxy ends
each connection after answering it (`Connection: close`); every other test keeps
its connections.

Suites written for pytest-recording keep their `vcr` fixture: when pytest-recording
is not installed, or is turned off with `--disable-recording`, the plugin gives
`vcr` itself, the test's requests and answers through the proxy in VCR.py's
`Cassette` shape (core/migration/vcr_cassette.py, proxy/played.py).

`--cassette-strict` (or `cassette_strict = true`) fails the session on what a
suite may swallow, as `cassette run --strict` does: a miss, a refused offline
request, an error of the proxy, or a run that recorded or replayed nothing.

A warm proxy (`cassette serve`, `cassette run --keep`) with exactly the
session's settings is reused instead of starting one (launch/warm_proxy.py).

Reverse routes (`cassette_reverse`) are wired into this process too: their
base-URL variables (OPENAI_BASE_URL, OLLAMA_HOST, ... see launch/client_env.py)
are set before collection, so a client built with no arguments uses them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from .core import option_table
from .core.defaults import DIR_VAR
from .core.migration.vcr_cassette import RECORD_MODES as VCR_MODES
from .core.migration.vcr_cassette import RecordedCassette
from .core.report import Report, ReportError
from .core.traffic.per_test import DEFAULT_SCOPE, SCOPES, folder_of_test
from .launch import client_env, isolate, launcher, silent_run, warm_proxy
from .launch.control_client import ControlError
from .launch.outer_proxy import OUTER_PROXY_VAR, OuterProxy, outer_proxy, run_flags

PROXY = pytest.StashKey[launcher.RunningProxy | OuterProxy]()
ENVIRONMENT = pytest.StashKey[pytest.MonkeyPatch]()
REPORTS = pytest.StashKey[list[Report]]()
CURRENT = pytest.StashKey[tuple[str, dict]]()
"""The test announced to the proxy and its options, while it runs."""
FAILED_START = pytest.StashKey[str]()
"""Why the session's proxy did not come up, for the summary (a session that ran no test never asked)."""
ANNOUNCED = pytest.StashKey[str]()
"""The test the proxy takes as current: from its start until the next test's start, or the end of the last."""

OUTER_REPORT = pytest.StashKey[Report | None]()
"""The enclosing `cassette run`'s report at the session's end, for --cassette-strict."""
STRICT_FAILURES = pytest.StashKey[list[str]]()
"""The lines --cassette-strict fails the session with."""
PLAYED = pytest.StashKey[bool]()
"""The running test reads the `vcr` fixture: the proxy keeps what its requests were answered with."""
OWN_LOOP = pytest.StashKey[bool]()
"""The running test runs on an event loop of its own: the proxy closes each connection it answers for it."""
GIVES_VCR = pytest.StashKey[bool]()
"""This plugin gives the `vcr` fixture (pytest-recording is absent, or turned off with --disable-recording)."""
RECORDING_PLUGIN = "pytest_recording.plugin"

RECORD_MODES = {"none": "replay", "once": "record", "new_episodes": "record", "all": "update", "rewrite": "update"}
"""pytest-recording's `--record-mode` values, as cassette modes (declared by the plugin when it is not installed)."""
REGEX_FREE_HOST = re.compile(r"[A-Za-z0-9*][A-Za-z0-9.*-]*(:[0-9]+)?|\[[0-9A-Fa-f:]+\](:[0-9]+)?")
"""A host name, IPv4 or bracketed IPv6 address, or a glob of one (`*` only), with an optional port: what
`--allowed-hosts` takes as cassette_allow_hosts."""
INI_TYPES: dict[Any, Any] = {Sequence[str]: "linelist", bool: "bool"}
"""An option's type → its ini setting's (core/option_table.py); any other is a string."""
MARKER_OPTIONS = ("mode", "ignore", "repeats", "scope", "record_statuses")
"""What `@pytest.mark.cassette(...)` accepts; the proxy applies what it knows and logs what it ignores."""
ASYNC_MARKERS = ("asyncio", "anyio", "trio")
"""The markers of the plugins that run a test on an event loop (pytest-asyncio, anyio's, pytest-trio)."""


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    group = parser.getgroup("cassette", "cassette proxy: record and replay LLM API calls")
    if not _recording_to_come(pluginmanager):
        # A pytest-recording suite's command line keeps working without it: its CI passes `--record-mode=none`,
        # and conftests read the value (langchain-openai stubs its Codex login only when it is "none").
        group.addoption(
            "--record-mode", choices=sorted(RECORD_MODES), default=None,
            help="pytest-recording's record mode, as a cassette mode: none=replay, once and new_episodes=record, "
            "all and rewrite=update. --cassette-mode takes precedence.",
        )  # fmt: skip
        group.addoption(
            "--disable-recording", action="store_true", default=False,
            help="pytest-recording's switch; without it installed the proxy answers anyway.",
        )  # fmt: skip
        group.addoption(
            "--block-network", action="store_true", default=False,
            help="pytest-recording's switch: behind the proxy a replay run answers every host outside the cassette "
            "hosts and --allowed-hosts 403 cassette_offline already; --cassette-isolate stops the clients that go "
            "around the proxy too.",
        )  # fmt: skip
        group.addoption(
            "--allowed-hosts", default=None, metavar="HOSTS",
            help="pytest-recording's comma-separated hosts a run may still reach: here cassette_allow_hosts "
            "(host names or globs such as *.example.com, not regular expressions).",
        )  # fmt: skip
    for option in option_table.OPTIONS:  # the addon's options the plugin sets (core/option_table.py)
        if option.pytest_flag is not None:
            group.addoption(option.pytest_flag.spelling, **option_table.flag_keywords(option, option.pytest_flag))
        if option.ini is not None:
            default = {} if option.ini.default is None else {"default": option.ini.default}
            parser.addini(option.name, option.ini.help, INI_TYPES.get(option.type), **default)
    group.addoption(
        "--cassette-isolate", action="store_true", default=None,
        help="Run this pytest (and every process it starts) inside `cassette run --isolate`: a network namespace "
        "where the proxy is the only way out (Linux). Defaults to the cassette_isolate setting.",
    )  # fmt: skip
    parser.addini(
        "cassette_isolate", "Run the session inside `cassette run --isolate` (Linux).", type="bool", default=False
    )
    group.addoption(
        "--cassette-strict",
        action="store_true",
        default=None,
        help="Fail the session on a miss, a refused offline request or a proxy error the suite swallowed, and on a "
        "run that recorded or replayed nothing (as `cassette run --strict`). Defaults to the cassette_strict setting.",
    )
    parser.addini(
        "cassette_strict",
        "Fail the session on swallowed misses, refused offline requests, proxy errors and silent runs.",
        type="bool",
        default=False,
    )
    parser.addini("cassette", "Start the cassette proxy for every session of this suite.", type="bool", default=False)
    parser.addini(
        "cassette_reverse",
        "Reverse routes as NAME=URL lines (openai=https://api.openai.com): each sets its base-URL variables "
        "(OPENAI_BASE_URL, ...) in the session before collection, and the cassette_base_urls fixture gives them.",
        "linelist",
    )


def _option_values(config: pytest.Config) -> dict[str, Any]:
    """Each `Settings` field the plugin sets from an option's ini setting, its flag's values added (a list), or its
    flag alone; a flag not given and no setting leaves the field's default."""
    values: dict[str, Any] = {}
    for option in option_table.OPTIONS:
        if option.setting is None or not option_table.plugin_sets(option):
            continue
        given = config.getoption(option.pytest_flag.dest) if option.pytest_flag else None
        if option.ini is None:
            if given is not None:
                values[option.setting] = given
        elif option.is_list:
            values[option.setting] = [*config.getini(option.name), *(given or [])]
        else:
            values[option.setting] = config.getini(option.name) if given is None else given
    return values


def _settings(config: pytest.Config, mitmdump: str) -> launcher.Settings:
    values = _option_values(config)
    folder = config.getoption("cassette_dir") or os.environ.get(DIR_VAR) or config.getini("cassette_dir")
    record_mode = config.getoption("record_mode", None) if _declares_record_mode(config) else None
    mode = launcher.resolve_mode(
        config.getoption("cassette_mode") or (RECORD_MODES.get(record_mode) if isinstance(record_mode, str) else None),
        os.environ,
    )
    reverse = [launcher.parse_reverse(spec) for spec in config.getini("cassette_reverse")]
    if _declares_record_mode(config) and config.getoption("allowed_hosts", None):
        values["allow_hosts"] = [*values.get("allow_hosts", ()), *_allowed_hosts(config.getoption("allowed_hosts"))]
    return launcher.Settings(
        **{
            **values,
            "mitmdump": mitmdump,
            "mode": mode,
            "cassette_dir": config.rootpath / Path(folder).expanduser(),
            "reverse": reverse,
            # The run's scope is the proxy's too: a server shared by xdist workers sends this proxy calls of tests
            # announced to another worker's proxy (named by their carrier), which follow the run's rules.
            "extra_args": [*launcher.extra_args_from(os.environ), *_scope_args(config)],
            "started_by": "pytest",
            # As `cassette run` chooses: in replay the proxy's CA alone, unless the environment trusts CAs of its own
            # or sends hosts around the proxy. The system's ~145 CAs cost every new SDK client tens of ms (once per
            # proxy variable); the plugin missed this default and paid it on every test.
            "proxy_ca_only": launcher.proxy_ca_only_by_default(mode, os.environ),
        }
    )


def _allowed_hosts(given: str) -> list[str]:
    """pytest-recording's `--allowed-hosts` (comma-separated; it matches each as a regular expression) as host globs.
    A plain host name means the same in both; a regular expression is refused, naming the glob to write, rather than
    read as a glob that would allow some other set of hosts."""
    hosts = [host.strip() for host in given.split(",") if host.strip()]
    for host in hosts:
        if not REGEX_FREE_HOST.fullmatch(host):
            raise pytest.UsageError(
                f"--allowed-hosts: {host!r} looks like a regular expression (pytest-recording matches each as one); "
                "the proxy takes host names and globs: write `*.example.com` for every host under example.com"
            )
    return hosts


def _scope_args(config: pytest.Config) -> list[str]:
    scope = config.getoption("cassette_scope") or config.getini("cassette_scope")
    return ["--set", f"cassette_scope={scope}"] if scope and scope != DEFAULT_SCOPE else []


def _recording_to_come(pluginmanager: pytest.PytestPluginManager) -> bool:
    """pytest-recording is loaded in this session, or will be once pytest loads the rest of its plugins (then its
    options are its own, and declaring them here would clash)."""
    if _recording_loaded(pluginmanager):
        return True
    if importlib.util.find_spec("pytest_recording") is None or pluginmanager.is_blocked("recording"):
        return False
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return "pytest_recording" in os.environ.get("PYTEST_PLUGINS", "")
    return True  # installed: its entry point loads it


def _recording_loaded(pluginmanager: pytest.PytestPluginManager) -> bool:
    return any(getattr(plugin, "__name__", None) == RECORDING_PLUGIN for plugin in pluginmanager.get_plugins())


def _declares_record_mode(config: pytest.Config) -> bool:
    """`--record-mode` is the plugin's own (pytest-recording is not loaded), not pytest-recording's."""
    return not _recording_loaded(config.pluginmanager)


def _start(config: pytest.Config) -> launcher.RunningProxy | OuterProxy:
    """Start the session's proxy and point this process's environment at it; inside `cassette run`, use its proxy."""
    if PROXY not in config.stash:
        try:
            # Not waiting for it: collection (importing the suite and its SDKs) goes on while mitmdump starts,
            # and a client that connects before the proxy is ready waits in the queue (launcher.py).
            # Inside `cassette run` its proxy serves: the suite's environment need not hold a mitmdump (the README
            # installs the package there without the `proxy` extra).
            proxy: launcher.RunningProxy | OuterProxy | None = _outer(config)
            if proxy is None:
                settings = _settings(config, launcher.find_mitmdump(None, os.environ))
                # A warm proxy is one proxy for every worker, so each test is announced to it with its scope:
                # the run's scope need not be its own (_scope_args is for a proxy per xdist worker).
                scope = _scope_args(config)
                unscoped = dataclasses.replace(settings, extra_args=settings.extra_args[: -len(scope) or None])
                proxy = warm_proxy.attach(
                    unscoped, os.environ, lambda message: print(message, file=sys.stderr)
                ) or launcher.start(settings, wait=False)
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


def _shares_proxy(config: pytest.Config) -> bool:
    """xdist workers inside `cassette run` share its one proxy: each announces its own tests (as a runner of its
    own), but the proxy keeps what one test at a time was answered with, for the `vcr` fixture."""
    return isinstance(config.stash.get(PROXY, None), OuterProxy) and _is_xdist_worker(config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("cassette_isolate") or config.getini("cassette_isolate"):
        _isolate(config)
    config.addinivalue_line(
        "markers",
        "cassette(mode=None, ignore=None, repeats=None, scope=None, record_statuses=None): cassette proxy options "
        "for this test's requests only (a replay run stays in replay whatever the mode)",
    )
    _check_cassette_dir_words(config)
    scope = config.getoption("cassette_scope") or config.getini("cassette_scope")
    if scope not in SCOPES:
        raise pytest.UsageError(f"cassette_scope: {scope!r} is not a choice; use one of {', '.join(SCOPES)}")
    recording = _recording_loaded(config.pluginmanager)
    if not recording:
        # A pytest-recording suite's markers, so that `--strict-markers` takes them without pytest-recording.
        config.addinivalue_line(
            "markers", "vcr: the test's recordings (pytest-recording); served by the cassette proxy"
        )
        config.addinivalue_line("markers", "default_cassette: the test's cassette name (pytest-recording)")
        config.addinivalue_line(
            "markers",
            "block_network: pytest-recording's marker; behind the proxy a replay run reaches no host outside the "
            "cassette hosts and cassette_allow_hosts already",
        )
        config.pluginmanager.register(RecordingFixtures(), "cassette_recording_fixtures")
        # Its hook, which conftests implement (pydantic-ai registers a serializer in it): without the spec pytest
        # stops the session on an unknown hook. Never called: behind the proxy there is no VCR object to configure.
        hook = getattr(config.pluginmanager.hook, "pytest_recording_configure", None)
        if hook is None or hook.spec is None:
            config.pluginmanager.add_hookspecs(RecordingHookspec)
    # Only for a suite that opted in: pytest-recording's `vcr` is autouse, and a suite that does not use the proxy
    # must not get one started by it.
    config.stash[GIVES_VCR] = config.getini("cassette") and (
        not recording or bool(config.getoption("disable_recording", False))
    )
    if config.stash[GIVES_VCR]:
        config.pluginmanager.register(VcrFixture(), "cassette_vcr")


def _check_cassette_dir_words(config: pytest.Config) -> None:
    """`--cassette-dir DIR` as two words: pytest chooses its rootdir before plugins' options are known, so it takes an
    existing DIR for a test path, and a DIR outside the suite moves the rootdir (and its ini file): test ids and
    test-scope folders then differ between a record and a replay. Refused, naming the one-word form."""
    args = [str(arg) for arg in config.invocation_params.args]
    if "--cassette-dir" not in args[:-1]:
        return
    folder = args[args.index("--cassette-dir") + 1]
    if not (config.invocation_params.dir / folder).exists():
        return  # pytest leaves a path that does not exist out of its choice
    try:
        from _pytest.config.findpaths import determine_setup

        expected = determine_setup(
            inifile=config.option.inifilename,
            override_ini=config.option.override_ini,
            args=[str(a) for a in config.option.file_or_dir or []],
            rootdir_cmd_arg=config.option.rootdir or None,
            invocation_dir=config.invocation_params.dir,
        )[0]
    except (ImportError, TypeError):  # another pytest: not knowing the rootdir it would choose, refuse
        expected = None
    if expected is not None and Path(expected) == config.rootpath:
        return
    raise pytest.UsageError(
        f"--cassette-dir {folder}: as two words, pytest reads {folder} as a test path when it chooses its rootdir "
        f"(it chose {config.rootpath}{f' instead of {expected}' if expected else ''}), which changes the test ids "
        f"and the test-scope folders; write it as one word: --cassette-dir={folder}"
    )


def _isolate(config: pytest.Config) -> None:
    """Run this very pytest again inside `cassette run --isolate`, before anything is collected or started.

    A process cannot move its threads into a new user namespace once it runs, and the suite's clients live in
    this one: so it is replaced (`exec`) by `cassette run --isolate` with the session's settings, running the
    same command line. The plugin inside then uses that proxy (outer_proxy.py); xdist workers start inside too.
    """
    if os.environ.get(isolate.ISOLATED_VAR) or _is_xdist_worker(config):
        return
    if os.environ.get(OUTER_PROXY_VAR):
        raise pytest.UsageError(
            "cassette: --cassette-isolate inside a `cassette run` without --isolate: give `cassette run` --isolate"
        )
    try:
        settings = _settings(config, launcher.find_mitmdump(None, os.environ))
    except launcher.LauncherError as e:
        raise pytest.UsageError(f"cassette: {e}") from None
    beside = Path(sys.executable).with_name("cassette")
    cassette = (
        [str(beside)]
        if beside.exists()
        else [sys.executable, "-c", "import sys; from cassette_proxy.cli import main; sys.exit(main())"]
    )
    command = [*cassette, "run", "--isolate", *run_flags(settings), "--", sys.executable, *sys.orig_argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


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


def _own_loop(item: pytest.Item) -> bool:
    """The test runs on an event loop: a coroutine function, or marked for pytest-asyncio, anyio or pytest-trio.
    Whatever its loop's scope: a connection made on a loop kept for the session (`loop_scope="session"`) breaks
    just as well in the next test that runs on a loop of its own."""
    if any(item.get_closest_marker(name) is not None for name in ASYNC_MARKERS):
        return True
    function = getattr(item, "obj", None)
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


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
            played, own_loop = config.stash.get(PLAYED, False), config.stash.get(OWN_LOOP, False)
            proxy.control().start(test, config.stash[CURRENT][1], resume=resume, played=played, own_loop=own_loop)
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
    item.config.stash[PLAYED] = item.config.stash.get(GIVES_VCR, False) and "vcr" in getattr(item, "fixturenames", ())
    item.config.stash[OWN_LOOP] = _own_loop(item)
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
            f"cassette: using the proxy of the enclosing `cassette run` ({outer.url}, {outer.settings['mode']}, "
            f"{outer.settings['dir']}) instead of starting another; `cassette run` prints the summary"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the proxy before xdist sends this worker's output, so its report goes with it; then `--cassette-strict`."""
    config = session.config
    if PROXY in config.stash:
        _stop(config)
    if _strict(config) and not _is_xdist_worker(config):
        _fail_strict(session)


def _stop(config: pytest.Config) -> None:
    if ANNOUNCED in config.stash:  # the session stopped early (-x, an interrupt): no test runs any more
        with contextlib.suppress(pytest.UsageError):
            _announce(config, None)
    config.stash[ENVIRONMENT].undo()
    proxy = config.stash[PROXY]
    try:
        proxy.wait_ready()
    except launcher.LauncherError as e:
        config.stash[FAILED_START] = str(e)
    if isinstance(proxy, OuterProxy) and _strict(config) and not _is_xdist_worker(config):
        config.stash[OUTER_REPORT] = _outer_report(proxy)
    report = proxy.stop()
    del config.stash[PROXY]
    if report is None:
        return
    config.stash.setdefault(REPORTS, []).append(report)
    if hasattr(config, "workeroutput"):
        config.workeroutput["cassette_report"] = report.to_json()  # xdist sends plain data


def _strict(config: pytest.Config) -> bool:
    """--cassette-strict, else the cassette_strict setting."""
    option = config.getoption("cassette_strict", None)
    return bool(option if option is not None else config.getini("cassette_strict"))


def _outer_report(outer: OuterProxy) -> Report | None:
    """The enclosing `cassette run`'s report so far (its run-end call changes nothing: it waits and answers)."""
    try:
        return Report.from_json(outer.control().call("/v1/run/end", {})["report"])
    except (ControlError, OSError, ReportError, KeyError) as e:
        raise pytest.UsageError(
            f"cassette: --cassette-strict could not read the run report of `cassette run`: {e}"
        ) from None


def _fail_strict(session: pytest.Session) -> None:
    """What `cassette run --strict` fails on, from the plugin alone: the session fails, each cause named."""
    config = session.config
    report = config.stash.get(OUTER_REPORT, None)
    if report is None and _is_xdist_controller(config) and (outer := _outer(config)) is not None:
        report = _outer_report(outer)
        outer.stop()
    # The enclosing `cassette run` prints its summary after pytest's output: the causes are named here too.
    details = report.summary().splitlines()[1:] if report is not None else []
    if report is None and config.stash.get(REPORTS, []):
        report = Report.merged(config.stash[REPORTS])  # the summary line above names each cause
    if report is None:
        failures = ["no cassette proxy ran in this session (set `cassette = true`)"]
    else:
        hosts = _settings(config, mitmdump="").controlled_hosts()
        silence = silent_run.warning(report, os.environ, hosts, hosts_flag="the cassette_hosts setting")
        failures = [*report.strict_failures(), *([silent_run.STRICT_FAILURE] if silence else [])]
    if failures:
        named = [
            line for line in details if line.startswith(("cassette: miss", "cassette: offline", "cassette: error"))
        ]
        config.stash[STRICT_FAILURES] = [
            f"cassette: --cassette-strict: failing the session for {', '.join(failures)}",
            *named,
        ]
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: collect each worker's report for the summary line."""
    report = getattr(node, "workeroutput", {}).get("cassette_report")
    if report:
        node.config.stash.setdefault(REPORTS, []).append(Report.from_json(report))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if FAILED_START in config.stash:
        terminalreporter.write_line(f"cassette: {config.stash[FAILED_START]}")
    _summarise(terminalreporter, config)
    for line in config.stash.get(STRICT_FAILURES, []):
        terminalreporter.write_line(line)


def _summarise(terminalreporter, config: pytest.Config) -> None:
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


class RecordingHookspec:
    """pytest-recording's hook, declared when pytest-recording is not installed."""

    @pytest.hookspec
    def pytest_recording_configure(self, config: pytest.Config, vcr: Any) -> None:
        """pytest-recording configures its VCR here; behind the proxy it is never called."""


class RecordingFixtures:
    """pytest-recording's fixtures that conftests and tests read or override, declared when it is not installed."""

    @pytest.fixture(scope="session")
    def record_mode(self, pytestconfig: pytest.Config) -> str:
        """pytest-recording's record mode: `--record-mode` as given, unless `--cassette-mode` (which wins) says
        otherwise; else this run's cassette mode in its words (replay: `none`, record: `new_episodes`, update:
        `all`), as `vcr.record_mode` says it."""
        given, chosen = pytestconfig.getoption("record_mode", None), pytestconfig.getoption("cassette_mode")
        if isinstance(given, str) and not chosen:
            return given
        return VCR_MODES.get(launcher.resolve_mode(chosen, os.environ), "none")

    @pytest.fixture
    def vcr_config(self) -> dict[str, Any]:
        """VCR.py's settings, which a conftest overrides; behind the proxy nothing reads them (the key and
        cassette_redact replace `match_on` and the filters)."""
        return {}


class VcrFixture:
    """pytest-recording's `vcr` fixture, served by the proxy (registered when pytest-recording does not give it)."""

    @pytest.fixture
    def vcr(self, request: pytest.FixtureRequest) -> RecordedCassette:
        """The test's requests and answers through the proxy, read like pytest-recording's cassette (VCR.py's
        `Cassette`): `requests`, `responses`, `play_count`, `all_played`, `data`, `responses_of()`."""
        config = request.config
        proxy = _start(config)
        test = request.node.nodeid
        if config.stash.get(ANNOUNCED, None) != test:
            config.stash[PLAYED] = True  # the proxy started for this fixture: the test was not announced yet
            _announce(config, test)
        settings = _settings(config, mitmdump="")
        root = Path(settings.cassette_dir).resolve()
        scope = config.stash[CURRENT][1].get("scope") if CURRENT in config.stash else None

        def fetch() -> list[dict[str, Any]]:
            if _shares_proxy(config):
                raise RuntimeError(
                    "cassette: the vcr fixture reads the requests of the running test, and xdist workers inside "
                    "`cassette run` share one proxy that cannot tell their tests apart: run `pytest -n N` on its "
                    "own, or without -n"
                )
            answer = proxy.control().played(test)
            if answer.get("interactions") is None:
                raise RuntimeError(
                    f"cassette: the proxy takes {answer.get('current')!r} as the running test, not {test!r}: "
                    "the vcr fixture reads only the running test's requests"
                )
            if answer.get("truncated"):
                raise RuntimeError(f"cassette: {test} sent more requests than the proxy keeps for the vcr fixture")
            return list(answer["interactions"])

        def unused() -> list[Path]:
            if scope != "test":
                return []
            return sorted(p for p in (root / folder_of_test(test)).rglob("*.json") if p.is_file())

        return RecordedCassette(fetch, unused, root, settings.mode)
