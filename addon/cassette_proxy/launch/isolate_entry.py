"""The first moments of `cassette run --isolate`'s command, in its own user and network namespace.

Started by launch/isolate.py as `python -I -S isolate_entry.py FD PORTS -- COMMAND ...` (the standard library
only: no site, no user paths, nothing of the suite's environment is imported). It

1. leaves the machine's network: a new user namespace (no privilege needed, the same uid and gid mapped in)
   and a network namespace of its own, where there is only `lo`, brought up here;
2. listens on 127.0.0.1 at the proxy's ports, inside, and hands those listening sockets to the launcher over
   the inherited Unix socket FD: the launcher relays what arrives to the proxy outside;
3. becomes COMMAND (`exec`): the same process, so signals, the exit status and the parent-death signal stay
   as `cassette run` set them.

A failure before COMMAND runs (the kernel refuses the namespaces, COMMAND is not found) is sent to the
launcher as `{"error": ..., "kind": ...}` and this exits 125: COMMAND never runs unsealed.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import struct
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
PR_SET_PDEATHSIG = 1
LISTEN_BACKLOG = 4096


class Refusal(Exception):
    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def enter_namespaces(libc: ctypes.CDLL) -> None:
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        raise Refusal(f"unshare(CLONE_NEWUSER | CLONE_NEWNET): {os.strerror(ctypes.get_errno())}", "namespace")
    try:
        # The same ids inside as outside: files keep their owners, and a suite sees the user it runs as.
        with open("/proc/self/setgroups", "w") as setgroups:
            setgroups.write("deny")
        with open("/proc/self/uid_map", "w") as uid_map:
            uid_map.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as gid_map:
            gid_map.write(f"{gid} {gid} 1")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(control, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))
    except OSError as e:
        raise Refusal(f"setting up the namespace: {e}", "namespace") from None


def listen(ports: list[int]) -> list[socket.socket]:
    listeners = []
    for port in ports:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as e:
            raise Refusal(f"listening on 127.0.0.1:{port} inside the namespace: {e}", "namespace") from None
        listener.listen(LISTEN_BACKLOG)
        listeners.append(listener)
    return listeners


def main(argv: list[str]) -> int:
    channel = socket.socket(fileno=int(argv[1]))
    ports = [int(port) for port in argv[2].split(",") if port]
    command = argv[4:]
    parent = os.getppid()
    try:
        program = shutil.which(command[0]) if command else None
        if program is None:
            raise Refusal(f"command not found: {command[0] if command else '(none)'}", "command")
        libc = ctypes.CDLL(None, use_errno=True)
        enter_namespaces(libc)
        listeners = listen(ports)
    except Refusal as e:
        channel.sendall(json.dumps({"error": str(e), "kind": e.kind}).encode())
        return 125
    socket.send_fds(channel, [b'{"ok": true}'], [listener.fileno() for listener in listeners])
    for listener in listeners:  # the launcher holds them now: COMMAND must not accept its own proxy's clients
        listener.close()
    channel.close()
    # A change of credentials clears the parent-death signal `cassette run` asked for: ask again.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        return 128 + signal.SIGTERM
    try:
        os.execv(program, command)
    except OSError as e:
        print(f"cassette: {command[0]}: {e}", file=sys.stderr)
    return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv))
