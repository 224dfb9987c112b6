"""Listening sockets handed over by the launcher: the command starts at once, its first connections wait for us.

mitmdump takes seconds to import and configure, and the command it serves
(an interpreter, the SDKs, a test collection) takes about as long to start. So
the launcher binds and listens on the run's ports itself, starts mitmdump with
those sockets inherited (`$CASSETTE_HANDOVER`: `{"mode": ..., "sockets": {port: fd}}`)
and `--set server=false`, and starts the command at the same time. A client
that connects before the proxy is ready is held in the kernel's accept queue,
not refused: nothing accepts it until this module says so.

mitmproxy starts its servers before any addon's `running`, and 12.x before it
loads the scripts, so the servers are started here instead, in three steps:

- at import (mitmdump loading `addon/cassette.py`), mitmproxy's `listen` is
  wrapped: a mode on a handed port gets an asyncio server on the handed socket
  that does not accept yet (TCP only: the UDP twin of a reverse `https`
  listener, for HTTP/3, is not opened);
- `ListenOnHandedSockets.running`, listed before the cassette addon, turns
  `server` on and waits for mitmproxy's servers: the addon's own `running`
  then sees them (routes, report, ready file);
- `ServeHandedSockets.running`, listed after it, checks that the proxy runs in
  the mode the launcher asked for, then starts accepting. A proxy in another
  mode never answers a request: it closes the sockets (queued clients get a
  reset) and shuts down.

Without this module mitmdump would not serve at all (`server=false`), and
mitmproxy cannot bind the handed ports itself: nothing serves by accident.

Stopping: the addon writes its report in `done`; what follows is the
interpreter tearing down its modules, 0.15-0.4 s here. After a requested
shutdown (SIGTERM) `done` registers an exit that flushes the logs and ends the
process at once.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import socket
import sys

from mitmproxy import ctx
from mitmproxy.proxy import mode_servers

from ...core.output import logger

log = logger(__name__)

HANDOVER_VAR = "CASSETTE_HANDOVER"
LISTEN_BACKLOG = 4096
"""The backlog asyncio re-listens a handed socket with (the launcher listened with the same)."""


def parse_handover(value: str) -> tuple[str, dict[int, int]]:
    """`$CASSETTE_HANDOVER` → (the mode the launcher asked for, {port: file descriptor}); ValueError when malformed."""
    data = json.loads(value)
    if not isinstance(data, dict) or not isinstance(data.get("mode"), str) or not isinstance(data.get("sockets"), dict):
        raise ValueError(f'${HANDOVER_VAR} is not {{"mode": ..., "sockets": {{port: fd}}}}: {value[:200]!r}')
    return data["mode"], {int(port): int(fd) for port, fd in data["sockets"].items()}


class HandedSockets:
    """The sockets of one launch, by port, and the servers made on them that wait to accept."""

    def __init__(self, mode: str, descriptors: dict[int, int]) -> None:
        self.mode = mode
        self.sockets = {port: socket.socket(fileno=fd) for port, fd in descriptors.items()}
        self.waiting: list[asyncio.Server] = []
        self.refused = False

    def install(self) -> None:
        """Wrap mitmproxy's `listen` (11.x and 12.x: `AsyncioServerInstance.listen(self, host, port)`)."""
        original = mode_servers.AsyncioServerInstance.listen
        handed = self

        async def listen(instance, host: str, port: int) -> list:
            sock = handed.sockets.pop(port, None)
            if sock is None:
                return await original(instance, host, port)
            server = await asyncio.start_server(
                instance.handle_stream, sock=sock, backlog=LISTEN_BACKLOG, start_serving=False
            )
            handed.waiting.append(server)
            return [server]

        # A patch of mitmproxy's own method (the only way to give it a socket): mypy rightly sees a method replaced.
        mode_servers.AsyncioServerInstance.listen = listen  # type: ignore[method-assign,assignment]

    async def serve(self) -> None:
        """Accept from now on: queued connections first."""
        for server in self.waiting:
            await server.start_serving()
        self.waiting = []

    def refuse(self) -> None:
        """Never accept: queued and later clients get a reset."""
        for server in self.waiting:
            server.close()
        for sock in self.sockets.values():
            sock.close()
        self.waiting, self.sockets = [], {}
        self.refused = True


def _from_environment() -> HandedSockets | None:
    value = os.environ.pop(HANDOVER_VAR, None)  # not for the replay workers this process starts
    if not value:
        return None
    mode, descriptors = parse_handover(value)
    handed = HandedSockets(mode, descriptors)
    handed.install()
    return handed


HANDED = _from_environment()
"""This process's handed sockets, installed as mitmdump loads the addon; None when mitmdump was started by hand."""


class ListenOnHandedSockets:
    """Listed before the cassette addon in `addon/cassette.py`: mitmproxy's servers, on the handed sockets, exist
    (not accepting) before the addon's `running`."""

    def __init__(self, handed: HandedSockets | None) -> None:
        self.handed = handed

    async def running(self) -> None:
        if self.handed is None:
            return
        ctx.options.update(server=True)  # the launcher started mitmdump with server=false
        if not await ctx.master.addons.get("proxyserver").setup_servers():
            _refuse(self.handed, "mitmproxy could not start its servers (see above)")


class ServeHandedSockets:
    """Listed after the cassette addon: its `running` (routes, report, ready file) comes first."""

    def __init__(self, handed: HandedSockets | None) -> None:
        self.handed = handed

    async def running(self) -> None:
        handed = self.handed
        if handed is None or handed.refused:
            return
        if handed.sockets:
            _refuse(
                handed, f"no proxy mode listens on the handed port(s) {', '.join(map(str, sorted(handed.sockets)))}"
            )
            return
        mode = ctx.options.cassette_mode
        if mode != handed.mode:
            _refuse(handed, f"the proxy runs in mode {mode!r}, not the {handed.mode!r} the launcher asked for")
            return
        await handed.serve()

    def done(self) -> None:
        if self.handed is not None and ctx.master.should_exit.is_set():
            atexit.register(_exit_now)  # registered last, so run first: after every addon's `done`


def _refuse(handed: HandedSockets, reason: str) -> None:
    log.error(f"cassette: not serving: {reason}; the listening sockets are closed")
    handed.refuse()
    ctx.master.shutdown()


def _exit_now() -> None:
    """The end of a requested shutdown, without the interpreter's teardown: the report is written, logs flushed."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader gone
            stream.flush()
    os._exit(0)
