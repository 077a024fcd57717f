"""Network namespaces that vanish with takeover, and the one call that enters one.

Why held by a process and never named: ``ip netns add`` pins a namespace with a bind mount under
/var/run/netns that outlives a SIGKILLed takeover. Here each namespace is made by a small holder
process (``cat`` reading a pipe only takeover holds) that unshares its network namespace before it
starts; the namespace is ``/proc/PID/ns/net`` and lives as long as a process is inside it. When
takeover ends, however it ends, the kernel closes the pipe, the holder exits, and once the workers
(who die with takeover) and the database server (whose watchdog stops it) are gone the namespace goes
with everything in it: its veth ends, the bridge, its addresses and its firewall rules. Nothing is
ever made in the machine's own namespace, so nothing can be left there.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import subprocess
from pathlib import Path

CLONE_NEWNET = 0x40000000
_libc: ctypes.CDLL | None = None


def _c() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def _unshare() -> None:
    """In the holder, before exec: a network namespace of its own (os.unshare is Python 3.12's)."""
    if _c().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")


def enter(path: str) -> None:
    """Move the calling thread into the network namespace at ``path`` (sockets it opens from now on are
    there). Called in a worker or server process before it does anything else."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _c().setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({path}): {os.strerror(errno)}")
    finally:
        os.close(fd)


def identity(path: str) -> str:
    """The namespace a ``/proc/.../ns/net`` path names (``net:[4026532...]``)."""
    return os.readlink(path)


class Namespace:
    """One network namespace, held by a holder process; :meth:`run` runs a command inside it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.holder = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, preexec_fn=_unshare, start_new_session=True,
                                       close_fds=True)  # fmt: skip
        self.path = f"/proc/{self.holder.pid}/ns/net"
        # Popen returns once the holder exec'd, so it has unshared: this is never the machine's namespace.
        if identity(self.path) == identity("/proc/self/ns/net"):
            self.close()
            raise OSError("the holder process did not get a network namespace of its own")
        self._nsenter = shutil.which("nsenter") or "nsenter"

    def run(self, argv: list[str], stdin: str | None = None, check: bool = True) -> str:
        """``argv`` inside the namespace; its output. A failure raises OSError naming the command."""
        proc = subprocess.run([self._nsenter, f"--net={self.path}", "--", *argv], input=stdin, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)  # fmt: skip
        if check and proc.returncode != 0:
            tail = " ".join(proc.stdout.split())[-200:]
            raise OSError(f"in {self.name}: {' '.join(argv[:3])} failed (exit {proc.returncode}): {tail}")
        return proc.stdout

    def alive(self) -> bool:
        return self.holder.poll() is None and Path(self.path).exists()

    def close(self) -> None:
        """Let the holder go (its pipe closes): the namespace ends once nothing else is inside."""
        with contextlib.suppress(OSError):
            assert self.holder.stdin is not None
            self.holder.stdin.close()
        try:
            self.holder.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()
