"""`cassette run --isolate`: the command in a network namespace of its own, where the proxy is the only way out.

Without it, replay is sealed for the clients that go through the proxy: one
that ignores `HTTPS_PROXY` (Node's `https` module, a native binary, a browser)
reaches the network, and Node trusts its bundled roots whatever
`NODE_EXTRA_CA_CERTS` says. With it the kernel seals every process the
command starts, whatever its language: in the namespace there is `lo`, with
nothing of this machine's listeners, and a route out that leads nowhere. A
connection to another address is refused at once and counted (a name cannot
even be resolved: the resolver's datagrams are refused too), one to another
loopback port is refused.

The proxy stays outside (a warm proxy too). isolate_entry.py, started in
the command's place, enters the namespaces, listens on 127.0.0.1 at the
proxy's ports inside, hands those listening sockets back over a Unix socket,
and becomes the command. The launcher accepts on them (a socket works
whichever namespace it was made in) and relays each connection to the same
port on the machine's 127.0.0.1, from a thread of its own. The proxy sees
the launcher's connections: this user's, so the owner check passes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import LauncherError
from .isolate_refusals import Attempt, refusal
from .lifeline import die_with_parent

ENTRY = Path(__file__).with_name("isolate_entry.py")
ISOLATED_VAR = "CASSETTE_ISOLATED"
"""Set in the isolated command's environment: a pytest plugin inside knows its suite is already isolated."""
SETUP_TIMEOUT = 30.0
CHUNK = 256 * 1024
REFUSED_HELP = (
    "the kernel refused a user and network namespace ({reason}): containers started without CAP_SYS_ADMIN or "
    "with unprivileged user namespaces disabled (sysctl user.max_user_namespaces=0, "
    "kernel.apparmor_restrict_unprivileged_userns=1) refuse it, and macOS has none. Run without --isolate: "
    "replay is then sealed for every client that uses the proxy variables, not for one that ignores them "
    "(docs/sealed-replay.md#clients-that-ignore-the-proxy)"
)


def start(command: Sequence[str], env: Mapping[str, str], ports: Sequence[int]) -> tuple[subprocess.Popen, Relay]:
    """COMMAND started in its own user and network namespace, and the relay from its loopback `ports` to the
    proxy's; LauncherError (COMMAND not run) when the namespace cannot be made or COMMAND is not found."""
    if not sys.platform.startswith("linux"):
        raise LauncherError("--isolate: " + REFUSED_HELP.format(reason=f"{sys.platform} has no network namespaces"))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(ENTRY), str(theirs.fileno()), ",".join(map(str, ports)), "--", *command],
            env={**env, ISOLATED_VAR: "1"}, pass_fds=[theirs.fileno()], preexec_fn=die_with_parent(signal.SIGTERM),
        )  # fmt: skip
    finally:
        theirs.close()
    with ours:
        ours.settimeout(SETUP_TIMEOUT)
        try:
            message, descriptors, _, _ = socket.recv_fds(ours, 65536, len(ports) + 1)
        except OSError as e:
            message, descriptors = b"", []
            reason = str(e)
        else:
            reason = "no answer"
    try:
        answer = json.loads(message) if message else {"error": f"the namespace's setup ended early ({reason})"}
    except ValueError:
        answer = {"error": f"the namespace's setup answered {message[:200]!r}"}
    device = descriptors.pop() if answer.get("device") and len(descriptors) == len(ports) + 1 else None
    listeners = [socket.socket(fileno=fd) for fd in descriptors]
    if not answer.get("ok") or len(listeners) != len(ports):
        for listener in listeners:
            listener.close()
        if device is not None:
            os.close(device)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        if process.poll() is None:
            process.kill()
            process.wait()
        error = str(answer.get("error", "no listening sockets came back"))
        if answer.get("kind") == "command":
            raise LauncherError(error)
        raise LauncherError("--isolate: " + REFUSED_HELP.format(reason=error))
    try:
        return process, Relay(listeners, device)
    except (OSError, RuntimeError) as e:  # COMMAND runs sealed, but could not reach the proxy: stop it
        process.kill()
        process.wait()
        raise LauncherError(f"--isolate: relaying the proxy's ports into the namespace failed: {e}") from None


class Relay:
    """Connections accepted inside the namespace, each passed to the same port on this machine's 127.0.0.1."""

    def __init__(self, listeners: Sequence[socket.socket], device: int | None = None) -> None:
        self.listeners = list(listeners)
        self.device = device
        """The namespace's route out (a TUN device), whose packets are refused and counted; None: not counted."""
        self.counted = device is not None
        self.loop = asyncio.new_event_loop()
        self.attempts: Counter[Attempt] = Counter()
        """Direct attempts from inside the namespace, refused (read after `stop()`)."""
        # Set up here, so that a failure is the caller's to see; served from a thread of its own.
        self.servers = [
            self.loop.run_until_complete(
                asyncio.start_server(
                    functools.partial(self._relay, port=listener.getsockname()[1]), sock=listener, limit=CHUNK
                )
            )
            for listener in self.listeners
        ]
        if self.device is not None:
            os.set_blocking(self.device, False)
            self.loop.add_reader(self.device, self._refuse)
        self.thread = threading.Thread(target=self._run, name="cassette isolate relay", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.loop.run_forever()
        finally:
            if self.device is not None:
                self.loop.remove_reader(self.device)
                os.close(self.device)
            for server in self.servers:
                server.close()
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.close()

    def _refuse(self) -> None:
        """Every packet waiting on the device: counted, and refused so that its sender fails at once."""
        assert self.device is not None
        while True:
            try:
                packet = os.read(self.device, 65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.loop.remove_reader(self.device)
                return
            attempt, answer = refusal(packet)
            if attempt is not None:
                self.attempts[attempt] += 1
            if answer is not None:
                with contextlib.suppress(OSError):
                    os.write(self.device, answer)

    def summary(self) -> str | None:
        """The summary's line for the attempts refused; None when there were none."""
        if not self.counted:
            return "cassette: --isolate: direct attempts to leave were refused but not counted (no /dev/net/tun here)"
        if not self.attempts:
            return None
        total = sum(self.attempts.values())
        listed = ", ".join(f"{attempt} ({count})" for attempt, count in sorted(self.attempts.items()))
        return f"cassette: --isolate: refused {total} direct attempt{'s' if total != 1 else ''} to leave: {listed}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port, limit=CHUNK)
        except OSError:
            writer.transport.abort()
            return
        await asyncio.gather(_pipe(reader, upstream_writer, writer), _pipe(upstream_reader, writer, upstream_writer))
        for end in (writer, upstream_writer):
            end.close()

    def stop(self) -> None:
        """Close the listeners and every relayed connection (COMMAND has ended)."""
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, source: asyncio.StreamWriter) -> None:
    """Bytes one way until EOF, then a half close (HTTP clients may close their side first); a reset of either
    end aborts both (`source`: the writer of the reader's own connection)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.transport.abort()
        source.transport.abort()
