"""Real processes for the integration tests: the fake upstream and `mitmdump` with the addon.

The CA bundle comes from the launcher's own code (what `cassette run` does); the client
environment is set by hand on purpose: tests route even loopback through the proxy (NO_PROXY empty).

Every server listens on 127.0.0.1 on a free port (port 0 + a ready file, never a
fixed port) and is stopped by its PID. mitmdump runs from its own environment
(`$CASSETTE_MITMDUMP`, set by scripts/test) because mitmproxy pins h11 below
what the current SDKs need.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import forkserver
import httpx
from cassette_proxy.launch.client_env import write_ca_bundle

ROOT = Path(__file__).resolve().parent.parent.parent
SUPPORT = Path(__file__).resolve().parent
ADDON = ROOT / "addon" / "cassette.py"
REDIRECT = SUPPORT / "upstream_redirect.py"
FAKE_UPSTREAM = SUPPORT / "fake_upstream.py"
SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

FAKE_OPENAI_KEY = "sk-fake-openai-DO-NOT-STORE-0123456789abcdef"
FAKE_ANTHROPIC_KEY = "sk-ant-fake-DO-NOT-STORE-0123456789abcdef"


def free_port() -> int:
    """A port free on 127.0.0.1 now, for the servers that cannot take port 0 (a fixed `--reverse` port, a
    `--mode reverse:…@PORT` listener); another process may take it before it is used."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mitmdump_path() -> str:
    found = os.environ.get("CASSETTE_MITMDUMP") or shutil.which("mitmdump")
    if not found:
        raise RuntimeError("mitmdump not found: run the tests through scripts/test, or set CASSETTE_MITMDUMP")
    return found


