"""Warm proxies for the local loop: a `cassette serve` that later `cassette run`s and pytest sessions reuse.

Re-running one test should cost what the test costs, not a proxy's start and
stop. A `cassette serve` (foreground, `--detach`, or the one `cassette run
--keep` leaves) registers itself in this user's private folder
(user_folder.py: `warm/<id>.json`, mode 0600: it names the control token),
keyed by everything that decides how the proxy answers (`fingerprint`). A run
whose fingerprint is the same reuses it; one whose settings differ from a warm
proxy of the same cassette folder is refused it, with the differences, and
starts its own: never a proxy with other settings.

One run at a time: a run holds the warm proxy's lease (`flock` on
`warm/<id>.lock`) from its start to its end; a second run at once starts its
own. A run announces itself to the proxy (proxy/runs.py) so that its report,
repeat counters and current test start empty, and takes its report back at
its end. The serving process stops the proxy on `cassette serve --stop`, or
after `--idle` with no run holding the lease (measured from the last run's end).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import __version__
from ..core import option_table
from ..core.files.atomic_write import write_atomic
from ..core.keys.frameworks import DEFAULT_FRAMEWORKS
from ..core.report import Report, ReportError
from .control_client import ControlError
from .errors import LauncherError
from .launcher import ADDON, RunningProxy, Settings, key_options, process_alive
from .outer_proxy import FLAGS, described
from .user_folder import private_folder, private_subfolder, user_folder

IDLE_DEFAULT = 30 * 60.0
"""A detached warm proxy stops after this long without a run (`--idle` changes it)."""
PER_RUN_VARIABLES = frozenset(
    {"CASSETTE_MODE", "CASSETTE_DIR", "CASSETTE_MITMDUMP", "CASSETTE_MITMDUMP_ARGS", "CASSETTE_CONTROL_TOKEN"}
    | {"CASSETTE_CONTROL_URL", "CASSETTE_RUN_PROXY", "CASSETTE_PROXY_URL", "CASSETTE_NODE_NOTICE"}
    | {"CASSETTE_NODE_TEST_HOOKS", "CASSETTE_HANDOVER", "CASSETTE_ISOLATED"}
)
"""`CASSETTE_*` variables that do not reach the proxy's options: already in the settings (mode, folder, mitmdump and
its arguments), or set per run by the launcher. Every other one (CASSETTE_REPLAY_TIMING, a user addon's) counts."""
MORE_FLAGS = {
    "fixed_ports": "--reverse NAME=URL@PORT",
    "arguments": "the order of --ignore, --key-header, --ignore-value, --hosts or --mitmdump-arg",
    "extra_args": "--mitmdump-arg / $CASSETTE_MITMDUMP_ARGS",
    "mitmdump": "--mitmdump / $CASSETTE_MITMDUMP",
    "environment": "CASSETTE_* / MITMPROXY* variables",
}


OPTION_FLAGS = {option.short: option.flag.spelling for option in option_table.in_fingerprint() if option.flag}
"""The `cassette run` flag of each option in the fingerprint (core/option_table.py)."""


def code_stamp() -> str:
    """The proxy's code: this package's version and the content of every file mitmdump loads from it. Not their
    times: the tool's install and the suite's install of one version hold the same bytes with other mtimes (a warm
    proxy `cassette serve` started was refused by the plugin as "the proxy's code changed"), and an edit shows in
    the content."""
    package = ADDON.parent / "cassette_proxy"
    digest = hashlib.sha256(__version__.encode())
    for path in sorted([ADDON, *package.rglob("*.py"), *package.rglob("*.cjs")]):
        relative = path.relative_to(ADDON.parent).as_posix()
        digest.update(f"\n{relative}\n{path.stat().st_size}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(settings: Settings, environ: Mapping[str, str]) -> dict:
    """Everything that decides how a proxy started with `settings` in `environ` answers, as JSON-able data.

    Not in it: the run's own report file, its clients' CA bundle and routes-only choice (each run makes its own),
    the forward port, and `started_by` (which only words the hints)."""
    frameworks = sorted(DEFAULT_FRAMEWORKS if settings.frameworks is None else settings.frameworks)
    # The same effective frameworks give the same arguments, whether given (the plugin's ini) or left to the default.
    normal = dataclasses.replace(settings, frameworks=frameworks, extra_args=[])
    hosts = normal.controlled_hosts() if settings.hosts or settings.reverse else []
    return {
        **option_table.fingerprint_of(settings, option_table.in_fingerprint()),
        "routes": described(settings)["routes"],
        "fixed_ports": {r.name: r.port for r in settings.reverse if r.port},
        "arguments": [*hosts, *key_options(normal)],
        "extra_args": list(settings.extra_args),
        "mitmdump": str(Path(settings.mitmdump).resolve()),
        "code": code_stamp(),
        "environment": {
            name: value
            for name, value in sorted(environ.items())
            if (name.startswith("CASSETTE_") and name not in PER_RUN_VARIABLES) or name.startswith("MITMPROXY")
        },
    }


def warm_id(settings_fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(settings_fingerprint, sort_keys=True).encode()).hexdigest()[:24]


def differences(wanted: dict, warm: dict) -> list[str]:
    """One line per setting a run asks for that a warm proxy does not have: `name: run's → warm's (flag)`."""
    out = []
    for name in wanted.keys() | warm.keys():
        mine, theirs = wanted.get(name), warm.get(name)
        if mine == theirs:
            continue
        if name == "code":
            out.append("the proxy's code changed since the warm proxy started")
        elif name == "environment":
            names = sorted(
                n for n in (mine or {}).keys() | (theirs or {}).keys() if (mine or {}).get(n) != (theirs or {}).get(n)
            )
            out.append(f"environment: {', '.join(names)} differ ({MORE_FLAGS[name]})")
        elif name == "arguments" and any(wanted.get(n) != warm.get(n) for n in FLAGS):
            continue  # already named by its setting
        else:
            flag = FLAGS.get(name) or OPTION_FLAGS.get(name) or MORE_FLAGS.get(name, name)
            out.append(f"{name}: {mine!r} in this run, {theirs!r} in the warm proxy ({flag})")
    return sorted(out)


@dataclass(frozen=True)
class Registration:
    """A warm proxy as its serving process left it for the runs that may reuse it."""

    path: Path
    pid: int
    """The serving process (`cassette serve`): what `--stop` signals."""
    mitmdump_pid: int
    url: str
    reverse_ports: dict[str, int]
    token: str
    ca_certificate: str
    fingerprint: dict
    started_by: str
    idle: float | None
    pid_started: str | None
    """When `pid` started (`process_started`): a pid reused by another process is not this registration's."""
    mitmdump_started: str | None

    @property
    def lock_path(self) -> Path:
        return self.path.with_suffix(".lock")

    def describe(self) -> str:
        return (
            f"the warm proxy at {self.url} (pid {self.pid}, `cassette {self.started_by}`, {self.fingerprint['mode']})"
        )

    def write(self) -> None:
        data = {name: value for name, value in asdict(self).items() if name != "path"}
        write_atomic(self.path, json.dumps(data).encode(), mode=0o600)
        self.lock_path.touch(mode=0o600)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.lock_path.unlink(missing_ok=True)

    @classmethod
    def read(cls, path: Path) -> Registration | None:
        """The registration at `path`; None (and the file removed) when its processes are gone or it is unreadable."""
        try:
            data = json.loads(path.read_text())
            found = cls(path=path, **data)
        except (OSError, ValueError, TypeError):
            return None
        if not (is_process(found.pid, found.pid_started) and is_process(found.mitmdump_pid, found.mitmdump_started)):
            # Gone, or its pid now another process's: never sent a run's control token, never signalled.
            found.remove()
            return None
        return found


def process_started(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (`/proc/PID/stat`, field 22): with its pid, a process's
    identity; None where /proc does not say (not Linux) or the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def is_process(pid: int, started: str | None) -> bool:
    """Whether `pid` is still the process that started at `started`; where start times cannot be read (not Linux),
    whether it is alive."""
    if started is None and not Path("/proc/self/stat").exists():
        return process_alive(pid)
    return started is not None and process_started(pid) == started


def warm_folder(create: bool) -> Path | None:
    """This user's `warm/` folder (checked private); None when it does not exist and `create` is false."""
    if create:
        return private_subfolder("warm")
    folder = user_folder() / "warm"
    return folder if private_folder(user_folder(), create=False) and private_folder(folder, create=False) else None


def registrations() -> list[Registration]:
    folder = warm_folder(create=False)
    found = (Registration.read(path) for path in sorted(folder.glob("*.json"))) if folder else ()
    return [registration for registration in found if registration is not None]


def register(proxy: RunningProxy, environ: Mapping[str, str], idle: float | None) -> Registration | None:
    """Leave `proxy` for later runs; None when a warm proxy with the same settings already serves."""
    settings_fingerprint = fingerprint(proxy.settings, environ)
    folder = warm_folder(create=True)
    assert folder is not None
    path = folder / f"{warm_id(settings_fingerprint)}.json"
    if Registration.read(path) is not None:
        return None
    assert proxy.process is not None
    registration = Registration(
        path=path,
        pid=os.getpid(),
        mitmdump_pid=proxy.process.pid,
        url=proxy.url,
        reverse_ports=dict(proxy.reverse_ports),
        token=proxy.control_token,
        ca_certificate=str(proxy.private / "confdir" / "mitmproxy-ca-cert.pem"),
        fingerprint=settings_fingerprint,
        started_by=proxy.settings.started_by,
        idle=idle,
        pid_started=process_started(os.getpid()),
        mitmdump_started=process_started(proxy.process.pid),
    )
    registration.write()
    return registration


class Lease:
    """One run at a time on a warm proxy: an exclusive `flock` on its lock file; the file's mtime is its last use."""

    def __init__(self, registration: Registration) -> None:
        self.path = registration.lock_path
        self.fd: int | None = None

    def take(self) -> bool:
        """Whether it was free (non-blocking)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self, used: bool = True) -> None:
        """Free it; `used`: a run ended now (the idle time counts from here)."""
        if self.fd is None:
            return
        if used:
            with contextlib.suppress(OSError):
                os.utime(self.fd)
        os.close(self.fd)
        self.fd = None

    def idle_for(self) -> float:
        try:
            return time.time() - os.stat(self.path).st_mtime
        except OSError:
            return 0.0


class WarmRun(RunningProxy):
    """A run on a warm proxy: the same client environment as an own proxy's, its own report, no start or stop."""

    def __init__(self, settings: Settings, registration: Registration, lease: Lease, environ: Mapping[str, str]):
        private = Path(tempfile.mkdtemp(prefix="cassette-run-"))  # this run's CA bundle and Node notice
        try:
            ports = [registration.reverse_ports[reverse.name] for reverse in settings.reverse]
            port = int(registration.url.rsplit(":", 1)[1])
            super().__init__(
                settings, private, None, port, ports, registration.token, environ, Path(registration.ca_certificate)
            )
        except BaseException:
            shutil.rmtree(private, ignore_errors=True)
            raise
        self.registration = registration
        self.lease = lease

    def wait_ready(self) -> dict:
        return {"mode": self.settings.mode}

    def stop(self) -> Report | None:
        """End this run on the proxy (its report, also written to `--report`), free the lease; the proxy stays."""
        try:
            answer = self.control().call("/v1/run/end", {})
            report = Report.from_json(answer.get("report"))
        except (ControlError, OSError, ReportError) as e:
            print(f"cassette: {self.registration.describe()} did not give this run's report: {e}", file=sys.stderr)
            report = None
        finally:
            self.control().close()
            self.lease.release()
            shutil.rmtree(self.private, ignore_errors=True)
        if report is not None and self.settings.report:
            report.write(self.settings.report)
        return report


def attach(settings: Settings, environ: Mapping[str, str], say: Callable[[str], None]) -> WarmRun | None:
    """A run on the warm proxy with exactly these settings, when one serves and is free; else None, and `say` why
    when a warm proxy of the same cassette folder was refused (other settings, or in use)."""
    folder = warm_folder(create=False)
    if folder is None:
        return None
    wanted = fingerprint(settings, environ)
    found = Registration.read(folder / f"{warm_id(wanted)}.json")
    if found is None:
        for other in registrations():
            if other.fingerprint.get("dir") == wanted["dir"]:
                lines = "\n  ".join(differences(wanted, other.fingerprint))
                say(
                    f"cassette: not using {other.describe()} for {wanted['dir']}: its settings differ from this run's:\n"
                    f"  {lines}\nStarting a proxy of its own; `cassette serve --stop` stops every warm proxy of yours."
                )
        return None
    lease = Lease(found)
    if not lease.take():
        say(f"cassette: {found.describe()} is in use by another run: starting a proxy of its own")
        return None
    try:
        if Registration.read(found.path) is None:  # stopped while we waited for the lease
            lease.release(used=False)
            return None
        run = WarmRun(settings, found, lease, environ)
        run.control().call("/v1/run/start", {})
    except (ControlError, OSError, LauncherError) as e:
        lease.release(used=False)
        say(f"cassette: {found.describe()} did not take this run ({e}): starting a proxy of its own")
        return None
    say(f"cassette: using {found.describe()}")
    return run


def stop_all(say: Callable[[str], None], timeout: float = 30) -> int:
    """SIGTERM every warm proxy's serving process and wait for each to unregister; how many were stopped."""
    found = registrations()
    for registration in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(registration.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for registration in found:
        while registration.path.exists() and process_alive(registration.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        say(f"cassette: stopped {registration.describe()} for {registration.fingerprint['dir']}")
    return len(found)
