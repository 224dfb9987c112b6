"""The JVM's wiring: a PKCS12 trust store and the `JAVA_TOOL_OPTIONS` that point every JVM at the proxy.

The JVM reads neither `HTTPS_PROXY` nor `SSL_CERT_FILE`; it reads system
properties, and `JAVA_TOOL_OPTIONS` reaches every JVM a command starts
(Maven, Gradle and their forked test JVMs included). The trust store holds
the same certificates as the launcher's PEM bundle (the system's CAs, those
the environment's CA variables named, the proxy's CA).

It is written here, in pure Python, rather than with `keytool`: keytool imports
one certificate per JVM start (seconds each on a busy CI machine, for ~150
system CAs), and a run needs no JDK to be wired for one. The format is what the
JDK's own PKCS12 writer produces for trusted certificates: unencrypted cert
bags, each with a friendly name and Oracle's trusted-key-usage attribute
(without it the JDK ignores a certificate-only entry), and an HMAC-SHA1
integrity check keyed from the password (PKCS #12 key derivation, RFC 7292
appendix B), which every JDK from 8 on reads.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

PASSWORD = "changeit"
"""The JDK's own default: a trust store holds no secret, the password only keys its integrity check."""
MAC_ITERATIONS = 2048

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.DOTALL)

_DATA = "1.2.840.113549.1.7.1"
_CERT_BAG = "1.2.840.113549.1.12.10.1.3"
_X509_CERTIFICATE = "1.2.840.113549.1.9.22.1"
_FRIENDLY_NAME = "1.2.840.113549.1.9.20"
_TRUSTED_KEY_USAGE = "2.16.840.1.113894.746875.1.1"
_ANY_EXTENDED_KEY_USAGE = "2.5.29.37.0"
_SHA1 = "1.3.14.3.2.26"


def _der(tag: int, content: bytes) -> bytes:
    size = len(content)
    if size < 0x80:
        return bytes([tag, size]) + content
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + content


def _sequence(*items: bytes) -> bytes:
    return _der(0x30, b"".join(items))


def _set(*items: bytes) -> bytes:
    return _der(0x31, b"".join(sorted(items)))  # DER orders a SET OF by encoding


def _explicit(content: bytes) -> bytes:
    return _der(0xA0, content)


def _integer(value: int) -> bytes:
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _octets(content: bytes) -> bytes:
    return _der(0x04, content)


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(part) for part in dotted.split("."))
    encoded = bytearray([40 * first + second])
    for number in rest:
        chunk = [number & 0x7F]
        while number := number >> 7:
            chunk.append(0x80 | (number & 0x7F))
        encoded += bytes(reversed(chunk))
    return _der(0x06, bytes(encoded))


def _content_info_data(content: bytes) -> bytes:
    return _sequence(_oid(_DATA), _explicit(_octets(content)))


def _cert_bag(certificate: bytes, alias: str) -> bytes:
    attributes = _set(
        _sequence(_oid(_FRIENDLY_NAME), _set(_der(0x1E, alias.encode("utf-16-be")))),
        _sequence(_oid(_TRUSTED_KEY_USAGE), _set(_oid(_ANY_EXTENDED_KEY_USAGE))),
    )
    value = _sequence(_oid(_X509_CERTIFICATE), _explicit(_octets(certificate)))
    return _sequence(_oid(_CERT_BAG), _explicit(value), attributes)


def _pkcs12_key(password: str, salt: bytes, iterations: int, size: int) -> bytes:
    """The MAC key of RFC 7292 appendix B.2 (ID 3), with SHA-1 (u = 20, v = 64)."""
    u, v = 20, 64
    secret = password.encode("utf-16-be") + b"\x00\x00"

    def stretch(data: bytes) -> bytes:
        """`data` repeated to a whole number of v-byte blocks."""
        if not data:
            return b""
        length = v * -(-len(data) // v)
        return (data * (length // len(data) + 1))[:length]

    block = stretch(salt) + stretch(secret)
    key = b""
    while len(key) < size:
        digest = hashlib.sha1(bytes([3]) * v + block).digest()
        for _ in range(iterations - 1):
            digest = hashlib.sha1(digest).digest()
        key += digest
        addend = int.from_bytes((digest * -(-v // u))[:v], "big") + 1
        block = b"".join(
            ((int.from_bytes(block[i : i + v], "big") + addend) % (1 << (8 * v))).to_bytes(v, "big")
            for i in range(0, len(block), v)
        )
    return key[:size]


def pem_certificates(pem: bytes) -> list[bytes]:
    """The DER certificates of a PEM bundle, in order, without repeats."""
    found: dict[bytes, None] = {}
    for body in _PEM.findall(pem):
        found.setdefault(base64.b64decode(b"".join(body.split())), None)
    return list(found)


def truststore(certificates: Sequence[bytes], password: str = PASSWORD, salt: bytes | None = None) -> bytes:
    """A PKCS12 key store holding `certificates` (DER) as trusted certificate entries `ca-1`, `ca-2`, …"""
    bags = _sequence(*(_cert_bag(cert, f"ca-{i}") for i, cert in enumerate(certificates, 1)))
    authenticated_safe = _sequence(_content_info_data(bags))
    salt = os.urandom(20) if salt is None else salt
    key = _pkcs12_key(password, salt, MAC_ITERATIONS, 20)
    mac = hmac.new(key, authenticated_safe, hashlib.sha1).digest()
    mac_data = _sequence(
        _sequence(_sequence(_oid(_SHA1), b"\x05\x00"), _octets(mac)), _octets(salt), _integer(MAC_ITERATIONS)
    )
    return _sequence(_integer(3), _content_info_data(authenticated_safe), mac_data)


def non_proxy_hosts(no_proxy: str) -> str:
    """NO_PROXY as `http.nonProxyHosts`: `|`-separated, `*` globs at either end, a domain covering its subdomains.

    Java matches exact names and `*.` / `.*` globs only: `example.com` and
    `.example.com` become `example.com|*.example.com`; a port is dropped;
    CIDR ranges, which Java cannot express, are left out.
    """
    hosts: list[str] = []
    for entry in no_proxy.replace(" ", "").split(","):
        if not entry or "/" in entry:
            continue
        if entry == "*":
            names = ["*"]
        elif entry in ("::1", "[::1]"):
            names = ["[::1]"]
        else:
            name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
            domain = name.lstrip("*").lstrip(".")
            names = ["127.*"] if domain == "127.0.0.1" else [domain, f"*.{domain}"] if domain else []
            if domain == "localhost":
                names = ["localhost"]
        hosts += [name for name in names if name not in hosts]
    return "|".join(hosts)


def java_tool_options(proxy_url: str, no_proxy: str, truststore_path: Path | None) -> list[str]:
    """The `-D` options that send a JVM's HTTP(S) through the proxy and make it trust the proxy's CA."""
    proxy = urlsplit(proxy_url)
    options = []
    for scheme in ("https", "http"):
        options += [f"-D{scheme}.proxyHost={proxy.hostname}", f"-D{scheme}.proxyPort={proxy.port}"]
    options.append(f"-Dhttp.nonProxyHosts={non_proxy_hosts(no_proxy)}")
    if truststore_path is not None:
        options += [
            f"-Djavax.net.ssl.trustStore={truststore_path}",
            "-Djavax.net.ssl.trustStoreType=PKCS12",
            f"-Djavax.net.ssl.trustStorePassword={PASSWORD}",
        ]
    return [f'"{option}"' if " " in option else option for option in options]
