"""The parent-death signal is asked for only where it means the launcher's death (launch/lifeline.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

from cassette_proxy.launch.lifeline import die_with_parent


def test_a_child_started_from_another_thread_gets_no_parent_death_signal():
    # The kernel signals when the forking *thread* ends: a worker thread's child would die with the thread.
    found = []
    thread = threading.Thread(target=lambda: found.append(die_with_parent()))
    thread.start()
    thread.join()
    assert found == [None]


def test_the_child_of_the_main_thread_carries_the_signal():
    # /proc/PID/status does not show it; the child reads its own with prctl(PR_GET_PDEATHSIG).
    probe = "import ctypes; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"
    out = subprocess.run(
        [sys.executable, "-c", probe], preexec_fn=die_with_parent(signal.SIGTERM), capture_output=True, text=True
    )
    assert out.stdout.strip() == str(int(signal.SIGTERM))
