"""The proxy's CA, made once per user and machine, and the Java trust stores built from bundles, kept beside it.

Each run gets a private confdir, but not a new CA any more: the command's
clients must trust the CA before the proxy has started (the launcher hands
them a bundle at once, proxy/listening/handover.py), and a CA made by mitmdump on each
start is only there once mitmdump is. So the first run on a machine lets
mitmdump make one and keeps it in this user's private folder
(user_folder.py: mode 0700, `ca/`, the key file 0600); every later run copies
it into its confdir before mitmdump starts. This is what mitmproxy itself does
with `~/.mitmproxy`; clients still trust it only through the variables a run
gives them. Delete the folder to get a new CA.

A JVM trust store of ~150 CAs takes tens of ms to write: it is kept here too,
named after the bundle's content, and a run points `JAVA_TOOL_OPTIONS` at it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..core.files.atomic_write import write_atomic
from .java_truststore import pem_certificates
from .java_truststore import truststore as pkcs12_truststore
from .user_folder import private_subfolder

CA_FILES = ("mitmproxy-ca.pem", "mitmproxy-ca-cert.pem")
"""What mitmdump needs to use a CA instead of making one (the key and certificate), and the certificate alone."""
CERTIFICATE = "mitmproxy-ca-cert.pem"


def ca_folder() -> Path:
    return private_subfolder("ca")


def install(confdir: Path) -> Path | None:
    """Copy the kept CA into `confdir` (which mitmdump then uses); its certificate there, or None when none is kept."""
    folder = ca_folder()
    if not all((folder / name).is_file() for name in CA_FILES):
        return None
    for name in CA_FILES:
        shutil.copyfile(folder / name, confdir / name)
        os.chmod(confdir / name, 0o600)
    return confdir / CERTIFICATE


MAKE_CA = """
import pathlib, sys
from mitmproxy.certs import CertStore
CertStore.create_store(pathlib.Path(sys.argv[1]), "mitmproxy", 2048)  # what mitmdump does for a confdir without one
"""


def make(mitmdump: str, confdir: Path) -> Path | None:
    """A new CA made in `confdir` by mitmproxy's code, in the Python `mitmdump` runs with, and kept; its certificate,
    or None when that Python is not found or failed (mitmdump then makes one as it starts)."""
    python = mitmdump_python(mitmdump)
    if python is None:
        return None
    made = subprocess.run(
        [python, "-I", "-c", MAKE_CA, str(confdir)], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    if made.returncode != 0 or not all((confdir / name).is_file() for name in CA_FILES):
        return None
    keep(confdir)
    return confdir / CERTIFICATE


def mitmdump_python(mitmdump: str) -> str | None:
    """The interpreter of a `mitmdump` console script (its `#!` line), when it is an absolute path to a Python."""
    try:
        with open(mitmdump, "rb") as script:
            first = script.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    interpreter = first[2:].strip().split(b" ", 1)[0].decode(errors="replace")
    path = Path(interpreter)
    return interpreter if path.is_absolute() and "python" in path.name and path.is_file() else None


def keep(confdir: Path) -> None:
    """Keep the CA mitmdump made in `confdir` for later runs (whole files, written atomically; the first one wins)."""
    folder = ca_folder()
    if all((folder / name).is_file() for name in CA_FILES):
        return
    for name in CA_FILES:
        write_atomic(folder / name, (confdir / name).read_bytes(), mode=0o600)


def truststore(bundle: Path) -> Path:
    """A PKCS12 trust store holding `bundle`'s certificates: the kept one when this bundle was seen before.

    ValueError for a certificate that is not base64 (java_truststore.py)."""
    pem = bundle.read_bytes()
    kept = ca_folder() / f"java-truststore-{hashlib.sha256(pem).hexdigest()[:32]}.p12"
    if not kept.is_file():
        write_atomic(kept, pkcs12_truststore(pem_certificates(pem)), mode=0o600)
    return kept
