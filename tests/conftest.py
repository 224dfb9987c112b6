"""Fixtures for the integration tests: a fake upstream (HTTP and HTTPS) and mitmdump with the addon; and, for every
tier this conftest reaches, the Hypothesis profile (hypothesis_profiles.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis_profiles  # noqa: F401  (registers and loads the profile before any test module is imported)
import pytest
from cassette_proxy import cli
from harness import FakeUpstream, Proxy, make_certificate

# Every command's modules, imported before any test: pytester (several integration files) removes from sys.modules, as
# its test ends, the modules first imported during it, and a later test importing them again mixed two copies of one
# module (an `Unusable` of the one is no `Unusable` to the other: `cassette import` in-process failed with a KeyError
# whenever a pytester test was the first of its worker to import).
cli.subcommands()


@pytest.fixture(scope="session")
def upstream_certificate(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for the fake upstream; mitmproxy trusts it through ssl_verify_upstream_trusted_ca."""
    return make_certificate(tmp_path_factory.mktemp("certs"))


@pytest.fixture(params=["https", "http"])
def upstream(request, tmp_path, upstream_certificate) -> Iterator[FakeUpstream]:
    """The fake API, over HTTPS with a self-signed certificate and over plain HTTP."""
    fake = FakeUpstream(tmp_path / "upstream", upstream_certificate if request.param == "https" else None).start()
    yield fake
    fake.stop()


@pytest.fixture
def https_upstream(tmp_path, upstream_certificate) -> Iterator[FakeUpstream]:
    fake = FakeUpstream(tmp_path / "upstream", upstream_certificate).start()
    yield fake
    fake.stop()


@pytest.fixture
def http_upstream(tmp_path) -> Iterator[FakeUpstream]:
    """The fake API over plain HTTP only, for what only plain HTTP can show."""
    fake = FakeUpstream(tmp_path / "http-upstream").start()
    yield fake
    fake.stop()


@pytest.fixture
def cassette_dir(tmp_path) -> Path:
    return tmp_path / "cassettes"


@pytest.fixture
def start_proxy(tmp_path, cassette_dir) -> Iterator[Callable[..., Proxy]]:
    """Start mitmdump with the addon; every proxy started is stopped (by PID) at the end of the test."""
    started: list[Proxy] = []

    def start(upstream: FakeUpstream | None = None, *, env: dict | None = None, **options) -> Proxy:
        proxy = Proxy(tmp_path / f"proxy{len(started)}", cassette_dir, upstream, **options)
        started.append(proxy)
        return proxy.start(env)

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def client_env(monkeypatch) -> Callable[[Proxy], None]:
    """Point this process's HTTP clients at a proxy the way a user's shell would: environment variables."""

    def use(proxy: Proxy) -> None:
        for name, value in proxy.client_env().items():
            monkeypatch.setenv(name, value)

    return use
