"""Who a loopback connection comes from: the owner of the client's socket, asked of the kernel
(core/socket_owner.py). Tests run as root: a second user is a forked child that becomes `nobody`."""

from __future__ import annotations

import os
import socket

import pytest
from cassette_proxy.core import socket_owner
from second_user import NOBODY, accepted_from


@pytest.fixture
def listener():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server


@pytest.mark.parametrize("uid", [None, NOBODY], ids=["this user", "nobody"])
def test_the_owner_of_a_loopback_client_is_its_user(listener, uid):
    with accepted_from(listener, uid) as (peer, own):
        expected = os.getuid() if uid is None else uid
        assert socket_owner.socket_owner(peer, own) == expected
        assert socket_owner._by_proc(*socket_owner._unmapped(peer), *socket_owner._unmapped(own)) == expected
        mapped = (f"::ffff:{peer[0]}", peer[1]), (f"::ffff:{own[0]}", own[1])  # a dual-stack listener's view
        assert socket_owner.socket_owner(*mapped) == expected


def test_the_server_end_is_not_taken_for_the_client(listener):
    with accepted_from(listener, NOBODY) as (peer, own):
        # The other direction names the accepted socket, ours: the lookup must be the client's end.
        assert socket_owner.socket_owner(own, peer) == os.getuid()
        assert socket_owner.socket_owner(peer, own) == NOBODY


def test_no_such_socket_is_none(listener):
    assert socket_owner.socket_owner(("127.0.0.1", 1), listener.getsockname()) is None
