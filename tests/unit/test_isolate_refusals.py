"""What the isolated namespace's route out answers (launch/isolate_refusals.py): each packet refused so that its
sender fails at once, each attempt counted."""

from __future__ import annotations

import socket
import struct

from cassette_proxy.launch.isolate_refusals import ICMP, TCP, UDP, Attempt, checksum, ipv4, refusal

INSIDE, OUTSIDE = socket.inet_aton("198.18.0.1"), socket.inet_aton("192.0.2.7")


def tcp(flags: int, sequence: int = 1000, acknowledged: int = 0) -> bytes:
    segment = struct.pack("!HHIIBBHHH", 40000, 443, sequence, acknowledged, 5 << 4, flags, 65535, 0, 0)
    return ipv4(INSIDE, OUTSIDE, TCP, segment)


def valid_ipv4(packet: bytes) -> bool:
    return checksum(packet[:20]) == 0


def test_a_connection_attempt_is_counted_and_reset():
    attempt, answer = refusal(tcp(0x02))
    assert attempt == Attempt("192.0.2.7", 443, "tcp")
    assert answer is not None and valid_ipv4(answer)
    assert answer[12:16] == OUTSIDE and answer[16:20] == INSIDE and answer[9] == TCP
    segment = answer[20:]
    source_port, destination_port, _, acknowledged = struct.unpack_from("!HHII", segment)
    assert (source_port, destination_port, acknowledged, segment[13]) == (443, 40000, 1001, 0x14)  # RST|ACK
    assert checksum(OUTSIDE + INSIDE + struct.pack("!BBH", 0, TCP, len(segment)) + segment) == 0


def test_a_reset_is_not_answered_and_a_later_segment_is_reset_uncounted():
    assert refusal(tcp(0x04)) == (None, None)
    attempt, answer = refusal(tcp(0x10, acknowledged=77))
    assert attempt is None and answer is not None
    assert struct.unpack_from("!I", answer, 24)[0] == 77 and answer[33] == 0x04


def test_a_datagram_gets_port_unreachable_quoting_it():
    datagram = ipv4(INSIDE, OUTSIDE, UDP, struct.pack("!HHHH", 5353, 53, 12, 0) + b"\x12\x34\x01\x00")
    attempt, answer = refusal(datagram)
    assert attempt == Attempt("192.0.2.7", 53, "udp") and str(attempt) == "192.0.2.7:53 (udp)"
    assert answer is not None and valid_ipv4(answer) and answer[9] == ICMP
    message = answer[20:]
    assert message[:2] == b"\x03\x03" and checksum(message) == 0
    assert message[8:] == datagram[:28]


def test_an_icmp_error_is_never_answered_and_ipv6_is_left_alone():
    error = ipv4(INSIDE, OUTSIDE, ICMP, b"\x03\x03\x00\x00\x00\x00\x00\x00")
    assert refusal(error) == (None, None)
    assert refusal(b"\x60" + bytes(39)) == (None, None)
