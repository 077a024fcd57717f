"""Children die with the coordinator, even when it is SIGKILLed and cannot clean up.

Two mechanisms, because each has a gap: ``PR_SET_PDEATHSIG`` (Linux) makes the kernel send
SIGKILL to the child the moment its parent dies, but is lost if the parent died before the call;
``os.getppid()`` changing away from the coordinator's pid catches that race and non-Linux systems,
and the children poll it in their loops. Every child also carries ``TAKEOVER_RUN_DIR`` in its
environment so that tests and users can find stragglers of a given run with psutil.

Why it is not in the runner (takeover._internal.run): the power-loss daemon, a benchmark's processes and the API's
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


# The child's program: the parent's one line, in a try whose EOFError means the parent died while handing over.
_QUIET = "import sys\ntry:\n    {prog}\nexcept EOFError:\n    sys.exit(70)\n"


def quiet_spawn() -> None:
    """A child started by ``multiprocessing``'s spawn method whose parent is SIGKILLed before it has read
    its start (the pickled process object, from a pipe) printed ``EOFError: Ran out of input`` with a
    traceback on the terminal, after takeover was gone (issue 34). The child's command line (one
    ``python -c`` line that the parent builds, :func:`multiprocessing.spawn.get_command_line`) is wrapped so
    that this one error ends it quietly, with code 70 as :func:`die_with_parent` uses; anything else it
    meets is reported as before. Installed once, by the process that starts a run's children."""
    from multiprocessing import spawn

    original = spawn.get_command_line
    if getattr(original, "_takeover_quiet", False):
        return

    def command_line(**kwds: object) -> list[str]:
        cmd = list(original(**kwds))
        if "-c" in cmd[:-1]:
            at = cmd.index("-c") + 1
            if "\n" not in cmd[at]:
                cmd[at] = _QUIET.format(prog=cmd[at])
        return cmd

    command_line._takeover_quiet = True  # type: ignore[attr-defined]
    spawn.get_command_line = command_line
