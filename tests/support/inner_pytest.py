"""The plugins of a pytest a test starts itself (pytester's subprocess runs, `cassette run -- pytest`).

The test environment holds every pytest plugin its SDKs and frameworks bring (hypothesis, langsmith, syrupy,
pytest-asyncio, anyio, codspeed, ...). An inner pytest that loads them all spends about 2.5 s importing them on a
quiet machine, per start and per xdist worker: two thirds of a per-test recording test's time. So an inner pytest
loads only the plugins its suite uses, the cassette plugin by its module. One test still lets a suite find the plugin
by its entry point among everything installed, as a user's pytest does
(test_pytest_plugin.py::test_records_with_cassette_mode_option_then_replays_by_default).
"""

from __future__ import annotations

import pytest

CASSETTE = "cassette_proxy.pytest_plugin"
XDIST = "xdist.plugin"
RECORDING = "pytest_recording.plugin"
"""pytest-recording, for the suites that record with VCR before they switch to the proxy."""


def only_plugins(monkeypatch: pytest.MonkeyPatch, *plugins: str) -> None:
    """Inner pytests (and their xdist workers) load the cassette plugin, xdist and `plugins`, and nothing else."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTEST_PLUGINS", ",".join([CASSETTE, XDIST, *plugins]))


def every_installed_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytests find their plugins by entry point, as a user's pytest does."""
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("PYTEST_PLUGINS", raising=False)
