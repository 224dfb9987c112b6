"""Which hosts count as this machine: decided from the text alone, never by a resolver (core/hosts.is_loopback)."""

import pytest
from cassette_proxy.core.keys.hosts import is_loopback


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1", "localhost", "LocalHost.", " localhost"]
)
def test_literal_loopback_addresses_and_the_bare_name_localhost_are_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    [
        "exfil.localhost",  # RFC 6761 asks resolvers to keep it local; a hosts file or a resolver may not
        "localhost.localdomain",
        "db",  # a docker-compose service name
        "host.docker.internal",
        "127.0.0.1.nip.io",
        "127.1",  # what inet_aton reads as 127.0.0.1: not an address as written, so a name to refuse
        "0.0.0.0",
        "10.0.0.1",
        "::",
        "",
    ],
)
def test_every_other_name_or_address_is_not(host):
    assert not is_loopback(host)
