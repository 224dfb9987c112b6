"""The fixtures the in-process test files share, which a test file takes with `pytest_plugins = ["addon_fixtures"]`
(the tier runs with --noconftest: tests/conftest.py imports the SDKs, which the proxy's environment does not hold)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from in_process import LoopbackUpstream, Proxies


@pytest.fixture
def upstream() -> Iterator[LoopbackUpstream]:
    """A loopback stand-in for the API (in_process.LoopbackUpstream), closed after the test."""
    fake = LoopbackUpstream()
    yield fake
    fake.close()


@pytest.fixture
def proxies(tmp_path: Path) -> Iterator[Proxies]:
    """In-process proxies on the test's cassette folder (in_process.Proxies), closed after the test."""
    proxies = Proxies(tmp_path)
    yield proxies
    proxies.close()
