"""Another user of the machine, for tests that run as root: a forked child that becomes `nobody`."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator

NOBODY = 65534


@contextlib.contextmanager
def accepted_from(server: socket.socket, uid: int | None) -> Iterator[tuple[tuple, tuple]]:
    """(peer, own end) of a connection `server` accepted from a client of `uid` (None: this process), open until
    the block ends."""
    pid = os.fork() if uid is not None else None
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            client = socket.create_connection(server.getsockname()[:2])
            client.recv(1)  # held open until the parent closes its end
        finally:
            os._exit(0)
    client = socket.create_connection(server.getsockname()[:2]) if pid is None else None
    accepted, peer = server.accept()
    try:
        yield peer, accepted.getsockname()
    finally:
        accepted.close()
        if client is not None:
            client.close()
        if pid is not None:
            os.waitpid(pid, 0)


def exchange_as(uid: int, port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """What a client of `uid` (a forked child: no exec, so no path need be readable by it) gets back for
    `request` sent to 127.0.0.1:`port`: the bytes until the connection closes, b"" when refused."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            data = b""
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                s.sendall(request)
                while chunk := s.recv(65536):
                    data += chunk
            os.write(write, data[:60000])
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    os.waitpid(pid, 0)
    return data
