"""pytest-recording's command line, markers and fixtures without pytest-recording installed (this tier's environment
has none): a suite's CI command (`--record-mode=none --block-network --allowed-hosts=…`), its `--strict-markers`
and its conftest's `record_mode` / `vcr_config` keep working, each meaning what the proxy does. Parsed by pytest
(pytester) without starting a proxy; `--allowed-hosts` is followed to the addon's `cassette_allow_hosts`."""

from __future__ import annotations

import pytest
from cassette_proxy import pytest_plugin
from test_option_table import launched

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def no_mode_variable(monkeypatch):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)


def settings(pytester, *args: str):
    pytester.makeini("[pytest]\n")
    return pytest_plugin._settings(pytester.parseconfig(*args), mitmdump="/bin/true")


def test_allowed_hosts_reach_the_addon_as_allow_hosts(pytester, tmp_path):
    given = settings(pytester, "--block-network", "--allowed-hosts=cdn.example.com, *.images.test,127.0.0.1:8080")
    assert list(launched(given, tmp_path)["cassette_allow_hosts"]) == [
        "cdn.example.com",
        "*.images.test",
        "127.0.0.1:8080",
    ]
    assert list(launched(settings(pytester, "--block-network"), tmp_path)["cassette_allow_hosts"]) == []


@pytest.mark.parametrize("regex", [r".*\.example\.com", "api.(openai|anthropic).com", "^cdn.example.com$"])
def test_a_regular_expression_in_allowed_hosts_is_refused_naming_the_glob(pytester, regex):
    with pytest.raises(pytest.UsageError, match=r"looks like a regular expression .* write `\*\.example\.com`"):
        settings(pytester, f"--allowed-hosts={regex}")


def test_a_recording_suites_markers_options_and_fixtures_run_under_strict_markers(pytester):
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def vcr_config():
            return {"filter_headers": ["authorization"]}  # a suite's own: overrides the plugin's
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.block_network
        @pytest.mark.vcr
        @pytest.mark.default_cassette("shared.yaml")
        def test_marked(record_mode, vcr_config):
            assert (record_mode, vcr_config) == ("none", {"filter_headers": ["authorization"]})
        """
    )
    result = pytester.runpytest_inprocess("--strict-markers", "--record-mode=none", "--block-network",
                                          "--allowed-hosts=cdn.example.com", "-p", "no:cacheprovider")  # fmt: skip
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "none"),
        (["--record-mode=once"], "once"),
        (["--cassette-mode=record"], "new_episodes"),
        (["--record-mode=none", "--cassette-mode=update"], "all"),  # --cassette-mode wins, as it does for the proxy
    ],
)
def test_record_mode_says_the_mode_the_proxy_runs_in(pytester, args, expected):
    pytester.makepyfile(f"def test_mode(record_mode):\n    assert record_mode == {expected!r}\n")
    pytester.runpytest_inprocess(*args, "-p", "no:cacheprovider").assert_outcomes(passed=1)
