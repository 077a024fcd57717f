"""Children die with the coordinator, even when it is SIGKILLed and cannot clean up.

Two mechanisms, because each has a gap: ``PR_SET_PDEATHSIG`` (Linux) makes the kernel send
SIGKILL to the child the moment its parent dies, but is lost if the parent died before the call;
``os.getppid()`` changing away from the coordinator's pid catches that race and non-Linux systems,
and the children poll it in their loops. Every child also carries ``TAKEOVER_RUN_DIR`` in its
environment so that tests and users can find stragglers of a given run with psutil.

Why it is not in the runner (takeover.run): the power-loss daemon, a benchmark's processes and the API's
child run need it too, and they stand below the runner or beside it; it imports nothing of takeover.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

RUN_ENV = "TAKEOVER_RUN_DIR"
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Call first thing in a child: arrange to be killed when the coordinator goes away (with ``sig``:
    a child that must clean up on its way out, such as the power-loss layer's FUSE daemon, asks for
    SIGTERM)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except OSError:
            pass  # the getppid() watch still covers us
    if not parent_alive(parent_pid):
        os._exit(70)


def parent_alive(parent_pid: int) -> bool:
    return os.getppid() == parent_pid