def wait_for_file(path: Path, process: subprocess.Popen, log: Path, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before it was ready:\n{log.read_text()}")
        time.sleep(0.02)
    process.kill()
    raise RuntimeError(f"process not ready after {timeout} s:\n{log.read_text()}")


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
    if process.poll() is None:
        os.kill(process.pid, sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the fake upstream, valid for 127.0.0.1 and localhost."""
    cert, key = folder / "upstream-cert.pem", folder / "upstream-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fake-upstream",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


class FakeUpstream:
    def __init__(self, folder: Path, certificate: tuple[Path, Path] | None = None, script: Path = FAKE_UPSTREAM):
        self.folder = folder
        self.certificate = certificate
        self.script = script
        self.process: subprocess.Popen | None = None

    def start(self) -> FakeUpstream:
        self.folder.mkdir(parents=True, exist_ok=True)
        ready, log = self.folder / "upstream.ready", self.folder / "upstream.log"
        ready.unlink(missing_ok=True)
        args = [sys.executable, str(self.script), "--ready-file", str(ready)]
        if self.certificate:
            args += ["--cert", str(self.certificate[0]), "--key", str(self.certificate[1])]
        self.process = subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)
        info = wait_for_file(ready, self.process, log)
        self.url = f"{info['scheme']}://127.0.0.1:{info['port']}"
        return self

    def stats(self) -> dict:
        return httpx.get(f"{self.url}/__fake__/stats", verify=False, trust_env=False).json()

    @property
    def count(self) -> int:
        return self.stats()["count"]

    def behave(self, *rules: dict) -> None:
        """Switch the fake's answers with behaviour rules (see fake_upstream.py); none: its default answers."""
        reply = httpx.post(f"{self.url}/__fake__/behaviour", json={"rules": list(rules)}, verify=False, trust_env=False)
        reply.raise_for_status()

    def stop(self) -> None:
        if self.process:
            stop(self.process)


def mitmdump_python() -> str:
    """The Python that mitmdump runs on (its script's `#!` line, as pip and pipx write it): the one that has
    mitmproxy, wherever `$CASSETTE_MITMDUMP` points."""
    script = mitmdump_path()
    with open(script, "rb") as f:
        first = f.readline()
    if not first.startswith(b"#!"):
        raise RuntimeError(f"{script} is not a script with a #! line: cannot tell which Python runs mitmdump")
    return first[2:].decode().split()[0]


_CA_TEMPLATE: list[Path] = []
_CA_TEMPLATE_LOCK = threading.Lock()


def ca_template() -> Path:
    """A confdir holding a CA mitmproxy made, once per test process, which each proxy's confdir starts as a copy of:
    making a CA (an RSA key) is a tenth of a proxy's start, paid hundreds of times a run. `Proxy(fresh_ca=True)`
    lets mitmproxy make its own, for what only a new CA can show (its files' modes)."""
    with _CA_TEMPLATE_LOCK:
        if not _CA_TEMPLATE:
            folder = Path(tempfile.mkdtemp(prefix="cassette-test-ca-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            python = mitmdump_python()
            subprocess.run(
                [python, "-c", "import sys; from mitmproxy import certs; certs.CertStore.from_store(sys.argv[1], 'mitmproxy', 2048)", str(folder)],
                check=True, capture_output=True,
            )  # fmt: skip
            _CA_TEMPLATE.append(folder)
        return _CA_TEMPLATE[0]


class Proxy:
    """`mitmdump -s addon/cassette.py` on a free port, with its own confdir: a copy of the test process's CA
    (`ca_template`), or with `fresh_ca=True` a CA of its own."""

    def __init__(
        self,
        folder: Path,
        cassette_dir: Path,
        upstream: FakeUpstream | None = None,
        modes: list[str] | None = None,
        scripts: list[Path] = (),
        fresh_ca: bool = False,
        **options: object,
    ):
        self.folder = folder
        self.fresh_ca = fresh_ca
        self.cassette_dir = cassette_dir
        self.upstream = upstream
        self.modes = modes or ["regular"]
        self.scripts = list(scripts)
        """Test-only addons loaded after the cassette addon and the upstream redirect."""
        self.options = options
        self.report_path = folder / "report.json"
        self.log = folder / "mitmdump.log"
        self.confdir = folder / "confdir"
        self.process: subprocess.Popen | forkserver.Forked | None = None

    def command(self) -> list[str]:
        args = [mitmdump_path(), "--listen-host", "127.0.0.1", "--set", f"confdir={self.confdir}"]
        if self.modes == ["regular"]:
            args += ["-p", "0"]
        else:
            for mode in self.modes:
                args += ["--mode", f"{mode}@{free_port()}"]
        args += ["-s", str(ADDON), "-s", str(REDIRECT)]
        for script in self.scripts:
            args += ["-s", str(script)]
        options = {
            "cassette_dir": self.cassette_dir,
            "cassette_report": self.report_path,
            "cassette_ready_file": self.folder / "proxy.ready",
            **self.options,
        }
        if self.upstream:
            options["fake_upstream"] = self.upstream.url
            if self.upstream.certificate:
                options["ssl_verify_upstream_trusted_ca"] = self.upstream.certificate[0]
        for name, value in options.items():
            for item in value if isinstance(value, list | tuple) else [value]:
                args += ["--set", f"{name}={item}"]
        return args

    def start(self, env: dict | None = None) -> Proxy:
        self.folder.mkdir(parents=True, exist_ok=True)
        ready = self.folder / "proxy.ready"
        ready.unlink(missing_ok=True)
        self.report_path.unlink(missing_ok=True)
        if not self.fresh_ca and not self.confdir.exists():
            shutil.copytree(ca_template(), self.confdir)  # the files' modes too: the CA key stays 0600
        # Forked from a process that imported mitmproxy already (forkserver.py): a tenth of CI is mitmproxy's import.
        self.process = forkserver.start(mitmdump_python(), self.command(), self.log, {**os.environ, **(env or {})})
        self.ready = wait_for_file(ready, self.process, self.log)
        self.listen = {entry["mode"]: entry["port"] for entry in self.ready["listen"]}
        return self

    def port(self, mode: str = "regular") -> int:
        return self.listen[mode]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port()}"

    @property
    def ca_bundle(self) -> Path:
        """The system's CAs plus this proxy's CA, as a launcher would hand to clients."""
        bundle = self.folder / "ca-bundle.pem"
        if not bundle.exists():
            # The launcher's own bundle (system CAs + the proxy's), written aside and renamed: client threads
            # asking at once never read half a file.
            partial = bundle.with_name(f"{bundle.name}.{threading.get_ident()}.tmp")
            write_ca_bundle(partial, self.confdir / "mitmproxy-ca-cert.pem", {})
            os.replace(partial, bundle)
        return bundle

    def client_env(self) -> dict[str, str]:
        bundle = str(self.ca_bundle)
        return {
            "HTTPS_PROXY": self.url,
            "HTTP_PROXY": self.url,
            "https_proxy": self.url,
            "http_proxy": self.url,
            "NO_PROXY": "",
            "no_proxy": "",
            "SSL_CERT_FILE": bundle,
            "REQUESTS_CA_BUNDLE": bundle,
            "CURL_CA_BUNDLE": bundle,
            "NODE_EXTRA_CA_CERTS": bundle,
        }

    def stop(self) -> dict | None:
        """Stop by PID (SIGTERM, as CI would) and return the run report."""
        if self.process:
            stop(self.process)
        return json.loads(self.report_path.read_text()) if self.report_path.exists() else None

    def log_text(self) -> str:
        return self.log.read_text()
