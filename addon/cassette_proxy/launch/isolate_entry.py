"""The first moments of `cassette run --isolate`'s command, in its own user and network namespace.

Started by launch/isolate.py as `python -I -S isolate_entry.py FD PORTS -- COMMAND ...` (the standard library
only: no site, no user paths, nothing of the suite's environment is imported). It

1. leaves the machine's network: a new user namespace (no privilege needed, the same uid and gid mapped in)
   and a network namespace of its own, where there is only `lo`, brought up here, and a TUN device as the
   only route out, whose packets the launcher answers with refusals and counts;
2. listens on 127.0.0.1 at the proxy's ports, inside, and hands those listening sockets (and the device) to
   the launcher over the inherited Unix socket FD: the launcher relays what arrives to the proxy outside;
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
SIOCSIFADDR = 0x8916
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
DEVICE = b"cassette0"
DEVICE_ADDRESS = "198.18.0.1"
"""The namespace's own address on its way out: in the benchmarking range (RFC 2544), no one's real host."""
RTM_NEWROUTE = 24
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_LINK, RTN_UNICAST, RTA_OIF = 254, 3, 253, 1, 4


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


def counting_device() -> int | None:
    """A TUN device as the namespace's only route out, its file descriptor for the launcher, which answers each
    packet sent to it with a refusal and counts it (launch/isolate.py); None where /dev/net/tun is missing: direct
    attempts then fail with no route, uncounted."""
    try:
        device = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.ioctl(device, TUNSETIFF, struct.pack("16sH14x", DEVICE, IFF_TUN | IFF_NO_PI))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
            address = struct.pack("=H2s4s8x", socket.AF_INET, b"\0\0", socket.inet_aton(DEVICE_ADDRESS))
            fcntl.ioctl(control, SIOCSIFADDR, struct.pack("16s16s8x", DEVICE, address))
            flags = struct.unpack("16sH14x", fcntl.ioctl(control, SIOCGIFFLAGS, struct.pack("16sH14x", DEVICE, 0)))[1]
            fcntl.ioctl(control, SIOCSIFFLAGS, struct.pack("16sH14x", DEVICE, flags | IFF_UP))
        default_route(socket.if_nametoindex(DEVICE.decode()))
    except OSError:
        os.close(device)
        return None
    return device


def default_route(interface: int) -> None:
    """`ip route add default dev INTERFACE`, over netlink (no iproute2 needed)."""
    route = struct.pack(
        "=BBBBBBBBI", socket.AF_INET, 0, 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, RT_SCOPE_LINK, RTN_UNICAST, 0
    )
    route += struct.pack("=HHI", 8, RTA_OIF, interface)
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    message = struct.pack("=IHHII", 16 + len(route), RTM_NEWROUTE, flags, 1, 0) + route
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as netlink:
        netlink.sendto(message, (0, 0))
        answer = netlink.recv(4096)
    if struct.unpack_from("=H", answer, 4)[0] == NLMSG_ERROR and (error := -struct.unpack_from("=i", answer, 16)[0]):
        raise OSError(error, os.strerror(error))


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
        device = counting_device()
    except Refusal as e:
        channel.sendall(json.dumps({"error": str(e), "kind": e.kind}).encode())
        return 125
    handed = [listener.fileno() for listener in listeners] + ([device] if device is not None else [])
    socket.send_fds(channel, [json.dumps({"ok": True, "device": device is not None}).encode()], handed)
    for listener in listeners:  # the launcher holds them now: COMMAND must not accept its own proxy's clients
        listener.close()
    if device is not None:
        os.close(device)
    channel.close()
    # The kernel clears the parent-death signal on some changes of credentials (commit_creds): asked again here,
    # after the new namespace, so COMMAND ends with `cassette run` whatever the kernel made of the change.
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
