"""Run mitmdump with the cassette addon, and wire a client environment to it.

The one place that knows how to start the proxy (a free port, a private
confdir, the ready file), how to stop it, and what a test process needs in its
environment to go through it, whatever its runtime. `cassette run`, `cassette
serve` and the pytest plugin all start the proxy through `start()`.

No mitmproxy import here: mitmdump runs from its own environment (mitmproxy pins
h11 below what current SDKs need), found by `find_mitmdump()`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .modes import DEFAULT_MODE, MODES
from .scope import DEFAULT_HOSTS

ADDON = Path(__file__).with_name("cassette.py")
NODE_PRELOAD = Path(__file__).with_name("node_preload.cjs")

MITMDUMP_VARIABLE = "CASSETTE_MITMDUMP"
EXTRA_ARGS_VARIABLE = "CASSETTE_MITMDUMP_ARGS"
"""Extra mitmdump arguments (shell words), e.g. another `-s addon.py`; the flag `--mitmdump-arg` adds more."""

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
LOOPBACK = ("localhost", "127.0.0.1", "::1")
"""Always in NO_PROXY: the reverse listeners live there, and a suite's own local servers must not be intercepted."""

SYSTEM_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSD
)

KNOWN_REVERSE = {"openai": ("OPENAI_BASE_URL", "/v1"), "anthropic": ("ANTHROPIC_BASE_URL", "")}
"""`--reverse NAME=URL` names whose SDKs read a base-URL variable, and the path their base URL must end in."""

PORT_ATTEMPTS = 5
READY_TIMEOUT = 60.0
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


class LauncherError(Exception):
    """A problem the user can fix; the message says what and how."""


@dataclass(frozen=True)
class Reverse:
    """A reverse-mode listener: clients set `env_name` to `base_url` instead of trusting a CA."""

    name: str
    origin: str
    base_path: str
    env_name: str


