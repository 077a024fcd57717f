"""Scratch folders that go when takeover goes, however it ends: SIGKILL included.

Why a watchman process: a ``with tempfile.TemporaryDirectory()`` removes its folder on every ending the
process itself sees (a return, an exception, Ctrl-C, SIGTERM: takeover.cli turns SIGTERM into Ctrl-C), but
a SIGKILL ends the process before any ``finally`` runs, and ``takeover-check-*`` and ``takeover-explore-*``
folders were left in the temporary folder (issue 34). Nothing in a process can act after its SIGKILL; only
another process can. So the first scratch folder a process makes starts a *janitor*: ``sh`` in a session
of its own (out of reach of a terminal's Ctrl-C), reading folder names from a pipe whose other end only
this process holds (the pipe is close-on-exec, so no child program inherits it). The kernel closes that
end when the process ends, whatever ends it; the janitor then reads end-of-file and removes every folder
it was told of (a folder already removed costs nothing). It is the PostgreSQL watchdog's design
(takeover._internal.db.watchdog), for plain folders, without Python: it starts in a millisecond.

What it cannot do: remove a folder while takeover lives (that is the ``with`` block's job), or act when
the janitor itself is SIGKILLed first (then the folder stays, as before). A process that forks without
exec shares the pipe's end with its child: the janitor then waits for both.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator

# Reads a folder name a line until end-of-file, then removes them all.
_JANITOR = 'while IFS= read -r p; do set -- "$@" "$p"; done; exec rm -rf -- "$@"'

_lock = threading.Lock()
_janitor: tuple[int, int] | None = None  # (the pid it serves, the pipe's write end)


def _tell(folder: str) -> None:
    """Hand ``folder`` to this process's janitor (started on first use); nothing when none can start."""
    global _janitor
    with _lock:
        if _janitor is None or _janitor[0] != os.getpid():
            try:
                proc = subprocess.Popen(["sh", "-c", _JANITOR, "takeover-janitor"], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True, close_fds=True)  # fmt: skip
            except OSError:
                return
            assert proc.stdin is not None
            fd = os.dup(proc.stdin.fileno())  # close-on-exec, as every descriptor Python makes
            proc.stdin.close()
            proc.returncode = 0  # never waited for: it outlives this process by design (init reaps it)
            _janitor = (os.getpid(), fd)
        with contextlib.suppress(OSError):
            os.write(_janitor[1], os.fsencode(folder) + b"\n")


def mkdtemp(prefix: str) -> str:
    """``tempfile.mkdtemp(prefix=prefix)``, removed by the janitor if this process dies before removing it."""
    folder = tempfile.mkdtemp(prefix=prefix)
    if "\n" not in folder:
        _tell(folder)
    return folder


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A temporary folder for the ``with`` block, removed at its end, and by the janitor after a SIGKILL."""
    folder = mkdtemp(prefix)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


OWNER = ".owner.lock"  # in a temp_root folder: flocked by the process that made it, for the folder's life


@contextlib.contextmanager
def temp_root(prefix: str) -> Iterator[str]:
    """A scratch folder (:func:`scratch_dir`) that is also the temporary folder of everything in the block:
    ``tempfile``'s default folder in this process and ``TMPDIR`` in the environment children inherit.

    Why: a command whose pieces each make their own temporary folders (``takeover bench``: a ``FreshQueues``
    folder, a service's ledger, a run's folder, a child's check files, in modules it does not own) cannot hand
    each of them to the janitor; made under one parent, the janitor's one line removes them all after a
    SIGKILL, and the ``with`` removes them on every other ending.

    And where the janitor died too (a whole cgroup killed: a cancelled CI job, ``systemd`` stopping a scope),
    the next block of the same ``prefix`` removes the folder (:func:`sweep_stale`): the folder holds a lock
    file (:data:`OWNER`) its process holds with ``flock`` for as long as it lives, so a folder whose lock can
    be taken is stale. A lock rather than a pid in the name: the kernel drops it with its last holder, however
    that ends, and it cannot be fooled by a reused pid; and two commands side by side never take each other's."""
    sweep_stale(prefix)
    with scratch_dir(prefix) as folder:
        owner = _own(folder)
        old_dir, old_env = tempfile.tempdir, os.environ.get("TMPDIR")
        tempfile.tempdir = folder
        os.environ["TMPDIR"] = folder
        try:
            yield folder
        finally:
            tempfile.tempdir = old_dir
            if old_env is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = old_env
            shutil.rmtree(folder, ignore_errors=True)  # before the lock goes: never seen unowned while it lives
            os.close(owner)


def _own(folder: str) -> int:
    """Take the folder's :data:`OWNER` lock; the file is locked before it is in place (renamed there), so no
    other process ever finds it there unlocked while this one lives. Close-on-exec: no child program holds it."""
    fresh = os.path.join(folder, OWNER + ".new")
    fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(fresh, os.path.join(folder, OWNER))
    return fd


def sweep_stale(prefix: str) -> list[str]:
    """Remove the folders ``prefix*`` in the temporary folder whose :data:`OWNER` lock can be taken: their
    process is dead and its janitor did not remove them. A folder without that file (another takeover's, or
    one being made) is left alone. Returns the folders removed."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            fd = os.open(os.path.join(entry.path, OWNER), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its owner lives
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
        finally:
            os.close(fd)
    return removed
