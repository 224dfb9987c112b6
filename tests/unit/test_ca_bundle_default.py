"""Which CA bundle `cassette run` gives clients when no flag says: the proxy's CA alone in replay (a new SDK
client parses the bundle once per proxy variable: 63 ms a client with the system's CAs against 1.3 ms), the full
bundle wherever some HTTPS is meant to go around the proxy."""

from __future__ import annotations

import argparse
import sys

import pytest
from cassette_proxy.cli import proxy_flags
from cassette_proxy.launch import client_env
from cassette_proxy.launch.launcher import proxy_ca_only_by_default


@pytest.mark.parametrize("no_proxy", ["", "localhost,127.0.0.1,::1", ".localhost, 127.0.0.1:8080", "[::1]:9"])
def test_replay_gives_the_proxy_ca_alone_when_nothing_goes_around_the_proxy(no_proxy):
    assert proxy_ca_only_by_default("replay", {"NO_PROXY": no_proxy, "PATH": "/bin"})


@pytest.mark.parametrize("mode", ["record", "update", "off"])
def test_modes_that_reach_upstreams_keep_the_full_bundle(mode):
    assert not proxy_ca_only_by_default(mode, {})


CORPORATE_CA = b"-----BEGIN CERTIFICATE-----\nMIIBcorporateNotInTheSystemStore\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("name", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE"])
def test_a_ca_the_system_does_not_trust_keeps_the_full_bundle(tmp_path, name):
    corporate = tmp_path / "corp.pem"
    corporate.write_bytes(CORPORATE_CA)
    assert not proxy_ca_only_by_default("replay", {name: str(corporate)})
    assert not proxy_ca_only_by_default("replay", {"SSL_CERT_DIR": str(tmp_path)})


def test_ca_variables_that_name_the_system_bundle_trust_nothing_more():
    """Many images point every CA variable at the system bundle: that is no CA of its own."""
    system = client_env.system_ca_bundle()
    assert system is not None
    environ = {name: str(system) for name in client_env.CA_VARIABLES}
    environ["SSL_CERT_DIR"] = str(system.resolve().parent)
    assert client_env.own_cas(environ) == []
    assert proxy_ca_only_by_default("replay", environ)


@pytest.mark.parametrize("no_proxy", ["localhost,internal.example.com", "10.0.0.0/8", "*", "127.0.0.1,.corp"])
def test_hosts_sent_around_the_proxy_keep_the_full_bundle(no_proxy):
    assert not proxy_ca_only_by_default("replay", {"NO_PROXY": no_proxy})
    assert not proxy_ca_only_by_default("replay", {"no_proxy": no_proxy})


@pytest.mark.parametrize(
    "flags, mode, expected",
    [
        ([], "replay", True),
        (["--system-cas"], "replay", False),
        (["--proxy-ca-only"], "record", True),
        ([], "record", False),
    ],
)
def test_the_flags_override_the_default(flags, mode, expected):
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    args = parser.parse_args(["--mode", mode, *flags])
    assert proxy_flags.settings_from_arguments(args, {"CASSETTE_MITMDUMP": sys.executable}).proxy_ca_only is expected


def test_the_two_flags_exclude_each_other(capsys):
    parser = argparse.ArgumentParser()
    proxy_flags.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--proxy-ca-only", "--system-cas"])
