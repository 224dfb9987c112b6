"""Where a new forward HTTPS connection's time goes, and whether an EC CA would shorten it (issue 25).

    CASSETTE_MITMDUMP=.venv/proxy/bin/mitmdump .venv/test/bin/python benchmarks/tls_phases.py

The forward route's cost over the reverse one is one new connection per new SDK client:
CONNECT, the TLS handshake with mitmproxy, then the request. This times those phases
with the standard library (one SSL context made once, so its construction is not
counted) through bare mitmdumps answering a constant (`floor_addon.py`): one with the
RSA-2048 CA mitmproxy makes (what every run uses) and one with an ECDSA P-256 CA made
here, whose leaf certificates mitmproxy then signs with that key. The plain-HTTP
request through the same proxy (absolute-form, no CONNECT, no TLS) is what the
reverse route pays instead. Interleaved rounds, each proxy first in half of them; medians in
milliseconds.
"""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import run  # noqa: E402
import workload  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

CONNECTIONS = 200
ROUNDS = 7
HOST = "api.openai.com"
BODY = workload.chat_body("a constant question")
REQUEST = (
    f"POST {workload.CHAT_PATH} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
    f"Content-Length: {len(BODY)}\r\nConnection: close\r\n\r\n"
).encode() + BODY
PLAIN = REQUEST.replace(f"POST {workload.CHAT_PATH}".encode(), f"POST http://{HOST}{workload.CHAT_PATH}".encode(), 1)


def write_ec_ca(confdir: Path) -> None:
    """An ECDSA P-256 CA in mitmproxy's confdir layout (key and certificate in mitmproxy-ca.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mitmproxy"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mitmproxy")])  # fmt: skip
    now = datetime.datetime.now(datetime.UTC)
    usage = x509.KeyUsage(True, False, False, False, False, True, True, False, False)  # sign, certs, CRLs
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2)).not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = certificate.public_bytes(serialization.Encoding.PEM)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    confdir.mkdir(parents=True)
    (confdir / "mitmproxy-ca.pem").write_bytes(private + pem)
    (confdir / "mitmproxy-ca-cert.pem").write_bytes(pem)


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def https(port: int, context: ssl.SSLContext) -> tuple[float, float, float]:
    """One new connection: CONNECT, the handshake, one request read to its end; each phase's seconds."""
    began = time.perf_counter()
    sock = socket.create_connection((run.HOST, port))
    sock.sendall(f"CONNECT {HOST}:443 HTTP/1.1\r\nHost: {HOST}:443\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head
    connected = time.perf_counter()
    tls = context.wrap_socket(sock, server_hostname=HOST)
    shaken = time.perf_counter()
    tls.sendall(REQUEST)
    answer = read_all(tls)
    tls.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    return connected - began, shaken - connected, time.perf_counter() - shaken


def plain(port: int) -> float:
    began = time.perf_counter()
    with socket.create_connection((run.HOST, port)) as sock:
        sock.sendall(PLAIN)
        assert read_all(sock).startswith(b"HTTP/1.1 200")
    return time.perf_counter() - began


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="tls-phases-"))
    proxies = {
        "RSA-2048 CA (mitmproxy's)": run.floor(folder, name="rsa"),
        "ECDSA P-256 CA": run.floor(folder, name="ec"),
    }
    write_ec_ca(proxies["ECDSA P-256 CA"].folder / "confdir")
    phases: dict[str, dict[str, list[float]]] = {
        name: {"CONNECT": [], "TLS handshake": [], "request": [], "whole": [], "plain HTTP request": []}
        for name in proxies
    }
    try:
        for proxy in proxies.values():
            proxy.start()
        contexts = {
            name: ssl.create_default_context(cafile=str(proxy.folder / "confdir" / "mitmproxy-ca-cert.pem"))
            for name, proxy in proxies.items()
        }
        for round_ in range(ROUNDS):
            order = list(proxies.items())
            for name, proxy in order if round_ % 2 else reversed(order):  # each first in half the rounds
                https(proxy.port, contexts[name])  # the leaf certificate is made once per host: not timed
                times = [https(proxy.port, contexts[name]) for _ in range(CONNECTIONS)]
                for phase, values in zip(
                    ("CONNECT", "TLS handshake", "request"), zip(*times, strict=True), strict=True
                ):
                    phases[name][phase].append(statistics.median(values) * 1000)
                phases[name]["whole"].append(statistics.median(sum(t) for t in times) * 1000)
                phases[name]["plain HTTP request"].append(
                    statistics.median(plain(proxy.port) for _ in range(CONNECTIONS)) * 1000
                )
    finally:
        for proxy in proxies.values():
            if hasattr(proxy, "process"):
                proxy.stop()
    results = {
        "connections_per_round": CONNECTIONS,
        "rounds": ROUNDS,
        "median_ms": {
            name: {phase: round(statistics.median(v), 2) for phase, v in by_phase.items()}
            for name, by_phase in phases.items()
        },
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
