"""One table declares every option (core/option_table.py); every front end is made from it, and each one brings an
option to the addon with the same value: `cassette run`'s flag, the environment, the pytest plugin's ini setting and
its command-line option, and a warm proxy's fingerprint (a run from the CLI and a pytest session asking for the same
option share a warm proxy, and one asking for another value does not).

In-process: the CLI's argparse parser and the launcher's mitmdump arguments are built without starting mitmdump, the
plugin's configuration is parsed by pytest (pytester) without running a session, and the `--set` arguments are applied
to the addon in mitmproxy's test context, where the addon parses them as mitmdump would.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import cassette
import pytest
from cassette_proxy import pytest_plugin
from cassette_proxy.cli import proxy_flags
from cassette_proxy.core import option_table
from cassette_proxy.core.defaults import DEFAULT_KEY_HEADERS
from cassette_proxy.launch import launcher, warm_proxy
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons

pytest_plugins = ["pytester"]

VARIABLES = {option.env for option in option_table.OPTIONS if option.env} | {"CASSETTE_MITMDUMP_ARGS"}
FOLDER = Path("/tmp/cassette-option-table/cassettes")
"""The sample cassette folder (it need not exist: the addon makes it when it records)."""
BASE_FOLDER = Path("/tmp/cassette-option-table/other")
REPORT = Path("/tmp/report-of-the-option-table.json")


def samples() -> dict[str, tuple[Any, Any]]:
    """For every option a front end spells: a value other than its default as the front ends give it (a `Settings`
    field's value), and the value the addon then holds."""
    return {
        "cassette_mode": ("record", "record"),
        "cassette_dir": (FOLDER, str(FOLDER)),
        "cassette_ignore": (["metadata.run", "messages.*.id"], ["metadata.run", "messages.*.id"]),
        "cassette_key_headers": (["X-Tenant"], [*DEFAULT_KEY_HEADERS, "x-tenant"]),
        "cassette_ignore_values": (["sess_[a-z]+"], ["sess_[a-z]+"]),
        "cassette_frameworks": (["pydantic-ai"], ["pydantic-ai"]),
        "cassette_hosts": (["api.example.com", "*.example.org"], ["api.example.com", "*.example.org"]),
        "cassette_allow_hosts": (["cdn.example.com"], ["cdn.example.com"]),
        "cassette_telemetry": (False, False),
        "cassette_telemetry_sinks": (["otel.example.com/v1/traces"], ["otel.example.com/v1/traces"]),
        "cassette_report": (REPORT, str(REPORT)),
        "cassette_scope": ("test", "test"),
        "cassette_replay_timing": ("2", "2"),
        "cassette_control_token": ("fake-control-token-for-tests", "fake-control-token-for-tests"),
    }


def spelled(option: option_table.Option) -> bool:
    return any((option.flag, option.ini, option.pytest_flag, option.env, option.to_set))


@pytest.fixture(autouse=True)
def no_cassette_variables(monkeypatch):
    for variable in sorted(VARIABLES):
        monkeypatch.delenv(variable, raising=False)


def addon_values(sets: list[str]) -> dict[str, Any]:
    """The `cassette_*` options the addon holds once these `--set` values are applied (and parsed: a value the addon
    refuses fails here)."""
    # Proxyserver declares the core options the addon reads (`connection_strategy`), as in mitmdump: mitmproxy 12
    # no longer has them in a bare context.
    with taddons.context(Proxyserver(), *cassette.addons) as tctx:
        tctx.options.set(*(spec for spec in sets if spec.startswith(option_table.PREFIX)))
        return {name: getattr(tctx.options, name) for name in option_table.NAMES}


def set_values(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--set"]


def launched(settings: launcher.Settings, private: Path) -> dict[str, Any]:
    """What the addon holds when the launcher starts mitmdump with `settings` (its arguments, not the process)."""
    return addon_values(set_values(launcher.command(settings, private, 0, [])))


def from_cli(args: list[str], environ: dict[str, str]) -> launcher.Settings:
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    return proxy_flags.settings_from_arguments(parser.parse_args(args), {"CASSETTE_MITMDUMP": "/bin/true", **environ})


def from_plugin(pytester, ini: dict[str, str], args: list[str]) -> launcher.Settings:
    lines = "".join(f"{name} = {value}\n" for name, value in ini.items())
    pytester.makeini(f"[pytest]\n{lines}")
    config = pytester.parseconfig(*args)
    return pytest_plugin._settings(config, mitmdump="/bin/true")


def ini_text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "".join(f"\n    {item}" for item in value)
    return str(value)


def test_every_option_a_front_end_spells_has_a_sample_and_every_sample_an_option():
    spelling = {option.name for option in option_table.OPTIONS if spelled(option)} - {"cassette_started_by"}
    assert sorted(spelling) == sorted(samples())


def test_every_setting_of_the_launcher_is_an_options_or_its_own():
    own = {"mitmdump", "reverse", "port", "extra_args", "only_reverse", "proxy_ca_only"}
    carried = {option.setting for option in option_table.OPTIONS if option.setting}
    assert {field.name for field in dataclasses.fields(launcher.Settings)} == own | carried
    assert own.isdisjoint(carried)


@pytest.mark.parametrize("option", [o for o in option_table.OPTIONS if o.flag], ids=lambda o: o.name)
def test_the_cli_flag_reaches_the_addon(option, tmp_path):
    given, held = samples()[option.name]
    args = option_table.flag_arguments(option, given)
    assert args and args[0] == option.flag.spelling
    values = launched(from_cli(args, {}), tmp_path)
    assert values[option.name] == held
    default = launched(from_cli([], {}), tmp_path)
    assert default[option.name] != held


@pytest.mark.parametrize("option", [o for o in option_table.OPTIONS if o.env], ids=lambda o: o.name)
def test_the_environment_reaches_the_addon(option, monkeypatch, tmp_path):
    given, held = samples()[option.name]
    monkeypatch.setenv(option.env, str(given))
    assert addon_values([])[option.name] == held  # mitmdump started by hand reads it
    if option.flag:  # the launcher reads it (mode, folder) and passes it on
        assert launched(from_cli([], {option.env: str(given)}), tmp_path)[option.name] == held


@pytest.mark.parametrize("option", [o for o in option_table.OPTIONS if o.ini], ids=lambda o: o.name)
def test_the_plugins_ini_setting_reaches_the_addon(option, pytester, tmp_path):
    given, held = samples()[option.name]
    settings = from_plugin(pytester, {option.name: ini_text(given)}, [])
    assert launched(settings, tmp_path)[option.name] == held
    assert launched(from_plugin(pytester, {}, []), tmp_path)[option.name] != held


@pytest.mark.parametrize("option", [o for o in option_table.OPTIONS if o.pytest_flag], ids=lambda o: o.name)
def test_the_plugins_command_line_option_reaches_the_addon(option, pytester, tmp_path):
    given, held = samples()[option.name]
    values = given if isinstance(given, list) else [given]
    args = [f"{option.pytest_flag.spelling}={value}" for value in values]
    assert launched(from_plugin(pytester, {}, args), tmp_path)[option.name] == held


@pytest.mark.parametrize("option", option_table.in_fingerprint(), ids=lambda o: o.name)
def test_the_same_option_from_the_cli_and_the_plugin_shares_a_warm_proxy_and_another_value_does_not(
    option, pytester, tmp_path
):
    given, _ = samples()[option.name]
    base = launcher.Settings("/bin/true", cassette_dir=BASE_FOLDER)
    cli = from_cli(option_table.flag_arguments(option, given), {})
    changed = dataclasses.replace(base, **{option.setting: getattr(cli, option.setting)})
    assert warm_proxy.fingerprint(changed, {}) != warm_proxy.fingerprint(base, {})
    lines = warm_proxy.differences(warm_proxy.fingerprint(changed, {}), warm_proxy.fingerprint(base, {}))
    assert any(line.startswith(f"{option.short}:") and f"({option.flag.spelling})" in line for line in lines)
    if option_table.plugin_sets(option):
        ini = {option.name: ini_text(given)} if option.ini else {}
        values = given if isinstance(given, list) else [given]
        args = [] if option.ini else [f"{option.pytest_flag.spelling}={value}" for value in values]
        plugin = from_plugin(pytester, ini, args)
        mine, theirs = warm_proxy.fingerprint(plugin, {}), warm_proxy.fingerprint(cli, {})
        assert mine[option.short] == theirs[option.short]


@pytest.mark.parametrize(
    "option", [o for o in option_table.OPTIONS if o.setting and not o.fingerprint], ids=lambda o: o.name
)
def test_a_setting_outside_the_fingerprint_does_not_change_it(option):
    """The report file and how the proxy was started: each run makes its own."""
    base = launcher.Settings("/bin/true", cassette_dir=BASE_FOLDER)
    other = {"cassette_report": REPORT, "cassette_started_by": "pytest"}[option.name]
    changed = dataclasses.replace(base, **{option.setting: other})
    assert warm_proxy.fingerprint(changed, {}) == warm_proxy.fingerprint(base, {})


@pytest.mark.parametrize("option", [o for o in option_table.OPTIONS if o.env], ids=lambda o: o.name)
def test_an_options_variable_is_in_the_fingerprint_unless_the_launcher_sets_it(option):
    """A variable the launcher does not take into its settings or set per run reaches the proxy's options: a warm
    proxy started with another value is not this run's."""
    base = launcher.Settings("/bin/true", cassette_dir=BASE_FOLDER)
    given, _ = samples()[option.name]
    fingerprint = warm_proxy.fingerprint(base, {option.env: str(given)})
    if option.env in warm_proxy.PER_RUN_VARIABLES:
        assert fingerprint == warm_proxy.fingerprint(base, {})
    else:
        assert fingerprint["environment"] == {option.env: str(given)}
