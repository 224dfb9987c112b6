"""SIGKILL of `cassette run` (an OOM kill, a CI runner's hard cancel) leaves neither its mitmdump nor its command
running: both asked the kernel for a signal when their parent dies (launch/lifeline.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cassette_command import CASSETTE

COMMAND = """
import os, sys, time
open(sys.argv[1] + ".tmp", "w").write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.parametrize("flags", [[], ["--isolate"]], ids=["plain", "isolated"])
def test_sigkill_of_cassette_run_ends_its_proxy_and_its_command(tmp_path, flags):
    # Isolated, the command became itself through isolate_entry.py, in a user namespace of its own.
    pid_file = tmp_path / "command.pid"
    env = {name: value for name, value in os.environ.items() if name != "CASSETTE_MODE"}
    env["XDG_RUNTIME_DIR"] = str(tmp_path)  # no warm proxy of the machine's user is reused
    launcher = subprocess.Popen(
        [CASSETTE, "run", *flags, "--dir", str(tmp_path / "cassettes"), "--", sys.executable, "-c", COMMAND, str(pid_file)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    started: list[int] = []
    try:
        assert wait_for(pid_file.exists, 60), "the command never started"
        command = int(pid_file.read_text())
        proxy = next(pid for pid in children(launcher.pid) if pid != command)
        started += [command, proxy]
        assert alive(command) and alive(proxy)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        assert wait_for(lambda: not alive(command) and not alive(proxy), 10), (
            f"still running after the launcher's SIGKILL: {[p for p in (command, proxy) if alive(p)]}"
        )
    finally:
        for pid in (launcher.pid, *started):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        launcher.wait()
