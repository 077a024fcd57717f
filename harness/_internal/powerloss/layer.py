"""The coordinator's handle on the power-loss layer: start it, cut the power, reboot, stop it.

Why a handle that always cleans up: a FUSE mount outlives the process that made it unless someone
unmounts it, and a dead one leaves its mountpoint unusable. :meth:`PowerLossLayer.close` unmounts and
reaps the daemon whatever happened (it is called from the run's ``finally``, and again at exit); if
the coordinator itself is SIGKILLed, the daemon gets SIGTERM from the kernel and unmounts on its own
(:mod:`takeover._internal.powerloss.daemon`).

:func:`check_available` says in one line why the machine cannot run the layer (no libfuse3, no
/dev/fuse, no permission), so a command asked for power losses can exit 2 before it starts anything.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from takeover._internal.powerloss.daemon import DaemonSpec, daemon_main, unmount
from takeover.errors import UsageError

REPLY_TIMEOUT = 30.0  # seconds the daemon may take to mount, cut or reboot (a loaded 2-core machine)
FUSE_DEVICE = "/dev/fuse"


def check_available() -> None:
    """Raise :class:`UsageError` (one line) when this machine cannot mount the layer."""
    why = unavailable()
    if why:
        raise UsageError(f"power loss needs FUSE: {why}")


def unavailable() -> str:
    """Why the layer cannot run here, in a few words; empty when it can."""
    if not os.path.exists(FUSE_DEVICE):
        return f"{FUSE_DEVICE} does not exist (load the fuse module, or give the container the device)"
    if not os.access(FUSE_DEVICE, os.R_OK | os.W_OK):
        return f"no permission to open {FUSE_DEVICE}"
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (apt-get install fuse3)"
    try:
        import mfusepy  # noqa: F401 - loads libfuse3 through ctypes
    except ImportError:
        return "the Python package mfusepy is not installed (pip install mfusepy)"
    except OSError as exc:
        return f"libfuse3 cannot be loaded ({exc}; apt-get install fuse3)"
    return ""


class PowerLossLayer:
    """``backing`` (a plain folder) shown at ``mountpoint``; every write since a file's last sync can be lost.

    ``start()`` returns once the mount is up; ``cut()`` and ``reboot()`` are the two halves of a power
    loss (the caller kills the processes with files open on the mount in between); ``close()`` unmounts.
    """

    def __init__(self, backing: Path, mountpoint: Path, log: Path) -> None:
        self.backing = Path(backing)
        self.mountpoint = Path(mountpoint)
        self.log = Path(log)
        self.proc: Any = None
        self.conn: Any = None

    def start(self) -> None:
        check_available()
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        spec = DaemonSpec(str(self.backing.absolute()), str(self.mountpoint.absolute()), os.getpid(),
                          str(self.log.absolute()))
        self.proc = ctx.Process(target=daemon_main, args=(spec, child), name="takeover-powerloss", daemon=True)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
        try:
            self.proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        child.close()
        atexit.register(self.close)
        try:
            self._expect("mounted")
        except BaseException:
            self.close()
            raise

    def sync(self) -> None:
        """Everything written so far is on disk (as after ``sync``): only later writes can be lost."""
        self.conn.send("sync")
        self._expect("synced")

    def cut(self) -> None:
        """The power goes: from now on nothing reaches the disk (requests fail with EIO)."""
        self.conn.send("cut")
        self._expect("cut")

    def reboot(self) -> dict[str, int]:
        """Unmount, put every file back to its last synced content, mount again. Call once every process
        that had a file open on the mount is dead. Returns what was dropped (``CutStats`` as a dict)."""
        self.conn.send("reboot")
        stats = self._expect("mounted")
        return dict(stats or {})

    def close(self) -> None:
        """Unmount and reap the daemon; safe to call twice, and after a failed start."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        atexit.unregister(self.close)
        try:
            self.conn.send("stop")
        except (OSError, ValueError):
            pass
        proc.join(5.0)
        if proc.exitcode is None:
            proc.terminate()  # SIGTERM: the daemon unmounts before it exits
            proc.join(5.0)
        if proc.exitcode is None:
            proc.kill()
            proc.join(5.0)
        unmount(str(self.mountpoint))  # in case the daemon could not
        self.conn.close()
        try:
            self.mountpoint.rmdir()
        except OSError:
            pass

    def _expect(self, what: str) -> Any:
        deadline = time.monotonic() + REPLY_TIMEOUT
        while not self.conn.poll(0.05):
            if self.proc is None or self.proc.exitcode is not None:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the power-loss layer did not answer {what!r} within {REPLY_TIMEOUT:g} s")
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            raise UsageError("power loss: the FUSE layer's process exited (is FUSE usable here?)") from None
        if kind == "error":
            raise UsageError(f"power loss: {payload}")
        if kind != what:
            raise RuntimeError(f"the power-loss layer answered {kind!r} to {what!r}")
        return payload
