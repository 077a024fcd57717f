"""takeover._internal.tarballs: an archive of a run folder extracts as plain files inside its folder, and one that
would write elsewhere is refused whole, through tarfile's "data" filter where this Python has it and through
the check by hand (``checked``) that stands in for it on Pythons before 3.11.4 (Debian 12's 3.11.2); both
are driven here on every Python, on real archives."""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from takeover._internal.tarballs import checked, extract_within


def _by_hand(tar: tarfile.TarFile, folder: Path) -> None:
    tar.extractall(folder, members=checked(tar.getmembers(), folder))


WAYS: dict[str, Callable[[tarfile.TarFile, Path], None]] = {"extract_within": extract_within, "by hand": _by_hand}


def _archive(path: Path, *members: tuple[str, str, bytes | str, int]) -> Path:
    """A tar at ``path`` of (name, kind, data or link target, mode) members, kind "file", "dir", "sym", "lnk" or
    "fifo"."""
    kinds = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "lnk": tarfile.LNKTYPE,
             "fifo": tarfile.FIFOTYPE}  # fmt: skip
    with tarfile.open(path, "w") as tar:
        for name, kind, data, mode in members:
            info = tarfile.TarInfo(name)
            info.type, info.mode = kinds[kind], mode
            if kind in ("sym", "lnk"):
                info.linkname = str(data)
            payload = data if isinstance(data, bytes) else b""
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload) if payload else None)
    return path


@pytest.mark.parametrize("way", WAYS)
def test_a_run_folder_extracts_whole_with_its_links_and_without_setuid_or_others_write(tmp_path, way) -> None:
    archive = _archive(
        tmp_path / "run.tar",
        ("history.jsonl", "file", b"one\n", 0o4777),
        ("workers", "dir", "", 0o777),
        ("workers/w1.log", "file", b"two\n", 0o644),
        ("latest", "sym", "workers/w1.log", 0o777),
        ("copy.log", "lnk", "workers/w1.log", 0o644),
        ("/top.txt", "file", b"three\n", 0o600),
    )
    out = tmp_path / "out"
    with tarfile.open(archive) as tar:
        WAYS[way](tar, out)
    assert (out / "history.jsonl").read_bytes() == b"one\n"
    assert (out / "latest").read_bytes() == (out / "copy.log").read_bytes() == b"two\n"
    assert (out / "latest").is_symlink()
    assert (out / "top.txt").read_bytes() == b"three\n"  # an absolute name lands inside, as tar itself does
    assert stat.S_IMODE((out / "history.jsonl").stat().st_mode) == 0o755  # no setuid, no group or other write


BAD = {
    "up and out": (("ok.txt", "file", b"x", 0o644), ("../escaped.txt", "file", b"x", 0o644)),
    "symbolic link out": (("ok.txt", "file", b"x", 0o644), ("passwd", "sym", "../../etc/passwd", 0o777)),
    "hard link out": (("ok.txt", "file", b"x", 0o644), ("passwd", "lnk", "/etc/passwd", 0o644)),
    "device or fifo": (("ok.txt", "file", b"x", 0o644), ("pipe", "fifo", "", 0o644)),
}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("bad", BAD)
def test_a_member_that_would_leave_the_folder_or_is_no_plain_file_is_refused(tmp_path, way, bad) -> None:
    archive = _archive(tmp_path / "bad.tar", *BAD[bad])
    out = tmp_path / "deep" / "out"
    with tarfile.open(archive) as tar, pytest.raises(tarfile.TarError, match=r"^'(\.\./escaped\.txt|passwd|pipe)'"):
        WAYS[way](tar, out)
    assert not (tmp_path / "deep" / "escaped.txt").exists()
    if way == "by hand":  # every member is checked before anything is written
        assert not out.exists() or not any(out.iterdir())
