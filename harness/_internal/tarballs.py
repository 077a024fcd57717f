"""Extracting an archive of a run folder: plain files inside one folder, on every Python takeover supports.

Why not ``extractall(folder, filter="data")`` alone: tarfile's extraction filters came with Python 3.11.4, and
pyproject.toml's ``requires-python`` admits 3.11, whose Debian 12 build (3.11.2: the python3 a new Debian
machine makes .venv with) raises ``TypeError`` on the ``filter`` argument. Where the filters are missing,
:func:`checked` refuses what the "data" filter refuses, every member before anything is written: one that is
not a file, a folder or a link, and a name or a link that leads outside the folder (absolute, or through
``..``, or an absolute link); and it extracts the rest as that filter does: a name's leading slashes dropped,
no set-id bits nor group- or other-write bits, owned by whoever extracts it.
"""

from __future__ import annotations

import copy
import os
import tarfile
from pathlib import Path


def extract_within(tar: tarfile.TarFile, folder: Path) -> None:
    """Extract every member of ``tar`` into ``folder`` as the "data" filter does: ``tarfile.TarError`` names
    a member it refuses."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(folder, filter="data")
    else:  # Python before 3.11.4
        tar.extractall(folder, members=checked(tar.getmembers(), folder))


def checked(members: list[tarfile.TarInfo], folder: Path) -> list[tarfile.TarInfo]:
    """Copies of ``members`` as the "data" filter extracts them into ``folder``, every one checked first:
    ``tarfile.TarError`` naming the first it refuses."""
    root = os.path.realpath(folder)
    out = []
    for member in members:
        name = member.name.lstrip("/")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise tarfile.TarError(f"{member.name!r} is a special file, not a file, a folder or a link")
        if not _inside(name, root):
            raise tarfile.TarError(f"{member.name!r} would be extracted outside {folder}")
        if member.issym() or member.islnk():
            # A symbolic link's target is read from its own folder, a hard link's from the archive's top.
            target = os.path.join(os.path.dirname(name), member.linkname) if member.issym() else member.linkname
            if os.path.isabs(member.linkname) or not _inside(target, root):
                raise tarfile.TarError(f"{member.name!r} would link to {member.linkname!r}, outside {folder}")
        plain = copy.copy(member)
        plain.name, plain.uid, plain.gid, plain.uname, plain.gname = name, os.getuid(), os.getgid(), "", ""
        plain.mode = member.mode & 0o755
        if member.isfile() or member.islnk():
            plain.mode = (plain.mode if plain.mode & 0o100 else plain.mode & ~0o111) | 0o600
        out.append(plain)
    return out


def _inside(name: str, root: str) -> bool:
    path = os.path.realpath(os.path.join(root, name))
    return os.path.commonpath([path, root]) == root
