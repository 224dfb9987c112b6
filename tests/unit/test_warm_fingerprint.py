"""What makes a warm proxy the same as the one a run would start (launch/warm_proxy.py): the settings that decide
its answers, normalised where two spellings mean the same, and nothing a run makes for itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cassette_proxy.core.keys.frameworks import DEFAULT_FRAMEWORKS
from cassette_proxy.launch.launcher import Settings, parse_reverse
from cassette_proxy.launch.warm_proxy import differences, fingerprint

BASE = Settings(mitmdump="/usr/bin/true", cassette_dir=Path("cassettes"))


@pytest.mark.parametrize(
    "same",
    [
        {"frameworks": list(DEFAULT_FRAMEWORKS)},  # the plugin's ini gives them; `cassette run` leaves the default
        {"started_by": "pytest"},
        {"report": Path("run.json")},
        {"proxy_ca_only": True},
        {"port": 8080},
        {"key_headers": []},
    ],
)
def test_what_does_not_change_the_answers_does_not_count(same):
    assert fingerprint(dataclasses.replace(BASE, **same), {}) == fingerprint(BASE, {})


@pytest.mark.parametrize(
    ("other", "named"),
    [
        ({"mode": "record"}, "mode: 'record' in this run, 'replay' in the warm proxy (--mode)"),
        ({"extra_args": ["-s", "mine.py"]}, "(--mitmdump-arg / $CASSETTE_MITMDUMP_ARGS)"),
        ({"ignore_values": ["b", "a"]}, "ignore_values"),
        ({"frameworks": []}, "frameworks: [] in this run"),
        ({"reverse": [parse_reverse("ollama=http://localhost:11434@8181")]}, "fixed_ports: {'ollama': 8181}"),
        ({"telemetry": False}, "(--no-telemetry)"),
    ],
)
def test_what_changes_the_answers_counts_and_is_named(other, named):
    wanted = fingerprint(dataclasses.replace(BASE, **other), {})
    assert wanted != fingerprint(BASE, {})
    assert any(named in line for line in differences(wanted, fingerprint(BASE, {})))


def test_the_order_of_patterns_counts_even_when_the_sorted_settings_agree():
    one = fingerprint(dataclasses.replace(BASE, ignore_values=["a", "b"]), {})
    other = fingerprint(dataclasses.replace(BASE, ignore_values=["b", "a"]), {})
    assert one != other
    assert differences(one, other) == [
        f"arguments: {one['arguments']!r} in this run, {other['arguments']!r} in the "
        "warm proxy (the order of --ignore, --key-header, --ignore-value, --hosts or "
        "--mitmdump-arg)"
    ]


def test_only_variables_that_reach_the_proxy_count():
    per_run = {"CASSETTE_CONTROL_TOKEN": "secret", "CASSETTE_MODE": "record", "CASSETTE_RUN_PROXY": "{}", "HOME": "/x"}
    assert fingerprint(BASE, per_run) == fingerprint(BASE, {})
    timed = fingerprint(BASE, {"CASSETTE_REPLAY_TIMING": "recorded"})
    assert differences(timed, fingerprint(BASE, {})) == [
        "environment: CASSETTE_REPLAY_TIMING differ (CASSETTE_* / MITMPROXY* variables)"
    ]
    assert "secret" not in repr(fingerprint(BASE, per_run))


def test_the_code_stamp_is_the_version_and_content_not_the_file_times(tmp_path, monkeypatch):
    """The tool's install and the suite's install of one version: the same bytes, other mtimes, one warm proxy."""
    import os
    import shutil

    from cassette_proxy.launch import warm_proxy

    installs = []
    for name in ("tool", "suite"):
        shutil.copytree(warm_proxy.ADDON.parent / "cassette_proxy", tmp_path / name / "cassette_proxy")
        shutil.copy(warm_proxy.ADDON, tmp_path / name / "cassette.py")
        installs.append(tmp_path / name / "cassette.py")
    os.utime(installs[1], (1_000_000, 1_000_000))
    stamps = []
    for entry in installs:
        monkeypatch.setattr(warm_proxy, "ADDON", entry)
        stamps.append(warm_proxy.code_stamp())
    assert stamps[0] == stamps[1]
    with open(tmp_path / "suite" / "cassette_proxy" / "core" / "key.py", "a") as edited:
        edited.write("\n# an edit\n")
    assert warm_proxy.code_stamp() != stamps[0]
    monkeypatch.setattr(warm_proxy, "__version__", "0.0.0-other")
    monkeypatch.setattr(warm_proxy, "ADDON", installs[0])
    assert warm_proxy.code_stamp() != stamps[0]
