"""The layer's own process: a FUSE passthrough of one folder that can lose its power.

Why a process of its own: libfuse serves the mount from a loop that must not share a process with
the workers it serves (a frozen or killed client would freeze or kill the disk), nor with the
coordinator (a blocked request would block the run loop). The coordinator talks to it over a pipe:

- ``sync``: everything written so far counts as synced (what ``sync(1)`` and the kernel's periodic
  write-back do), so the set-up of a run is on disk before its faults start.
- ``cut``: the power goes. From the reply on, every request but reading and closing a file fails
  with EIO, so nothing a frozen or dying process still sends can reach the disk. The coordinator then
  kills every process that has a file open on the mount. Reads are still served because a read of a
  mapped file is a page fault: SQLite maps its ``-shm`` file, and a failed fault is SIGBUS, which
  killed the coordinator while its own connection was closing after a cut. A read reaches no disk.
- ``reboot``: the mount is taken down (lazily: it is gone for new lookups at once, and the loop
  ends when the last file on it is closed), every file gets its synced content back
  (:meth:`Durability.restore`), and the folder is mounted again. The reply carries what was dropped.
- ``stop`` (or the pipe closing, or the coordinator dying): unmount and exit.

The daemon dies with the coordinator like every child (:mod:`takeover._internal.lifeline`), but by SIGTERM,
not SIGKILL: a FUSE process killed outright leaves a dead mount behind ("Transport endpoint is not
connected") that only an unmount clears, so on SIGTERM it unmounts first and then exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

from takeover._internal.lifeline import die_with_parent, parent_alive
from takeover._internal.powerloss.durability import CutStats, Durability

_MNT_DETACH = 2
STAT_KEYS = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime", "st_ctime")


@dataclass(frozen=True)
class DaemonSpec:
    backing: str  # the folder whose files the mount shows
    mountpoint: str
    parent_pid: int
    log: str  # libfuse's own messages (it writes them to stderr) go here; errors also travel on the pipe


def unmount(mountpoint: str) -> None:
    """Detach the mount at once (MNT_DETACH as root, ``fusermount3 -u -z`` otherwise); quiet if not mounted."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.umount2(mountpoint.encode(), _MNT_DETACH)
        return
    subprocess.run(["fusermount3", "-u", "-z", "-q", mountpoint], check=False, capture_output=True)