def parse_reverse(spec: str) -> Reverse:
    """`openai=https://api.openai.com` → a Reverse; a path in the URL becomes the base URL's path."""
    name, sep, url = spec.partition("=")
    parts = urlsplit(url.strip())
    name = name.strip().lower()
    if (
        not sep
        or not re.fullmatch(r"[a-z][a-z0-9_]*", name)
        or parts.scheme not in ("http", "https")
        or not parts.hostname
    ):
        raise LauncherError(f"--reverse {spec!r}: expected NAME=URL, e.g. openai=https://api.openai.com")
    env_name, default_path = KNOWN_REVERSE.get(name, (f"{name.upper()}_BASE_URL", ""))
    return Reverse(name, f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/") or default_path, env_name)


def resolve_mode(given: str | None, environ: Mapping[str, str]) -> str:
    """The flag, else $CASSETTE_MODE, else replay; a typo fails here rather than inside the proxy."""
    mode = given or environ.get("CASSETTE_MODE") or DEFAULT_MODE
    if mode not in MODES:
        raise LauncherError(f"cassette mode {mode!r} is not a mode; use one of {', '.join(MODES)}")
    return mode


def find_mitmdump(explicit: str | None, environ: Mapping[str, str]) -> str:
    """--mitmdump, else $CASSETTE_MITMDUMP, else the mitmdump beside this Python, else PATH."""
    if explicit or environ.get(MITMDUMP_VARIABLE):
        path = explicit or environ[MITMDUMP_VARIABLE]
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            raise LauncherError(
                f"mitmdump {path!r} (from {'--mitmdump' if explicit else '$' + MITMDUMP_VARIABLE}) is not an executable file"
            )
        return path
    beside = Path(sys.executable).parent / "mitmdump"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mitmdump", path=environ.get("PATH"))
    if found:
        return found
    raise LauncherError(
        "mitmdump not found: pass --mitmdump PATH, set $CASSETTE_MITMDUMP, or install mitmproxy beside this Python "
        f"({beside.parent}) or on PATH, e.g. `pipx install mitmproxy` (its own environment avoids h11 clashes with the SDKs)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Settings:
    """Everything a proxy start needs; built by the CLI or the pytest plugin."""

    mitmdump: str
    mode: str = DEFAULT_MODE
    cassette_dir: Path = Path("cassettes")
    hosts: Sequence[str] = ()
    """Host globs under cassette control; empty: the addon's defaults."""
    reverse: Sequence[Reverse] = ()
    port: int = 0
    report: Path | None = None
    extra_args: Sequence[str] = field(default_factory=list)

    def controlled_hosts(self) -> list[str]:
        """The --hosts given (or the defaults) plus every reverse target, which is there to be recorded."""
        hosts = list(self.hosts or DEFAULT_HOSTS)
        for reverse in self.reverse:
            host = urlsplit(reverse.origin).hostname
            if host not in hosts and "*" not in hosts:
                hosts.append(host)
        return hosts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The proxy's command-line options, shared by `cassette run` and `cassette serve`."""
    parser.add_argument("--mode", choices=MODES, help="Cassette mode; defaults to $CASSETTE_MODE, else replay.")
    parser.add_argument("--dir", help="Cassette folder; defaults to $CASSETTE_DIR, else ./cassettes.")
    parser.add_argument(
        "--hosts", nargs="+", action="extend", default=[], metavar="GLOB",
        help="Hosts under cassette control (globs, `*` for all); defaults to the known LLM API hosts.",
    )  # fmt: skip
    parser.add_argument(
        "--reverse", action="append", default=[], metavar="NAME=URL",
        help="Also listen in reverse mode for URL and set NAME_BASE_URL (OPENAI_BASE_URL, ANTHROPIC_BASE_URL): "
        "clients then need no proxy variables and no CA. Repeatable.",
    )  # fmt: skip
    parser.add_argument("--report", help="Also keep the JSON run report at this path.")
    parser.add_argument(
        "--mitmdump",
        help=f"The mitmdump to run; defaults to ${MITMDUMP_VARIABLE}, else the one beside this Python, else PATH.",
    )
    parser.add_argument(
        "--mitmdump-arg", action="append", default=[], metavar="ARG",
        help=f"Extra mitmdump argument (write --mitmdump-arg=-s); ${EXTRA_ARGS_VARIABLE} adds shell words too.",
    )  # fmt: skip


def settings_from_arguments(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    return Settings(
        mitmdump=find_mitmdump(args.mitmdump, environ),
        mode=resolve_mode(args.mode, environ),
        cassette_dir=Path(args.dir or environ.get("CASSETTE_DIR") or "cassettes"),
        hosts=args.hosts,
        reverse=[parse_reverse(spec) for spec in args.reverse],
        port=getattr(args, "port", 0),
        report=Path(args.report) if args.report else None,
        extra_args=[*extra_args_from(environ), *args.mitmdump_arg],
    )


def extra_args_from(environ: Mapping[str, str]) -> list[str]:
    return shlex.split(environ.get(EXTRA_ARGS_VARIABLE, ""))


def no_proxy_value(existing: str, controlled: Sequence[str]) -> str:
    """NO_PROXY without the entries that would let cassette-controlled traffic skip the proxy, plus loopback."""
    kept = []
    for entry in [*existing.replace(" ", "").split(","), *LOOPBACK]:
        if entry and entry not in kept and not _bypasses(entry, controlled):
            kept.append(entry)
    return ",".join(kept)


def _bypasses(entry: str, controlled: Sequence[str]) -> bool:
    """Whether a NO_PROXY entry (`*`, `.example.com`, `example.com[:port]`) covers a controlled host."""
    if entry == "*":
        return True
    domain = entry.lower().lstrip("*").lstrip(".")
    if domain.count(":") == 1:
        domain = domain.split(":")[0]
    for pattern in controlled:
        if pattern == "*":
            if domain not in LOOPBACK:
                return True
            continue
        host = pattern.replace("*", "x")
        if host == domain or host.endswith("." + domain):
            return True
    return False


def system_ca_bundle() -> Path | None:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, *SYSTEM_CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def write_ca_bundle(destination: Path, proxy_ca: Path, environ: Mapping[str, str]) -> Path:
    """The system's CAs, those the environment already trusts, and the proxy's CA, each once.

    The proxy's CA alone would break every HTTPS call that does not go through
    the proxy; dropping the CA files a CI image exports (a corporate CA) would
    break the calls that needed them.
    """
    sources = [system_ca_bundle(), *(environ.get(name) for name in CA_VARIABLES), proxy_ca]
    certificates: dict[bytes, None] = {}
    for source in sources:
        if source and Path(source).is_file():
            for pem in _PEM.findall(Path(source).read_bytes()):
                certificates.setdefault(pem.strip(), None)
    destination.write_bytes(b"\n".join(certificates) + b"\n")
    return destination


def _node_require(path: Path) -> str:
    escaped = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'--require "{escaped}"'


class RunningProxy:
    """A started mitmdump: its addresses, the client environment for it, and how to stop it."""

    def __init__(
        self, settings: Settings, private: Path, process: subprocess.Popen, ready: dict, environ: Mapping[str, str]
    ):
        self.settings = settings
        self.private = private
        self.process = process
        self.ready = ready
        self.pid = process.pid
        regular = [e for e in ready["listen"] if e["mode"].split("@")[0] == "regular"]
        self.url = f"http://127.0.0.1:{regular[0]['port']}"
        self.base_urls = {}
        for reverse in settings.reverse:
            port = next(e["port"] for e in ready["listen"] if e["mode"].startswith(f"reverse:{reverse.origin}"))
            self.base_urls[reverse.name] = f"http://127.0.0.1:{port}{reverse.base_path}"
        self.ca_bundle = write_ca_bundle(
            private / "ca-bundle.pem", private / "confdir" / "mitmproxy-ca-cert.pem", environ
        )
        self.report: dict | None = None

    @property
    def report_path(self) -> Path:
        return self.settings.report or self.private / "report.json"

    @property
    def log_path(self) -> Path:
        return self.private / "mitmdump.log"

    def client_env(self, environ: Mapping[str, str], base_urls: bool = True) -> dict[str, str]:
        """`environ` plus what every common runtime needs to go through this proxy and trust it.

        With `base_urls`, also the reverse listeners' `NAME_BASE_URL` variables (the zero-CA route).
        """
        env = dict(environ)
        env.update(dict.fromkeys(PROXY_VARIABLES, self.url))
        env["NO_PROXY"] = env["no_proxy"] = no_proxy_value(
            ",".join(filter(None, (environ.get("NO_PROXY"), environ.get("no_proxy")))), self.settings.controlled_hosts()
        )
        env.update(dict.fromkeys(CA_VARIABLES, str(self.ca_bundle)))
        env["NODE_USE_ENV_PROXY"] = "1"
        preload = _node_require(NODE_PRELOAD)
        node_options = environ.get("NODE_OPTIONS", "")
        env["NODE_OPTIONS"] = node_options if preload in node_options else f"{node_options} {preload}".strip()
        env["CASSETTE_NODE_NOTICE"] = str(self.private / "node-notice")
        env["CASSETTE_MODE"] = self.settings.mode
        env["CASSETTE_PROXY_URL"] = self.url
        if base_urls:
            for reverse in self.settings.reverse:
                env[reverse.env_name] = self.base_urls[reverse.name]
        return env

    def exports(self, environ: Mapping[str, str]) -> str:
        """Shell `export` lines for what client_env() changes: `eval "$(cassette env)"`."""
        env = self.client_env(environ)
        changed = sorted(name for name, value in env.items() if environ.get(name) != value)
        return "".join(f"export {name}={shlex.quote(env[name])}\n" for name in changed)

    def stop(self) -> dict | None:
        """SIGTERM by PID (the addon writes its report on shutdown), then drop the private folder."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.report_path.exists():
            self.report = json.loads(self.report_path.read_text())
        shutil.rmtree(self.private, ignore_errors=True)
        return self.report


def command(settings: Settings, private: Path, reverse_ports: Sequence[int]) -> list[str]:
    args = [settings.mitmdump, "--listen-host", "127.0.0.1", "-p", str(settings.port)]
    args += ["--set", f"confdir={private / 'confdir'}"]
    if settings.reverse:
        args += ["--mode", "regular"]
        for reverse, port in zip(settings.reverse, reverse_ports, strict=True):
            args += ["--mode", f"reverse:{reverse.origin}@{port}"]
    args += ["-s", str(ADDON)]
    options = {
        "cassette_mode": settings.mode,
        "cassette_dir": settings.cassette_dir.resolve(),
        "cassette_ready_file": private / "ready.json",
        "cassette_report": settings.report.resolve() if settings.report else private / "report.json",
    }
    for name, value in options.items():
        args += ["--set", f"{name}={value}"]
    for host in settings.controlled_hosts() if settings.hosts or settings.reverse else ():
        args += ["--set", f"cassette_hosts={host}"]
    return args + list(settings.extra_args)


def start(settings: Settings, environ: Mapping[str, str] | None = None) -> RunningProxy:
    """Start mitmdump and wait until the addon reports its addresses.

    The forward listener binds port 0, so it never collides. mitmproxy cannot
    give two listeners port 0 on one host, so each reverse listener gets a port
    picked just before the start; when another process takes it in between,
    mitmdump exits with "address already in use" and we retry with new ports.
    """
    environ = os.environ if environ is None else environ
    private = Path(tempfile.mkdtemp(prefix="cassette-proxy-"))  # mode 0700
    (private / "confdir").mkdir(mode=0o700)
    process = None
    try:
        for _ in range(PORT_ATTEMPTS):
            args = command(settings, private, [free_port() for _ in settings.reverse])
            log = private / "mitmdump.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=dict(environ),
                    start_new_session=True,  # a Ctrl-C reaches the suite, which may still need the proxy in teardown
                )  # fmt: skip
            ready = _wait_ready(private / "ready.json", process, log)
            if ready is not None:
                break
        else:
            raise LauncherError(
                f"mitmdump could not bind its reverse ports after {PORT_ATTEMPTS} attempts:\n{log.read_text()}"
            )
        if ready["mode"] != settings.mode:
            raise LauncherError(f"mitmdump runs in mode {ready['mode']!r}, not the {settings.mode!r} asked for")
        return RunningProxy(settings, private, process, ready, environ)
    except BaseException:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(private, ignore_errors=True)
        raise


def _wait_ready(ready_file: Path, process: subprocess.Popen, log: Path) -> dict | None:
    """The ready file's content; None when a port was taken (retry); LauncherError for anything else."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if ready_file.exists():
            return json.loads(ready_file.read_text())
        if process.poll() is not None:
            text = log.read_text(errors="replace")
            if "address already in use" in text.lower():
                return None
            raise LauncherError(f"mitmdump exited with status {process.returncode} before it was ready:\n{text}")
        time.sleep(0.02)
    process.kill()
    process.wait()
    raise LauncherError(f"mitmdump not ready after {READY_TIMEOUT:.0f} s:\n{log.read_text(errors='replace')}")


def summary(report: dict | None) -> str:
    """One line for the end of a run, plus one line per miss."""
    if report is None:
        return "cassette: no run report (the proxy did not shut down cleanly)"
    counts = report["counts"]
    line = (
        f"cassette: {report['mode']}: {counts['hits']} hits, {counts['misses']} misses, {counts['recorded']} recorded, "
        f"{counts['upstream']} upstream, {counts['passthrough']} passthrough"
    )
    if counts["errors"]:
        line += f", {counts['errors']} errors"
    lines = [line]
    lines += [f"cassette: miss {m['method']} {m['url']} (would be {m['cassette']})" for m in report["misses"]]
    lines += [f"cassette: error {e['type']}: {e.get('message', '')}" for e in report["errors"]]
    return "\n".join(lines)


def strict_failures(report: dict | None) -> list[str]:
    """What `--strict` fails on even when the suite swallowed it: misses, errors, upstream calls in replay."""
    if report is None:
        return ["no run report"]
    counts = report["counts"]
    failures = []
    if counts["misses"]:
        failures.append(f"{counts['misses']} misses")
    if counts["errors"]:
        failures.append(f"{counts['errors']} errors")
    if report["mode"] == "replay" and counts["upstream"]:
        failures.append(f"{counts['upstream']} upstream requests in replay mode")
    return failures
