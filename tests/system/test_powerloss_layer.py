"""The power-loss layer on a real FUSE mount: a cut drops exactly the writes a file has not synced.

A system test because the layer is a process of its own (the FUSE daemon) and the files are written
through the kernel's FUSE mount, as SQLite writes them in a run. The runs that use the layer, and the
checker's verdicts on them, are in tests/system/test_powerloss_run.py.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from takeover._internal.powerloss.layer import PowerLossLayer

pytestmark = pytest.mark.needs_package("fuse3")


@pytest.fixture
def layer(tmp_path: Path):
    pl = PowerLossLayer(tmp_path / "disk", tmp_path / "mnt", tmp_path / "powerloss.log")
    pl.start()
    try:
        yield pl
    finally:
        pl.close()


def _write(path: Path, data: bytes, *, sync: bool, offset: int | None = None) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        if offset is None:
            os.write(fd, data)
        else:
            os.pwrite(fd, data, offset)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _power_loss(layer: PowerLossLayer) -> dict[str, int]:
    layer.cut()
    return layer.reboot()


def test_a_cut_drops_unsynced_writes_and_keeps_synced_ones(layer: PowerLossLayer, tmp_path: Path) -> None:
    mnt = layer.mountpoint
    _write(mnt / "a", b"x" * 10_000, sync=True)
    _write(mnt / "a", b"yyyy", sync=False, offset=5000)  # an overwrite inside synced data
    _write(mnt / "a", b"z" * 3000, sync=False, offset=10_000)  # an append past the synced length
    _write(mnt / "b", b"kept", sync=True)
    os.truncate(mnt / "b", 1)  # a truncation is not durable until synced
    _write(mnt / "new", b"never synced", sync=False)
    _write(mnt / "gone", b"synced, then deleted", sync=True)
    os.unlink(mnt / "gone")  # a delete is durable at once
    _write(mnt / "moved", b"synced", sync=True)
    os.rename(mnt / "moved", mnt / "renamed")  # and so is a rename
    _write(mnt / "c", b"synced", sync=True)
    (mnt / "c").write_bytes(b"rewritten")  # O_WRONLY | O_TRUNC: the truncation and the write are unsynced
    (mnt / "q-shm").write_bytes(b"shared memory")  # memory, not storage: lost at the cut
    assert (mnt / "a").read_bytes()[5000:5004] == b"yyyy"  # the writes were really there before

    stats = _power_loss(layer)

    assert (mnt / "a").read_bytes() == b"x" * 10_000
    assert (mnt / "b").read_bytes() == b"kept"
    assert (mnt / "new").read_bytes() == b""  # the entry survives, its unsynced content does not
    assert not (mnt / "gone").exists()
    assert (mnt / "renamed").read_bytes() == b"synced"
    assert (mnt / "c").read_bytes() == b"synced"
    assert (mnt / "q-shm").read_bytes() == b""
    assert (tmp_path / "disk" / "a").read_bytes() == b"x" * 10_000  # the backing folder holds the result
    assert stats["files"] == 4 and stats["volatile_files"] == 1
    assert stats["dropped_bytes"] >= 3000 + len(b"never synced")

    _write(mnt / "a", b"after", sync=False)  # the mount works again, and tracks anew
    assert _power_loss(layer)["files"] == 1 and (mnt / "a").read_bytes() == b"x" * 10_000


@pytest.mark.parametrize(("synchronous", "survives"), [("NORMAL", False), ("FULL", True)])
def test_sqlite_wal_commits_survive_a_cut_only_when_synced(
    layer: PowerLossLayer, synchronous: str, survives: bool
) -> None:
    db_path = layer.mountpoint / "q.sqlite"
    setup = sqlite3.connect(db_path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the table itself is synced into the database file
    setup.close()
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    for i in range(50):
        db.execute("INSERT INTO t VALUES (?)", (i,))  # autocommit: 50 commits, each acknowledged
    layer.cut()
    db.close()  # the coordinator's connection at a cut: nothing it does now reaches the disk
    layer.reboot()
    after = sqlite3.connect(db_path)
    try:
        assert after.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert after.execute("SELECT count(*) FROM t").fetchone() == ((50,) if survives else (0,))
    finally:
        after.close()


# A process that mapped a file on the mount (SQLite maps its -shm file) and touches a page the kernel must
# fetch again after the cut: the fault is a read, and a refused one is SIGBUS. That killed a run's
# coordinator (exit -7) while its connection was closing after a cut, in a CI run.
_TOUCH_MAPPED_PAGE_AFTER_CUT = """
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
mapped = mmap.mmap(fd, 65536)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the page must come from the mount again
print("mapped", flush=True)
sys.stdin.readline()  # the cut happens here
print(mapped[40000:40004].decode(), flush=True)
"""


def test_a_mapped_page_read_after_the_cut_is_no_sigbus(layer: PowerLossLayer) -> None:
    shm = layer.mountpoint / "q.sqlite-shm"
    shm.write_bytes(b"s" * 65536)
    child = subprocess.Popen([sys.executable, "-c", _TOUCH_MAPPED_PAGE_AFTER_CUT, str(shm)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "mapped\n"
        layer.cut()
        out, _ = child.communicate("go\n", timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != -signal.SIGBUS
    assert (child.returncode, out) == (0, "ssss\n")
    with pytest.raises(OSError):  # a write after the cut still reaches nothing
        _write(shm, b"late", sync=False)
    layer.reboot()


def test_close_unmounts_and_reaps_the_daemon(tmp_path: Path) -> None:
    pl = PowerLossLayer(tmp_path / "disk", tmp_path / "mnt", tmp_path / "powerloss.log")
    pl.start()
    pid = pl.proc.pid
    assert os.path.ismount(tmp_path / "mnt")
    pl.close()
    assert not os.path.ismount(tmp_path / "mnt") and not (tmp_path / "mnt").exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
