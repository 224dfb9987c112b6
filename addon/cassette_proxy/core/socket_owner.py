"""Which user a loopback TCP connection comes from: the uid that owns the client's end of it.

A proxy on 127.0.0.1 is reachable by every user of the machine (`ss -ltn` shows
its port). The client's socket is in the same kernel, so who made it is known
exactly: the kernel's socket table names the owner of the socket bound to the
client's address and connected to ours. Asked by exact lookup over netlink
(`sock_diag`, what `ss` uses): about 10 µs. Where netlink is missing (a
sandboxing kernel), `/proc/net/tcp` says the same, walking the whole table
(milliseconds). Linux only; `SUPPORTED` says whether this system can answer.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
import sys

SUPPORTED = sys.platform.startswith("linux")
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NO_COOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF

Address = tuple[str, int]
IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _unmapped(address: Address) -> tuple[IP, int]:
    ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip, int(address[1])


def socket_owner(client: Address, server: Address) -> int | None:
    """The uid owning the TCP socket at `client` connected to `server` (both as the server's side sees them: the
    peer's address and its own); None when no such socket exists (it closed). OSError when neither netlink nor
    /proc could be asked."""
    (client_ip, client_port), (server_ip, server_port) = _unmapped(client), _unmapped(server)
    if client_ip.version != server_ip.version:
        return None
    try:
        return _by_netlink(client_ip, client_port, server_ip, server_port)
    except OSError:
        return _by_proc(client_ip, client_port, server_ip, server_port)


def _by_netlink(client_ip: IP, client_port: int, server_ip: IP, server_port: int) -> int | None:
    family = socket.AF_INET if client_ip.version == 4 else socket.AF_INET6
    # struct inet_diag_sockid: ports in network order, addresses in 16 bytes, interface, cookie (none: any socket)
    sockid = struct.pack("!HH", client_port, server_port) + client_ip.packed.ljust(16, b"\0")
    sockid += server_ip.packed.ljust(16, b"\0") + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, ALL_STATES) + sockid
    message = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + request
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as netlink:
        netlink.settimeout(1.0)
        netlink.sendto(message, (0, 0))
        answer = netlink.recv(8192)
    kind = struct.unpack_from("=H", answer, 4)[0]
    if kind == NLMSG_ERROR:
        error = -struct.unpack_from("=i", answer, 16)[0]
        if error == 2:  # ENOENT: no such socket
            return None
        raise OSError(error, f"sock_diag: {error}")
    if kind != SOCK_DIAG_BY_FAMILY or len(answer) < 16 + 80:
        raise OSError(f"sock_diag: unexpected answer of type {kind}")
    # struct inet_diag_msg after the 16-byte header: family, state, timer, retrans, sockid (48), expires, rqueue,
    # wqueue, uid, inode
    return int(struct.unpack_from("=I", answer, 16 + 4 + 48 + 12)[0])


def _proc_address(ip: IP, port: int) -> str:
    """An address as /proc/net/tcp prints it: each 32-bit word of the address in host order, in hex; the port."""
    packed = ip.packed
    words = (struct.unpack("=I", packed[i : i + 4])[0] for i in range(0, len(packed), 4))
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def _by_proc(client_ip: IP, client_port: int, server_ip: IP, server_port: int) -> int | None:
    local, remote = _proc_address(client_ip, client_port), _proc_address(server_ip, server_port)
    with open("/proc/net/tcp" if client_ip.version == 4 else "/proc/net/tcp6", encoding="ascii") as table:
        for line in table:
            fields = line.split()
            if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                return int(fields[7])
    return None
