"""The resource watch: memory and open files of every process of a soak, sizes of its files, over time.

Why a thread that samples (not a hook in the runner): the question is whether anything grows without
bound over hours, which only a time series answers, and sampling from outside sees what the OS sees
(RSS, file descriptors, bytes on disk) whatever the processes believe about themselves. Each sample
is appended to ``resources.csv`` and flushed at once, so a soak killed by CI keeps its series.

The trend test (:func:`growth_warnings`) skips the first run (its checkpoint imports the checker), then
fits a line over the second half of what is left (start-up: SQLite's page cache filling) and warns
when it both explains the data (r² high: a steady climb, not noise) and adds more than a tolerance.
With a single run there is no steady state to judge, and no warning.
"""

from __future__ import annotations

import csv
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from takeover._internal.store import HISTORY_FILE, LEDGER_FILE, QUEUE_FILE, RESOURCES_FILE, WAL_SUFFIX

MB = 1024 * 1024

COLUMNS = (
    "time", "elapsed", "segment",
    "coordinator_rss_mb", "coordinator_fds",
    "workers", "workers_rss_mb", "workers_fds",
    "service_rss_mb", "service_fds",
    "queue_mb", "wal_mb", "ledger_mb", "history_mb", "soak_dir_mb",
)  # fmt: skip


@dataclass(frozen=True)
class Targets:
    """What to sample right now: the current segment's folder and its processes' pids."""

    segment: str
    run_dir: Path | None
    workers: tuple[int, ...]
    service: int | None


def _proc(pid: int | None) -> tuple[float, int]:
    """(RSS in MB, open file descriptors) of one process; zeros when it is gone."""
    if not pid:
        return 0.0, 0
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            return p.memory_info().rss / MB, p.num_fds()
    except (psutil.Error, OSError):
        return 0.0, 0


def _size(path: Path | None) -> float:
    try:
        return path.stat().st_size / MB if path is not None else 0.0
    except OSError:
        return 0.0


def _tree_size(root: Path) -> float:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total / MB


def sample(root: Path, started: float, t: Targets) -> dict[str, float | str]:
    """One row of resources.csv."""
    now = time.time()
    coord_rss, coord_fds = _proc(os.getpid())
    w = [_proc(pid) for pid in t.workers]
    svc_rss, svc_fds = _proc(t.service)
    d = t.run_dir
    return {
        "time": round(now, 3), "elapsed": round(now - started, 2), "segment": t.segment,
        "coordinator_rss_mb": round(coord_rss, 2), "coordinator_fds": coord_fds,
        "workers": sum(1 for rss, _ in w if rss > 0),
        "workers_rss_mb": round(sum(rss for rss, _ in w), 2), "workers_fds": sum(n for _, n in w),
        "service_rss_mb": round(svc_rss, 2), "service_fds": svc_fds,
        "queue_mb": round(_size(d and d / QUEUE_FILE), 3),
        "wal_mb": round(_size(d and d / (QUEUE_FILE + WAL_SUFFIX)), 3),
        "ledger_mb": round(_size(d and d / LEDGER_FILE), 3),
        "history_mb": round(_size(d and d / HISTORY_FILE), 3),
        "soak_dir_mb": round(_tree_size(root), 3),
    }  # fmt: skip


class ResourceWatch:
    """Samples every ``every`` seconds in a daemon thread until :meth:`stop`; rows go to resources.csv."""

    def __init__(self, root: Path, targets: Callable[[], Targets], every: float = 5.0) -> None:
        self.root = Path(root)
        self.targets = targets
        self.every = every
        self.path = self.root / RESOURCES_FILE
        self.started = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="takeover-resource-watch", daemon=True)

    def __enter__(self) -> ResourceWatch:
        self._fh = self.path.open("a", newline="")
        self._writer = csv.DictWriter(self._fh, fieldnames=COLUMNS)
        if self._fh.tell() == 0:
            self._writer.writeheader()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(10)
        self.take()  # the last word: what was left when the soak ended
        self._fh.close()

    def take(self) -> None:
        try:
            row = sample(self.root, self.started, self.targets())
        except Exception:  # noqa: BLE001 - a sample lost is better than a soak stopped
            return
        self._writer.writerow(row)
        self._fh.flush()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.take()
            self._stop.wait(self.every)


def read_resources(root: Path) -> list[dict[str, float | str]]:
    path = Path(root) / RESOURCES_FILE
    if not path.exists():
        return []
    with path.open(newline="") as fh:
        rows = []
        for r in csv.DictReader(fh):
            try:
                rows.append({k: (v if k == "segment" else float(v)) for k, v in r.items()})
            except (TypeError, ValueError):
                continue  # a torn last line of a killed soak
        return rows


# Series that must stay flat over a soak, with the growth tolerated over the second half:
# (relative to the series' median, absolute floor in the series' unit).
STEADY = {
    "coordinator_rss_mb": (0.10, 20.0),
    "coordinator_fds": (0.10, 8),
    "workers_rss_mb": (0.10, 20.0),
    "workers_fds": (0.10, 8),
    "service_rss_mb": (0.10, 15.0),
    "service_fds": (0.25, 8),
    "soak_dir_mb": (0.25, 20.0),
}
# Files that start afresh with each segment: their per-segment peaks must not climb.
PER_SEGMENT = ("queue_mb", "wal_mb", "ledger_mb", "history_mb")
MIN_POINTS = 8
MIN_R2 = 0.6


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and r² (0 when the series is flat)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return 0.0, 0.0
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    return sxy / sxx, sxy * sxy / (sxx * syy)


def trend(xs: list[float], ys: list[float], rel: float, floor: float, min_points: int = MIN_POINTS) -> str | None:
    """A warning text when the second half climbs steadily by more than the tolerance, else None."""
    half = len(xs) // 2
    xs, ys = xs[half:], ys[half:]
    if len(xs) < min_points:
        return None
    slope, r2 = _fit(xs, ys)
    growth = slope * (xs[-1] - xs[0])
    median = sorted(ys)[len(ys) // 2]
    if slope > 0 and r2 >= MIN_R2 and growth > max(rel * abs(median), floor):
        return f"grew by {growth:.1f} over the second half ({ys[0]:.1f} -> {ys[-1]:.1f}, r²={r2:.2f})"
    return None


def growth_warnings(rows: list[dict[str, float | str]]) -> list[str]:
    """Warnings for anything that grows without bound; empty when every series is flat enough."""
    out: list[str] = []
    runs = list(dict.fromkeys(str(r["segment"]) for r in rows if str(r["segment"]).startswith(("seg", "replay"))))
    if len(runs) >= 2:
        # The first run holds the warm-up (the checker's first import of pandas and matplotlib is a step
        # of ~200 MB, once): the steady series start with the second run.
        first = next(i for i, r in enumerate(rows) if r["segment"] == runs[1])
        steady = rows[first:]
        xs = [float(r["elapsed"]) for r in steady]
        for col, (rel, floor) in STEADY.items():
            ys = [float(r[col]) for r in steady]
            if col.startswith("workers"):  # per live worker: respawns and stops make the sum jump
                ys = [float(r[col]) / max(1.0, float(r["workers"])) for r in steady]
            why = trend(xs, ys, rel, floor)
            if why:
                out.append(f"{col} {why}")
    segments = [s for s in runs if s.startswith("seg")]
    for col in PER_SEGMENT:
        peaks = [max(float(r[col]) for r in rows if r["segment"] == s) for s in segments]
        why = trend(list(range(len(peaks))), peaks, 0.25, 1.0, min_points=3)
        if why:
            out.append(f"{col} (peak per segment) {why}")
    return out
