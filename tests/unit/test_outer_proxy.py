"""The plugin inside `cassette run`: it uses the outer proxy when that proxy serves the suite as its own would."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest
from cassette_proxy.cli import proxy_flags
from cassette_proxy.launch.launcher import Settings, parse_reverse
from cassette_proxy.launch.outer_proxy import OUTER_PROXY_VAR, describe, outer_proxy, run_flags


def environ_of(settings: Settings) -> dict[str, str]:
    proxy = SimpleNamespace(url="http://127.0.0.1:4000", base_urls={"openai": "http://127.0.0.1:4001/v1"},
                            settings=settings)  # fmt: skip
    return {OUTER_PROXY_VAR: describe(proxy), "CASSETTE_CONTROL_TOKEN": "t"}


def test_the_same_settings_spelled_otherwise_are_no_conflict(tmp_path):
    outer = outer_proxy(environ_of(Settings("", cassette_dir=tmp_path / "c", key_headers=["X-Tenant"])))
    suite = Settings("", cassette_dir=tmp_path / "x" / ".." / "c", key_headers=["x-tenant", "anthropic-version"])
    assert outer.conflicts(suite) == []
    assert (outer.url, outer.base_urls, outer.control().token) == (
        "http://127.0.0.1:4000",
        {"openai": "http://127.0.0.1:4001/v1"},
        "t",
    )


def test_each_setting_that_would_answer_otherwise_is_named_with_its_flag(tmp_path):
    outer = outer_proxy(
        environ_of(Settings("", cassette_dir=tmp_path / "c", reverse=[parse_reverse("openai=https://api.openai.com")]))
    )
    suite = Settings("", mode="record", cassette_dir=tmp_path / "d", ignore=["user"], frameworks=[], telemetry=False,
                     reverse=[parse_reverse("ollama=http://localhost:11434")])  # fmt: skip
    conflicts = outer.conflicts(suite)
    assert [line.split(":")[0] for line in conflicts] == [
        "mode",
        "dir",
        "ignore",
        "frameworks",
        "telemetry",
        "reverse routes",
    ]
    assert conflicts[-1] == "reverse routes: the suite's cassette_reverse needs --reverse ollama=http://localhost:11434"
    assert "(--frameworks)" in conflicts[3]


def test_no_variable_is_no_outer_proxy_and_a_foreign_one_is_an_error():
    assert outer_proxy({}) is None
    with pytest.raises(ValueError, match="must come from the same version of cassette-proxy"):
        outer_proxy({OUTER_PROXY_VAR: json.dumps({"url": "x"}), "CASSETTE_CONTROL_TOKEN": "t"})


@pytest.mark.parametrize("frameworks", [None, [], ["pydantic-ai"]])
def test_run_flags_start_a_proxy_that_serves_the_suite_as_its_own(tmp_path, frameworks):
    """The plugin's `cassette_isolate` runs its session inside `cassette run --isolate` with these flags."""
    suite = Settings(
        "", mode="record", cassette_dir=tmp_path / "c", hosts=["api.example.com", "*.openai.azure.com"],
        reverse=[parse_reverse("openai=https://api.openai.com"), parse_reverse("ollama=http://localhost:11434@8181")],
        ignore=["metadata.trace_id"], key_headers=["x-tenant"], ignore_values=["sess_[a-z]+"], frameworks=frameworks,
        telemetry=False, telemetry_sinks=["otel.example.com/v1/traces"], allow_hosts=["cdn.example.com"],
    )  # fmt: skip
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    args = parser.parse_args(run_flags(suite))
    args.mitmdump = None
    started = proxy_flags.settings_from_arguments(args, {"CASSETTE_MITMDUMP": "/bin/true"})
    assert outer_proxy(environ_of(started)).conflicts(suite) == []
    assert started.allow_hosts == ["cdn.example.com"] and started.reverse == suite.reverse
