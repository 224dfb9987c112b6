"""What the only route out of `cassette run --isolate`'s namespace answers: a refusal for every packet, counted.

The namespace's default route is a TUN device whose other end `cassette run`
holds (isolate_entry.py). No packet sent there goes anywhere: each gets the
answer that makes its sender fail at once, and each attempt is counted for the
run's summary. A TCP connection gets a reset (`ECONNREFUSED`); a UDP datagram
(a name lookup to the resolver in `/etc/resolv.conf`) an ICMP port
unreachable, so a resolver gives up at once instead of after its timeouts;
anything else an ICMP "administratively prohibited". IPv6 has no route there
at all (`ENETUNREACH`), uncounted.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

TCP, UDP, ICMP = 6, 17, 1
FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10


@dataclass(frozen=True, order=True)
class Attempt:
    """One direct attempt from inside the namespace: where it was meant to go."""

    host: str
    port: int
    protocol: str

    def __str__(self) -> str:
        where = f"{self.host}:{self.port}" if self.port else self.host
        return where if self.protocol == "tcp" else f"{where} ({self.protocol})"


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4(source: bytes, destination: bytes, protocol: int, payload: bytes) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, protocol, 0, source, destination)
    return header[:10] + struct.pack("!H", checksum(header)) + header[12:] + payload


def refusal(packet: bytes) -> tuple[Attempt | None, bytes | None]:
    """The attempt a packet makes (None for one that starts nothing: a reset, a later segment) and the packet that
    refuses it (None: nothing to answer)."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None, None
    header_length = (packet[0] & 0x0F) * 4
    protocol, source, destination = packet[9], packet[12:16], packet[16:20]
    body = packet[header_length:]
    host = socket.inet_ntoa(destination)
    if protocol == TCP and len(body) >= 20:
        source_port, destination_port, sequence, acknowledged = struct.unpack_from("!HHII", body)
        flags = body[13]
        if flags & RST:
            return None, None
        data_length = len(body) - (body[12] >> 4) * 4 + (1 if flags & SYN else 0) + (1 if flags & FIN else 0)
        if flags & ACK:
            seq, ack, answer_flags = acknowledged, 0, RST
        else:
            seq, ack, answer_flags = 0, (sequence + data_length) & 0xFFFFFFFF, RST | ACK
        segment = struct.pack("!HHIIBBHHH", destination_port, source_port, seq, ack, 5 << 4, answer_flags, 0, 0, 0)
        pseudo = destination + source + struct.pack("!BBH", 0, TCP, len(segment))
        segment = segment[:16] + struct.pack("!H", checksum(pseudo + segment)) + segment[18:]
        attempt = Attempt(host, destination_port, "tcp") if flags & SYN and not flags & ACK else None
        return attempt, ipv4(destination, source, TCP, segment)
    if protocol == ICMP and body[:1] == b"\x03":  # an ICMP error of the sender's own: never answer one
        return None, None
    port = struct.unpack_from("!H", body, 2)[0] if protocol == UDP and len(body) >= 8 else 0
    code = 3 if protocol == UDP else 13  # port unreachable; communication administratively prohibited
    message = struct.pack("!BBHI", 3, code, 0, 0) + packet[: header_length + 8]
    message = message[:2] + struct.pack("!H", checksum(message)) + message[4:]
    name = {UDP: "udp", ICMP: "icmp"}.get(protocol, f"protocol {protocol}")
    return Attempt(host, port, name), ipv4(destination, source, ICMP, message)
