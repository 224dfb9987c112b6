"""Option values, in-process: mitmproxy enforces no choices and ignores typos, so the addon validates every value
and a bad one raises the OptionsError that stops mitmdump at start, with a message naming the option and the value.
Each value is given as `--set` gives it (`name=value`, parsed by mitmproxy). That mitmdump really stops with the
message: tests/integration/test_options.py."""

from __future__ import annotations

import re

import pytest
from in_process import InProcessProxy
from mitmproxy import exceptions

CREDENTIAL_HEADERS = ["Authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"]


@pytest.fixture
def proxy(tmp_path):
    proxy = InProcessProxy(tmp_path / "cassettes", tmp_path / "report.json")
    yield proxy
    proxy.close()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("cassette_mode=replya", "cassette_mode: 'replya' is not a mode; use one of replay, record, update, off"),
        ("cassette_repeats=sequential", "cassette_repeats: 'sequential' is not a choice; use one of reuse, sequence"),
        ("cassette_scope=per-test", "cassette_scope: 'per-test' is not a choice; use one of shared, test"),
        ("cassette_hosts=", "cassette_hosts: [''] must list host globs (`*` for every host)"),
        ("cassette_allow_hosts= ", "cassette_allow_hosts: [' '] must list host globs (`*` for every host)"),
        ("cassette_ignore=messages..id", "cassette_ignore: invalid ignore path 'messages..id'"),
        ("cassette_ignore=messages[0].name", "cassette_ignore: invalid ignore path 'messages[0].name'"),
        ("cassette_ignore_values=(", "cassette_ignore_values: value pattern '(' is not a regular expression"),
        *[
            (f"cassette_key_headers={header}", f"cassette_key_headers: {header.lower()!r} carries a credential")
            for header in CREDENTIAL_HEADERS
        ],
        ("cassette_record_statuses=2xxx", "cassette_record_statuses: '2xxx' is not a status"),
        ("cassette_upstream_timeout=0", "cassette_upstream_timeout: 0 must be a whole number of seconds above 0"),
        ("cassette_max_size=0", "cassette_max_size: 0 must be a number of bytes above 0"),
        ("cassette_preload=-1", "cassette_preload: -1 must be 0 or more"),
        (
            "cassette_report=/no/such/folder/report.json",
            "cassette_report: the folder of '/no/such/folder/report.json' does not exist",
        ),
        (
            "cassette_token_endpoints=https://x.example/token",
            "cassette_token_endpoints: 'https://x.example/token' is not",
        ),
        ("cassette_redact=emial", "cassette_redact: 'emial' is neither a rule name"),
        ("cassette_started_by=make", "cassette_started_by: 'make' is not a choice"),
    ],
)
def test_a_bad_value_raises_the_error_that_stops_mitmdump_naming_option_and_value(proxy, setting, message):
    with pytest.raises(exceptions.OptionsError, match=re.escape(message)):
        proxy.start(setting)


def test_an_empty_host_list_is_refused(proxy):
    with pytest.raises(exceptions.OptionsError, match=re.escape("cassette_hosts: [] must list host globs")):
        proxy.start(cassette_hosts=[])


def test_a_cassette_dir_that_is_a_file_is_refused(proxy, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(
        exceptions.OptionsError, match=f"cassette_dir: '{re.escape(str(tmp_path))}/file' exists and is not a folder"
    ):
        proxy.start(f"cassette_dir={tmp_path / 'file'}")


@pytest.mark.parametrize(
    ("environment", "settings", "mode"),
    [({"CASSETTE_MODE": "record"}, [], "record"), ({"CASSETTE_MODE": "record"}, ["cassette_mode=update"], "update"),
     ({}, [], "replay")],
    ids=["the-environment-sets-the-default", "an-explicit-set-wins-over-the-environment", "the-default-is-replay"],
)  # fmt: skip
def test_the_mode_comes_from_set_else_the_environment_else_replay(tmp_path, monkeypatch, environment, settings, mode):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    proxy = InProcessProxy(tmp_path / "cassettes", tmp_path / "report.json")  # the default is read as the addon loads
    try:
        proxy.start(*settings)
        assert proxy.options.cassette_mode == mode
        assert proxy.done()["mode"] == mode
    finally:
        proxy.close()
