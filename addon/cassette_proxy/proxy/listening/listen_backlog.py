"""A listen backlog deep enough for a burst of connections: mitmproxy's servers listen with asyncio's 100.

A suite with many workers behind one proxy opens hundreds of connections at
once; past the backlog, the kernel drops or resets the excess before
mitmproxy accepts them. mitmproxy has no option for it, but on Linux calling
`listen()` again on a listening socket changes its backlog in place (up to
`net.core.somaxconn`), so the addon raises it once the servers listen.
"""

from __future__ import annotations

import asyncio
import os
import socket

from ...core.output import logger

log = logger(__name__)

LISTEN_BACKLOG = 4096
"""What the proxy asks for; the kernel caps it at net.core.somaxconn (4096 on current Linux)."""


def raise_backlog(proxyserver, backlog: int = LISTEN_BACKLOG) -> int:
    """Re-listen every TCP socket of mitmproxy's running servers with `backlog`; the number of sockets changed."""
    changed = 0
    for instance in getattr(proxyserver, "servers", ()):
        # `_servers` is mitmproxy's (AsyncioServerInstance); a version without it keeps asyncio's default.
        for server in getattr(instance, "_servers", ()):
            if not isinstance(server, asyncio.Server):
                continue  # UDP (reverse HTTP/3) has no backlog
            for listening in server.sockets:
                # A duplicate of the descriptor: the backlog belongs to the socket, and closing the
                # duplicate leaves mitmproxy's own descriptor open.
                duplicate = socket.socket(fileno=os.dup(listening.fileno()))
                try:
                    duplicate.listen(backlog)
                    changed += 1
                except OSError as e:
                    log.warning(f"cassette: could not raise the listen backlog to {backlog}: {e}")
                finally:
                    duplicate.close()
    return changed
