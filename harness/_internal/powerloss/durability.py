"""What a disk would keep at a power cut: for every file, its content as of its last sync.

The layer writes every write through to the backing file at once (reads, locks and shared memory
then behave as on any filesystem), and keeps apart only what a power cut would take back: before a
page of a file is first changed after its last ``fsync``/``fdatasync``, its synced bytes are saved
(an undo record), and so is the file's synced length. At a cut each file gets its saved pages back
and is cut to its synced length: exactly its content at its last sync. Memory stays bounded by the
file's size (a page is saved once between two syncs, however often it is written).

Which operations are durable at once, and why:
- creating, deleting and renaming a file (the directory's entries): a deleted rollback journal that
  came back would roll the database back, which no real filesystem with a journal does; a created
  file survives, empty until its first sync.
- nothing else: a file's data and its length are durable only once it is synced.

SQLite's ``-shm`` file (the WAL index, memory-mapped by every connection) is shared memory, not
storage: on a real power cut it is gone with the RAM, and the first connection afterwards rebuilds it
from the WAL. So a ``-shm`` file is not tracked at all, and at a cut it is truncated to nothing,
which makes SQLite rebuild it as it would after a reboot.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

PAGE = 4096
VOLATILE_SUFFIXES = ("-shm",)  # shared memory: lost at a cut, never synced (see the module docstring)


def volatile(path: str) -> bool:
    return path.endswith(VOLATILE_SUFFIXES)


@dataclass
class FileState:
    synced_size: int
    pages: dict[int, bytes] = field(default_factory=dict)  # page number -> its bytes at the last sync

    @property
    def dirty(self) -> bool:
        return bool(self.pages)


@dataclass
class CutStats:
    """What a cut took back: files rolled back, and the unsynced bytes dropped (pages put back plus
    bytes past the synced length)."""

    files: int = 0
    dropped_bytes: int = 0
    volatile_files: int = 0


class Durability:
    """The synced state of every file under ``root`` that was written since it was last synced.

    Paths are relative to ``root`` (as the filesystem sees them: ``/queue.sqlite``). A file never
    written since the layer started (or since the last cut) has no entry: all of it is durable.
    Every method takes the lock, so a write and its undo record are one step for a cut.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, FileState] = {}
        self.lock = threading.RLock()

    def real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _state(self, path: str, fd: int) -> FileState:
        st = self.files.get(path)
        if st is None:
            st = self.files[path] = FileState(os.fstat(fd).st_size)
        return st

    def _save(self, st: FileState, fd: int, start: int, end: int) -> None:
        """Save the synced bytes of the pages in [start, end) not saved since the last sync."""
        end = min(end, st.synced_size)
        if start >= end:
            return
        for page in range(start // PAGE, (end - 1) // PAGE + 1):
            if page not in st.pages:
                off = page * PAGE
                st.pages[page] = os.pread(fd, min(PAGE, st.synced_size - off), off)

    # -- the operations that change a file -----------------------------------------------------------
    def created(self, path: str) -> None:
        """A new file: its entry is durable, its content (none yet) too."""
        if not volatile(path):
            self.files[path] = FileState(0)

    def before_write(self, path: str, fd: int, offset: int, size: int) -> None:
        if not volatile(path) and size > 0:
            self._save(self._state(path, fd), fd, offset, offset + size)

    def before_truncate(self, path: str, fd: int, length: int) -> None:
        if not volatile(path):
            st = self._state(path, fd)
            self._save(st, fd, length, os.fstat(fd).st_size)

    def synced(self, path: str, fd: int) -> None:
        """fsync/fdatasync returned: the file's content and length as they are now are durable."""
        if not volatile(path):
            self.files[path] = FileState(os.fstat(fd).st_size)

    def removed(self, path: str) -> None:
        self.files.pop(path, None)

    def renamed(self, old: str, new: str) -> None:
        self.files.pop(new, None)
        st = self.files.pop(old, None)
        if st is not None:
            self.files[new] = st

    # -- the cut ------------------------------------------------------------------------------------
    def restore(self) -> CutStats:
        """Put every file back to its synced content, empty the volatile ones; all is synced after."""
        stats = CutStats()
        with self.lock:
            for path, st in self.files.items():
                real = self.real(path)
                try:
                    fd = os.open(real, os.O_RDWR)
                except FileNotFoundError:
                    continue
                try:
                    size = os.fstat(fd).st_size
                    changed = st.dirty or size != st.synced_size
                    stats.dropped_bytes += max(0, size - st.synced_size) + sum(map(len, st.pages.values()))
                    os.ftruncate(fd, st.synced_size)
                    for page, data in st.pages.items():
                        os.pwrite(fd, data, page * PAGE)
                    os.fsync(fd)
                    stats.files += changed
                finally:
                    os.close(fd)
            self.files.clear()
            for dirpath, _dirs, names in os.walk(self.root):
                for name in names:
                    if volatile(name):
                        os.truncate(os.path.join(dirpath, name), 0)
                        stats.volatile_files += 1
        return stats
