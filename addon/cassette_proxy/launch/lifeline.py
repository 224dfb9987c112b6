"""Children that end with the launcher, whatever ends it: a parent-death signal.

`cassette run`, `cassette serve` and the pytest plugin stop mitmdump and the
command on their way out, but a SIGKILL (an OOM kill, a CI runner's hard
cancel) runs no way out: without this the proxy and the suite kept running,
orphaned. Linux delivers a signal of the child's choosing when its parent dies
(`prctl(PR_SET_PDEATHSIG)`), set here between fork and exec.

The kernel sends it when the *thread* that forked the child ends, not the
process: a child started from a thread that may end before the launcher (an
executor's worker) would be killed early. So the signal is asked for only when
the child is started from the main thread, whose end is the launcher's end.
Elsewhere (macOS, a child started from another thread) children are stopped by
the launcher's own way out alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child receive `sig` when this process ends; None where that cannot be asked
    for (not Linux, or not the main thread)."""
    if _libc is None or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    prctl = _libc.prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: the signal will never come
            os.kill(os.getpid(), sig)

    return preexec
