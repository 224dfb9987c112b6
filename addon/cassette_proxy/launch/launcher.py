"""Run mitmdump with the cassette addon: find it, start it, wait for it, stop it.

The one place that knows how to start the proxy (its listening sockets, a
private confdir, the ready file) and how to stop it; `cassette run`, `cassette
serve` and the pytest plugin all start it through `start()`. What a client
process needs in its environment to use it is in client_env.py.

The launcher binds and listens on every port itself and hands the sockets to
mitmdump (proxy/listening/handover.py), so the ports are known, and the command can
start, before mitmdump has even imported mitmproxy: a connection made before
the proxy is ready waits in the kernel's queue and is answered once the addon
runs. `start(wait=False)` returns at once (given the CA kept from an earlier
run, proxy_ca.py); `RunningProxy.wait_ready()` then says whether it came up.

No mitmproxy import here: mitmdump runs from its own environment (mitmproxy pins
h11 below what current SDKs need), found by `find_mitmdump()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ..core import option_table
from ..core.defaults import (
    DEFAULT_DIR,
    DEFAULT_HOSTS,
    DEFAULT_MODE,
    MITMDUMP_ARGS_VAR,
    MITMDUMP_VAR,
    MODE_VAR,
    MODES,
    default_mode,
)
from ..core.report import Report, ReportError
from . import proxy_ca
from .client_env import (
    LOOPBACK,
    NODE_TEST_HOOKS,
    client_environment,
    default_base_path,
    no_proxy_domain,
    no_proxy_value,
    own_cas,
    route_variables,
    write_ca_bundle,
)
from .control_client import CONTROL_TOKEN_VAR, CONTROL_URL, CONTROL_URL_VAR, ControlClient
from .errors import LauncherError
from .lifeline import die_with_parent

ADDON = Path(__file__).resolve().parent.parent.parent / "cassette.py"
"""The mitmdump entry, beside the package (in the source tree and where the package is installed)."""


READY_TIMEOUT = 60.0
HANDOVER_VAR = "CASSETTE_HANDOVER"
"""How mitmdump learns which inherited descriptors are its listening sockets (proxy/listening/handover.py)."""
LISTEN_BACKLOG = 4096
"""Connections the kernel holds for the proxy before it accepts them (capped by net.core.somaxconn)."""


@dataclass(frozen=True)
class Reverse:
    """A reverse-mode listener for `origin`: clients find it through base-URL variables (client_env.route_variables)
    instead of proxy variables and a CA."""

    name: str
    origin: str
    base_path: str
    port: int | None = None
    """A fixed listener port (`NAME=URL@PORT`), for apps that record their base URL; None: a free port per run."""


def parse_reverse(spec: str) -> Reverse:
    """`openai=https://api.openai.com[@PORT]` → a Reverse; a path in the URL becomes the base URL's path."""
    name, sep, url = spec.partition("=")
    url, at, port = url.strip().rpartition("@") if re.search(r"@\d*$", url.strip()) else (url.strip(), "", "")
    parts = urlsplit(url)
    name = name.strip().lower()
    if (
        not sep
        or not re.fullmatch(r"[a-z][a-z0-9_]*", name)
        or parts.scheme not in ("http", "https")
        or not parts.hostname
    ):
        raise LauncherError(
            f"--reverse {spec!r}: expected NAME=URL or NAME=URL@PORT, e.g. openai=https://api.openai.com "
            "or ollama=http://localhost:11434@8181"
        )
    if at and not (port.isdigit() and 0 < int(port) < 65536):
        raise LauncherError(
            f"--reverse {spec!r}: {port!r} after @ is not a port; give the listener's port as 1-65535, "
            "e.g. ollama=http://localhost:11434@8181, or leave @PORT out for a free port"
        )
    base_path = parts.path.rstrip("/") or default_base_path(name)
    return Reverse(name, f"{parts.scheme}://{parts.netloc}", base_path, int(port) if at else None)


def resolve_mode(given: str | None, environ: Mapping[str, str]) -> str:
    """The flag, else $CASSETTE_MODE, else replay; a typo fails here rather than inside the proxy."""
    mode = given or default_mode(environ)
    if mode not in MODES:
        raise LauncherError(f"cassette mode {mode!r} is not a mode; use one of {', '.join(MODES)}")
    return mode


