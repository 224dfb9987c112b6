"""mitmdump started by `fork` from a process that has imported mitmproxy already: the harness's proxies.

Importing mitmproxy is two thirds of a mitmdump's start (0.35 of 0.6 s of CPU on this machine), and the
integration tier starts some 340 of them a line, on two cores: a tenth of CI. A fork server, one per test process,
imports mitmproxy once (the modules `mitmdump` imports before it reads its arguments, nothing of ours); each proxy
is then a `fork` of it that runs `mitmdump(argv)` as the console script does: the cassette addon, its options, its
environment and its working folder are the proxy's own, loaded in the child as in a new process, and it exits
through the interpreter's own shutdown (atexit runs). What no fork can honour is decided at import time, so a
proxy whose environment sets it is exec'd as before: a `PYTHON…` variable other than the server's (the module path),
or a TLS key log (`SSLKEYLOGFILE`, read when mitmproxy's TLS module is imported).

The server is the fork's parent: it reaps each proxy and keeps its exit status, which `Forked.poll` asks for over
the server's pipe. Everything else a test does with a process goes by PID as before (SIGTERM, SIGKILL, /proc).
`CASSETTE_TEST_FORK=0` execs every proxy (to compare, or to rule the server out).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

SERVER = r"""
import json, os, sys, traceback
script = sys.argv[1]
sys.path[0] = os.path.dirname(script)  # as the console script's own folder is
import mitmproxy.tools.main  # what `mitmdump` imports before it reads its arguments
import mitmproxy.tools.dump, mitmproxy.tools.cmdline, mitmproxy.addons, mitmproxy.proxy.server

def child(request):
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [script, *request["args"]]
    try:
        code = mitmproxy.tools.main.mitmdump(request["args"])
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()
        code = 1
    raise SystemExit(code)  # up through the server's frames: the interpreter's own exit, atexit included

def serve():
    statuses = {}
    for line in sys.stdin:
        request = json.loads(line)
        while True:  # reap every proxy that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            statuses[pid] = os.waitstatus_to_exitcode(status)
        if request["op"] == "spawn":
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                child(request)
            answer = {"pid": pid}
        else:
            answer = {"returncode": statuses.pop(request["pid"], None)}  # "reap": its exit code once it ended
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()

serve()
"""

NOT_FORKABLE = ("SSLKEYLOGFILE", "MITMPROXY_SSLKEYLOGFILE")


class ForkServer:
    """One per test process and mitmdump: started on first use, ended with the test process (its stdin closes)."""

    def __init__(self, python: str, script: str):
        self.env = dict(os.environ)
        self.process = subprocess.Popen(
            [python, "-c", SERVER, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=self.env, text=True
        )
        self.lock = threading.Lock()

    def call(self, request: dict) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (exit code {self.process.poll()})")
        return json.loads(line)

    def forkable(self, env: dict[str, str]) -> bool:
        python_vars = {k for k in {*env, *self.env} if k.startswith("PYTHON")}
        return not any(env.get(k) for k in NOT_FORKABLE) and all(env.get(k) == self.env.get(k) for k in python_vars)


class Forked:
    """A proxy forked by the server, with what the harness uses of `subprocess.Popen`."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]):
        self.server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.call({"op": "reap", "pid": self.pid})["returncode"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_SERVERS: dict[tuple[str, str], ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def start(python: str, args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen | Forked:
    """mitmdump (`args[0]`, run by `python`) with `args[1:]`, its output to `log`: forked when it can be."""
    if os.environ.get("CASSETTE_TEST_FORK") != "0":
        with _SERVERS_LOCK:
            server = _SERVERS.get((python, args[0]))
            if server is None or server.process.poll() is not None:
                server = _SERVERS[(python, args[0])] = ForkServer(python, args[0])
        if server.forkable(env):
            request = {"op": "spawn", "args": args[1:], "env": env, "cwd": os.getcwd(), "log": str(log)}
            return Forked(server, server.call(request)["pid"], args)
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
