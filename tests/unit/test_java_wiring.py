"""The JVM's wiring: the pure-Python PKCS12 trust store as the JDK reads it, and JAVA_TOOL_OPTIONS."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cassette_proxy.launch.client_env import client_environment
from cassette_proxy.launch.java_truststore import (
    PASSWORD,
    java_tool_options,
    non_proxy_hosts,
    pem_certificates,
    truststore,
)
from harness import make_certificate


def write_truststore(destination: Path, pem_bundle: Path) -> Path:
    """The PEM bundle's certificates as a PKCS12 trust store at `destination`, as launch/proxy_ca.py keeps one."""
    destination.write_bytes(truststore(pem_certificates(pem_bundle.read_bytes())))
    return destination


def keytool_list(store: Path, password: str) -> subprocess.CompletedProcess:
    keytool = shutil.which("keytool")
    assert keytool, "keytool (the JDK) is not installed"
    return subprocess.run(
        [keytool, "-list", "-keystore", str(store), "-storetype", "PKCS12", "-storepass", password],
        capture_output=True,
        text=True,
    )


@pytest.fixture
def bundle(tmp_path) -> tuple[Path, list[Path]]:
    """A PEM bundle of three certificates, one of them twice."""
    certs = []
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        certs.append(make_certificate(tmp_path / name)[0])
    path = tmp_path / "bundle.pem"
    path.write_text("\n".join(c.read_text() for c in [*certs, certs[0]]))
    return path, certs


def test_the_jdk_reads_every_certificate_as_a_trusted_entry(tmp_path, bundle):
    path, certs = bundle
    store = write_truststore(tmp_path / "trust.p12", path)
    listed = keytool_list(store, PASSWORD)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "Your keystore contains 3 entries" in listed.stdout
    assert listed.stdout.count("trustedCertEntry") == 3
    fingerprints = [
        subprocess.check_output(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", str(c)], text=True)
        for c in certs
    ]
    for line in fingerprints:
        assert line.strip().split("=", 1)[1] in listed.stdout


def test_the_integrity_check_is_real(tmp_path, bundle):
    store = write_truststore(tmp_path / "trust.p12", bundle[0])
    listed = keytool_list(store, "not-the-password")
    assert listed.returncode != 0
    assert "integrity" in (listed.stdout + listed.stderr).lower()


def test_the_system_bundle_converts_whole():
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    assert len(pem_certificates(system.read_bytes())) == system.read_text().count("BEGIN CERTIFICATE")


@pytest.mark.parametrize(
    ("no_proxy", "java"),
    [
        ("localhost,127.0.0.1,::1", "localhost|127.*|[::1]"),
        (".example.com", "example.com|*.example.com"),
        ("*.example.com,example.com", "example.com|*.example.com"),
        ("internal.corp:8443", "internal.corp|*.internal.corp"),
        ("10.0.0.0/8, db", "db|*.db"),
        ("*", "*"),
        ("", ""),
    ],
)
def test_no_proxy_becomes_non_proxy_hosts(no_proxy, java):
    assert non_proxy_hosts(no_proxy) == java


def wired(environ: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return client_environment(environ, proxy_url="http://127.0.0.1:41234", ca_bundle=tmp_path / "ca.pem",
                              controlled_hosts=["api.openai.com"], mode="replay", notice_file=tmp_path / "notice",
                              base_urls={}, java_truststore=tmp_path / "trust.p12")  # fmt: skip


def test_java_tool_options_point_at_the_proxy_and_trust_store_after_the_users_own(tmp_path):
    env = wired({"JAVA_TOOL_OPTIONS": "-Xmx512m", "NO_PROXY": "api.openai.com,.corp"}, tmp_path)
    options = env["JAVA_TOOL_OPTIONS"].split(" ")
    assert options == [
        "-Xmx512m",
        "-Dhttps.proxyHost=127.0.0.1",
        "-Dhttps.proxyPort=41234",
        "-Dhttp.proxyHost=127.0.0.1",
        "-Dhttp.proxyPort=41234",
        "-Dhttp.nonProxyHosts=corp|*.corp|localhost|127.*|[::1]",  # the API host is no longer bypassed
        f"-Djavax.net.ssl.trustStore={tmp_path / 'trust.p12'}",
        "-Djavax.net.ssl.trustStoreType=PKCS12",
        f"-Djavax.net.ssl.trustStorePassword={PASSWORD}",
    ]
    assert wired(env, tmp_path)["JAVA_TOOL_OPTIONS"] == env["JAVA_TOOL_OPTIONS"]  # wiring twice adds nothing


def test_an_option_with_a_space_is_quoted_as_the_jvm_reads_it(tmp_path):
    """The JVM splits JAVA_TOOL_OPTIONS on spaces but honours double quotes (a TMPDIR with a space)."""
    store = tmp_path / "my folder" / "trust.p12"
    options = java_tool_options("http://127.0.0.1:1", "", store)
    assert f'"-Djavax.net.ssl.trustStore={store}"' in options