def find_mitmdump(explicit: str | None, environ: Mapping[str, str]) -> str:
    """--mitmdump, else $CASSETTE_MITMDUMP, else the mitmdump beside this Python, else PATH."""
    if explicit or environ.get(MITMDUMP_VAR):
        path = explicit or environ[MITMDUMP_VAR]
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            raise LauncherError(
                f"mitmdump {path!r} (from {'--mitmdump' if explicit else '$' + MITMDUMP_VAR}) is not an executable file"
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


@dataclass
class Settings:
    """Everything a proxy start needs; built by the CLI or the pytest plugin."""

    mitmdump: str
    mode: str = DEFAULT_MODE
    cassette_dir: Path = Path(DEFAULT_DIR)
    hosts: Sequence[str] = ()
    """Host globs under cassette control; empty: the addon's defaults."""
    reverse: Sequence[Reverse] = ()
    port: int = 0
    report: Path | None = None
    extra_args: Sequence[str] = field(default_factory=list)
    ignore: Sequence[str] = ()
    """`cassette_ignore` paths."""
    key_headers: Sequence[str] = ()
    """Key headers on top of the defaults (`cassette_key_headers`)."""
    ignore_values: Sequence[str] = ()
    """`cassette_ignore_values`: regular expressions or preset names."""
    frameworks: Sequence[str] | None = None
    """`cassette_frameworks`: the framework presets to key with; None: the addon's default (all), empty: none."""
    allow_hosts: Sequence[str] = ()
    """`cassette_allow_hosts`: hosts outside the scope a replay run may still reach."""
    telemetry: bool = True
    """`cassette_telemetry`: answer the known telemetry sinks offline in replay, never record them."""
    telemetry_sinks: Sequence[str] = ()
    """`cassette_telemetry_sinks`: more sinks, HOST/PATH globs."""
    only_reverse: bool = False
    """Clients get the reverse listeners' NAME_BASE_URL variables only: no proxy variables, no CA bundle."""
    started_by: str = "run"
    """`cassette_started_by`: run, serve or pytest, so that the proxy's hints name what the user types."""
    proxy_ca_only: bool = False
    """The clients' CA bundle holds the proxy's CA alone, not the system's and the environment's (see
    `proxy_ca_only_by_default`)."""

    def controlled_hosts(self) -> list[str]:
        """The --hosts given (or the defaults) plus every reverse target, which is there to be recorded."""
        hosts = list(self.hosts or DEFAULT_HOSTS)
        for reverse in self.reverse:
            host = urlsplit(reverse.origin).hostname
            if host and host not in hosts and "*" not in hosts:  # parse_reverse refused a URL without a host
                hosts.append(host)
        return hosts


def proxy_ca_only_by_default(mode: str, environ: Mapping[str, str]) -> bool:
    """Whether clients get the proxy's CA alone when no flag says: in replay, unless the environment trusts CAs
    of its own or sends some hosts around the proxy.

    A new SDK client parses its CA bundle once per SSL context, and httpx builds one per proxy variable: with
    the system's ~150 CAs that was 63 ms a client against 1.3 ms (benchmarks/vcr_suite.py), most of what a
    suite replayed through the proxy paid over in-process replay. Every HTTPS request through the proxy is
    signed by its CA; in replay, HTTPS that goes around it is traffic that escaped the replay, and failing
    verification says so (not in Node, whose bundled roots `NODE_EXTRA_CA_CERTS` only adds to: `cassette run
    --isolate` seals those, launch/isolate.py). A CA variable trusting a CA the system does not (`own_cas`: a corporate CA) or a
    NO_PROXY beyond loopback means some HTTPS is meant to go around: those keep the full bundle, as do record
    and update, which reach upstreams.
    """
    if mode != "replay" or own_cas(environ):
        return False
    entries = ",".join(filter(None, (environ.get("NO_PROXY"), environ.get("no_proxy")))).replace(" ", "").split(",")
    return all(not entry or no_proxy_domain(entry) in LOOPBACK for entry in entries)


def extra_args_from(environ: Mapping[str, str]) -> list[str]:
    return shlex.split(environ.get(MITMDUMP_ARGS_VAR, ""))


class RunningProxy:
    """A started mitmdump: its addresses, the client environment for it, and how to stop it.

    Its addresses are known from the start (the launcher bound them); whether it came up is known once
    `wait_ready()` returns. Until then a client's connection waits to be accepted.
    """

    def __init__(
        self,
        settings: Settings,
        private: Path,
        process: subprocess.Popen | None,
        port: int,
        reverse_ports: Sequence[int],
        control_token: str,
        environ: Mapping[str, str],
        ca_certificate: Path | None,
    ):
        self.settings = settings
        self.control_token = control_token
        """This run's secret for the control channel: in mitmdump's environment and the clients', never on disk."""
        self.private = private
        self.process = process
        """mitmdump; None for a run on a warm proxy another process serves (warm_proxy.py)."""
        self.url = f"http://127.0.0.1:{port}"
        self.reverse_ports = dict(zip((r.name for r in settings.reverse), reverse_ports, strict=True))
        self.base_urls = {
            reverse.name: f"http://127.0.0.1:{self.reverse_ports[reverse.name]}{reverse.base_path}"
            for reverse in settings.reverse
        }
        self.route_variables: dict[str, str] = {}
        """Every reverse route's base-URL variables: NAME_BASE_URL and those its SDKs read (client_env.py)."""
        for reverse in settings.reverse:
            listener = f"http://127.0.0.1:{self.reverse_ports[reverse.name]}"
            self.route_variables.update(route_variables(reverse.name, listener, reverse.base_path))
        self._ready: dict | None = None
        self._failure: LauncherError | None = None
        self._ready_lock = threading.Lock()
        self._control: ControlClient | None = None
        if ca_certificate is None:  # no CA kept yet: mitmdump makes one, and clients can only be wired once it has
            self.wait_ready()
            ca_certificate = self.private / "confdir" / proxy_ca.CERTIFICATE
            proxy_ca.keep(self.private / "confdir")
        self._write_trust(ca_certificate, environ)

    def _write_trust(self, ca_certificate: Path, environ: Mapping[str, str]) -> None:
        self.ca_bundle = write_ca_bundle(
            self.private / "ca-bundle.pem", ca_certificate, environ, others=not self.settings.proxy_ca_only
        )
        try:
            self.java_truststore: Path | None = proxy_ca.truststore(self.ca_bundle)
        except ValueError as e:  # a certificate in the bundle that is not base64: other runtimes may still cope
            self.java_truststore = None
            print(f"cassette: Java keeps its own trust store (no proxy CA): {self.ca_bundle}: {e}", file=sys.stderr)

    def wait_ready(self) -> dict:
        """The addon's ready file once it is written; LauncherError (the same each call) when mitmdump did not come
        up or runs in another mode than asked for. Safe from several threads."""
        with self._ready_lock:
            if self._failure is not None:
                raise self._failure
            if self._ready is None:
                assert self.process is not None
                try:
                    self._ready = _wait_ready(self.private / "ready.json", self.process, self.log_path)
                    if self._ready["mode"] != self.settings.mode:
                        raise LauncherError(
                            f"mitmdump runs in mode {self._ready['mode']!r}, not the {self.settings.mode!r} asked for"
                        )
                except LauncherError as e:
                    self._failure = e
                    _kill(self.process)
                    raise
            return self._ready

    def control(self) -> ControlClient:
        """The client of the control channel: tell the proxy which test runs (control_channel.py); one kept
        connection for every call."""
        if self._control is None:
            self._control = ControlClient(self.url, self.control_token)
        return self._control

    @property
    def report_path(self) -> Path:
        return self.settings.report or self.private / "report.json"

    @property
    def log_path(self) -> Path:
        return self.private / "mitmdump.log"

    @property
    def node_fetch_bypassed(self) -> bool:
        """Whether a Node process found no undici to route its fetch through the proxy (node_preload.cjs); until
        `stop()`, which removes the private folder."""
        return (self.private / "node-notice").exists()

    def client_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`environ` wired to this proxy, with the reverse routes' base-URL variables (`route_variables`).

        With `only_reverse`: the base-URL variables, the mode and the control channel, no proxy or CA variables;
        loopback and the listeners join NO_PROXY so that a proxy the environment already names is not asked for them.
        """
        if self.settings.only_reverse:
            env = dict(environ)
            existing = ",".join(filter(None, (environ.get("NO_PROXY"), environ.get("no_proxy"))))
            direct = [f"127.0.0.1:{port}" for port in self.reverse_ports.values()]
            env["NO_PROXY"] = env["no_proxy"] = ",".join([no_proxy_value(existing, ()), *direct])
            env.update(self.route_variables)
            env[MODE_VAR] = self.settings.mode
            # A test runner's hooks still announce tests: straight to the listener, no proxy variable needed.
            env["CASSETTE_PROXY_URL"] = self.url
            env["CASSETTE_NODE_TEST_HOOKS"] = str(NODE_TEST_HOOKS)
            env[CONTROL_URL_VAR] = CONTROL_URL
            env[CONTROL_TOKEN_VAR] = self.control_token
            return env
        env = client_environment(
            environ,
            proxy_url=self.url,
            ca_bundle=self.ca_bundle,
            controlled_hosts=self.settings.controlled_hosts(),
            mode=self.settings.mode,
            notice_file=self.private / "node-notice",
            base_urls=self.route_variables,
            java_truststore=self.java_truststore,
            # Clients that read host:port entries go straight to the listeners; the addon undoes the detour of the others.
            direct=[f"127.0.0.1:{port}" for port in self.reverse_ports.values()],
        )
        # A test runner in the child announces its tests with these (the Node helper, launch/node_test_hooks.cjs).
        env[CONTROL_URL_VAR] = CONTROL_URL
        env[CONTROL_TOKEN_VAR] = self.control_token
        return env

    def exports(self, environ: Mapping[str, str]) -> str:
        """Shell `export` lines for what client_env() changes: `eval "$(cassette env)"`."""
        env = self.client_env(environ)
        # The control token is not printed or left in serve's state file: announcing tests is for the runs that
        # own their proxy (`cassette run`, the pytest plugin), not for every shell sharing a `cassette serve`.
        private = (CONTROL_TOKEN_VAR, CONTROL_URL_VAR)
        changed = sorted(name for name, value in env.items() if environ.get(name) != value and name not in private)
        return "".join(f"export {name}={shlex.quote(env[name])}\n" for name in changed)

    def stop(self) -> Report | None:
        """Once it is up, SIGTERM by PID (the addon writes its report on shutdown); then drop the private folder.

        Waiting for it to be up first: mitmdump killed while it starts would write no report, and a command that
        exits that early may still have connections waiting for it.
        """
        with contextlib.suppress(LauncherError):  # already stopped; the error is the caller's to report
            self.wait_ready()
        if self._control is not None:
            self._control.close()
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                _kill(self.process)
        try:
            report = Report.read(self.report_path) if self.report_path.exists() else None
        except ReportError:
            report = None
        shutil.rmtree(self.private, ignore_errors=True)
        return report


def command(settings: Settings, private: Path, port: int, reverse_ports: Sequence[int]) -> list[str]:
    args = [settings.mitmdump, "--listen-host", "127.0.0.1", "-p", str(port)]
    # Servers start once the addon has loaded, on the handed sockets (proxy/listening/handover.py), not before.
    args += ["--set", f"confdir={private / 'confdir'}", "--set", "server=false"]
    if settings.reverse:
        args += ["--mode", "regular"]
        for reverse, reverse_port in zip(settings.reverse, reverse_ports, strict=True):
            args += ["--mode", f"reverse:{reverse.origin}@{reverse_port}"]
    args += ["-s", str(ADDON)]
    for reverse, reverse_port in zip(settings.reverse, reverse_ports, strict=True):
        args += ["--set", f"cassette_routes={reverse.name}={reverse_port}"]
    options = {
        # mitmproxy's own flow lines print URLs as sent, `?key=` included; the addon logs its own, without secrets.
        "flow_detail": 0,
        "cassette_mode": settings.mode,
        "cassette_started_by": settings.started_by,
        "cassette_dir": settings.cassette_dir.resolve(),
        "cassette_ready_file": private / "ready.json",
        "cassette_report": settings.report.resolve() if settings.report else private / "report.json",
    }
    for name, value in options.items():
        args += ["--set", f"{name}={value}"]
    for host in settings.controlled_hosts() if settings.hosts or settings.reverse else ():
        args += ["--set", f"cassette_hosts={host}"]
    args += key_options(settings)
    return args + list(settings.extra_args)


def key_options(settings: Settings) -> list[str]:
    """`--set` arguments for the settings the option table spells (core/option_table.py: the key and offline
    settings); none given leaves the addon's defaults (and any extra args)."""
    return option_table.set_arguments(settings)


def start(settings: Settings, environ: Mapping[str, str] | None = None, wait: bool = True) -> RunningProxy:
    """Bind the run's ports, start mitmdump on them and, with `wait`, wait until the addon is up.

    Every port is bound here (port 0: a free one; `NAME=URL@PORT`: that one, or a LauncherError naming the
    route), so no two listeners or runs can race for one. With `wait=False` this returns as soon as mitmdump
    is started (unless no CA could be made before it, proxy_ca.py): call `wait_ready()`.
    """
    environ = os.environ if environ is None else environ
    private = Path(tempfile.mkdtemp(prefix="cassette-proxy-"))  # mode 0700
    # Through the environment, not `--set`: a command line is visible to every user of the machine.
    control_token = secrets.token_urlsafe(32)
    (private / "confdir").mkdir(mode=0o700)
    process = None
    listeners: list[socket.socket] = []
    try:
        confdir = private / "confdir"
        ca_certificate = proxy_ca.install(confdir) or proxy_ca.make(settings.mitmdump, confdir)
        listeners = bind_listeners(settings)
        port, *reverse_ports = (listener.getsockname()[1] for listener in listeners)
        handover = {"mode": settings.mode, "sockets": {str(s.getsockname()[1]): s.fileno() for s in listeners}}
        proxy_environ = {**environ, CONTROL_TOKEN_VAR: control_token, HANDOVER_VAR: json.dumps(handover)}
        # The suite's environment may say not to write bytecode (CI images often do): the proxy's own modules are
        # then compiled on every start, about a second here. They are ours, not the suite's: cache them.
        proxy_environ.pop("PYTHONDONTWRITEBYTECODE", None)
        with (private / "mitmdump.log").open("wb") as out:
            process = subprocess.Popen(
                command(settings, private, port, reverse_ports), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=proxy_environ, pass_fds=[s.fileno() for s in listeners],
                start_new_session=True,  # a Ctrl-C reaches the suite, which may still need the proxy in teardown
                preexec_fn=die_with_parent(signal.SIGKILL),  # a launcher killed outright leaves no proxy (lifeline.py)
            )  # fmt: skip
        # Only mitmdump holds the sockets now: if it exits, waiting clients are reset rather than left hanging.
        for listener in listeners:
            listener.close()
        proxy = RunningProxy(settings, private, process, port, reverse_ports, control_token, environ, ca_certificate)
        if wait:
            proxy.wait_ready()
        return proxy
    except BaseException:
        for listener in listeners:
            listener.close()
        if process is not None:
            _kill(process)
        shutil.rmtree(private, ignore_errors=True)
        raise


def bind_listeners(settings: Settings) -> list[socket.socket]:
    """Listening sockets on 127.0.0.1: the forward proxy's (`settings.port`, 0 for a free one), then each reverse
    route's (its fixed port, else a free one); a fixed port that is taken fails now, naming the route."""
    listeners: list[socket.socket] = []
    wanted = [(None, settings.port), *((reverse, reverse.port or 0) for reverse in settings.reverse)]
    seen: dict[int, str] = {}
    try:
        for reverse, port in wanted:
            if reverse is not None and port:
                if port in seen:
                    raise LauncherError(
                        f"--reverse {reverse.name} and --reverse {seen[port]} both ask for port {port}; "
                        "give each route its own port"
                    )
                seen[port] = reverse.name
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # what asyncio's servers set
            try:
                listener.bind(("127.0.0.1", port))
            except OSError as e:
                if reverse is None:
                    raise LauncherError(
                        f"--port {port}: port {port} on 127.0.0.1 is not free ({e.strerror or e}); pick another or "
                        "leave --port out for a free one"
                    ) from None
                raise LauncherError(
                    f"--reverse {reverse.name}=…@{port}: port {port} on 127.0.0.1 is not free "
                    f"({e.strerror or e}); stop what listens there, pick another port, or leave @PORT out"
                ) from None
            listener.listen(LISTEN_BACKLOG)
            listener.set_inheritable(True)
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()


def _wait_ready(ready_file: Path, process: subprocess.Popen, log: Path) -> dict:
    """The ready file's content; LauncherError when mitmdump exits or takes too long."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if ready_file.exists():
            return json.loads(ready_file.read_text())
        if process.poll() is not None:
            text = log.read_text(errors="replace")
            raise LauncherError(f"mitmdump exited with status {process.returncode} before it was ready:\n{text}")
        time.sleep(0.01)
    raise LauncherError(
        f"mitmdump not ready after {READY_TIMEOUT:.0f} s: the cassette addon never reported its addresses "
        "(mitmproxy silently skips options after a badly typed or repeated --set in the extra arguments):\n"
        + log.read_text(errors="replace")
    )


def process_alive(pid: int) -> bool:
    """A process with this id exists (one of another user's counts: it is not ours to reuse, but it is alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