def make_operations(durability: Durability) -> Any:
    """The FUSE operations (mfusepy is imported here, in the daemon only: importing it loads libfuse3)."""
    import mfusepy

    class Passthrough(mfusepy.Operations):
        """Every request goes to the backing folder; ``Durability`` sees every change first."""

        use_ns = True

        def __init__(self) -> None:
            self.d = durability
            self.powered = True
            self.mounted = threading.Event()

        def _real(self, path: str) -> str:
            if not self.powered:
                raise mfusepy.FuseOSError(errno.EIO)
            return self.d.real(path)

        def init(self, path: str) -> None:
            self.mounted.set()

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
            out = {k: getattr(st, k) for k in STAT_KEYS}
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            return out

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._real(path))]

        def access(self, path: str, amode: int) -> int:
            if not os.access(self._real(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(self._real(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                    "f_frsize", "f_namemax")  # fmt: skip
            return {k: getattr(sv, k) for k in keys}

        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._real(path), mode)
            return 0

        def rmdir(self, path: str) -> int:
            os.rmdir(self._real(path))
            return 0

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._real(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.chown(self._real(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            if times is None:
                os.utime(self._real(path))
            else:
                os.utime(self._real(path), ns=times)
            return 0

        def open(self, path: str, flags: int) -> int:
            # Writable means readable too: a write's undo record reads the bytes it replaces. O_TRUNC is a
            # truncation like any other (its undo record first), so the file is opened without it.
            if flags & os.O_ACCMODE == os.O_WRONLY:
                flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
            fd = os.open(self._real(path), flags & ~(os.O_CREAT | os.O_TRUNC))
            if flags & os.O_TRUNC:
                self.truncate(path, 0, fd)
            return fd

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with self.d.lock:
                real = self._real(path)
                existed = os.path.exists(real)
                fd = os.open(real, os.O_RDWR | os.O_CREAT, mode)
                if not existed:
                    self.d.created(path)
            return fd

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            # Not refused after a cut (the module docstring): an open file's reads change nothing on disk,
            # and a refused page fault of a mapped file is SIGBUS in the process that touched it.
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self.d.lock:
                self._real(path)
                self.d.before_write(path, fh, offset, len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            with self.d.lock:
                real = self._real(path)
                fd = fh if fh is not None else os.open(real, os.O_RDWR)
                try:
                    self.d.before_truncate(path, fd, length)
                    os.ftruncate(fd, length)
                finally:
                    if fh is None:
                        os.close(fd)
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            with self.d.lock:
                self._real(path)
                (os.fdatasync if datasync else os.fsync)(fh)
                self.d.synced(path, fh)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> int:
            os.close(fh)  # also after a cut: a dying process's files must close
            return 0

        def unlink(self, path: str) -> int:
            with self.d.lock:
                os.unlink(self._real(path))
                self.d.removed(path)
            return 0

        def rename(self, old: str, new: str) -> int:
            with self.d.lock:
                os.rename(self._real(old), self._real(new))
                self.d.renamed(old, new)
            return 0

    return Passthrough()


def daemon_main(spec: DaemonSpec, conn: Connection) -> None:
    """The layer process: mount, answer the coordinator, lose the power when told, mount again."""
    _die_with_parent(spec.parent_pid)
    log = os.open(spec.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    logging.getLogger("mfusepy").setLevel(logging.CRITICAL)  # a refused request is the point, not news
    import mfusepy

    durability = Durability(spec.backing)
    ops = make_operations(durability)
    state: dict[str, Any] = {"rebooting": False, "cut_stats": CutStats()}
    remounted = threading.Event()
    # While the loop runs, libfuse's own SIGTERM handler ends it and unmounts; the loop then returns
    # without a reboot asked for, and the daemon exits. Outside the loop SIGTERM ends the process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping is the coordinator's to decide

    def control() -> None:
        if not ops.mounted.wait(10.0):
            conn.send(("error", "the FUSE mount did not come up within 10 s"))
            return
        conn.send(("mounted", None))
        while True:
            try:
                cmd = conn.recv()
            except (EOFError, OSError):
                cmd = "stop"
            if cmd == "sync":
                with durability.lock:
                    durability.files.clear()  # what every file holds now is its synced content
                conn.send(("synced", None))
            elif cmd == "cut":
                with durability.lock:
                    ops.powered = False
                conn.send(("cut", None))
            elif cmd == "reboot":
                remounted.clear()
                state["rebooting"] = True
                unmount(spec.mountpoint)
                ok = remounted.wait(30.0)
                conn.send(("mounted", asdict(state["cut_stats"])) if ok else ("error", "the remount failed"))
            else:
                unmount(spec.mountpoint)
                return

    threading.Thread(target=control, name="powerloss-control", daemon=True).start()
    while True:
        try:
            mfusepy.FUSE(ops, spec.mountpoint, foreground=True, fsname="takeover-powerloss", max_threads=8)
        except RuntimeError as exc:  # the mount itself failed (no permission, no /dev/fuse)
            if not ops.mounted.is_set():
                conn.send(("error", f"mounting FUSE failed ({exc})"))
                sys.exit(1)
        if not state["rebooting"]:
            return
        state["rebooting"] = False
        state["cut_stats"] = durability.restore()
        ops.powered = True
        ops.mounted.clear()
        threading.Thread(target=_signal_when, args=(ops.mounted, remounted), daemon=True).start()


def _signal_when(first: threading.Event, then: threading.Event) -> None:
    if first.wait(30.0):
        then.set()


def _die_with_parent(parent_pid: int) -> None:
    """SIGTERM (not SIGKILL, see the module docstring) when the coordinator dies; a watch thread covers
    the systems without PR_SET_PDEATHSIG."""
    die_with_parent(parent_pid, signal.SIGTERM)

    def watch() -> None:
        while parent_alive(parent_pid):
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="powerloss-lifeline", daemon=True).start()
