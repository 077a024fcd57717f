"""The CPU the machine spent outside the bench while a figure was measured: is this figure a quiet one?

Why not the load average: the bench's own processes lift it. A ``workers4`` round runs four workers, a
service and the coordinator on 2 cores, which takes the 1-minute load from 0.4 to 2.3-2.9 with nothing
else running, so "published only at a load below 2" could never be met, and a load of 3 could not tell
the bench's own work from another engineer's test run. What decides whether a figure means what it says
is whether something *else* competed for the cores meanwhile. That is measured here: the machine's busy
CPU time (/proc/stat, through psutil) minus the CPU time of the bench's own process tree (itself, its live
descendants, and every descendant it has reaped), over the measurement's wall time, in cores. A figure
measured while others used less than :data:`QUIET_SHARE` of the machine is quiet; any other one says
how much of the machine it shared, and the benchmarks page does not judge it.

The kernel's work on the bench's behalf that no process of it is charged for (interrupts, the
filesystem's journal thread) counts as "others" here: it is small next to the threshold, and counting it
errs on the side of calling a figure loaded.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

# A figure is quiet when the processes outside the bench used less than this share of the machine's CPUs
# meanwhile (0.1 of 2 cores: 0.2 cores, a fifth of one core).
QUIET_SHARE = 0.1


def machine_busy() -> float:
    """Seconds of CPU the whole machine has been busy since boot (every CPU, steal included: a host that
    lends our virtual CPUs to someone else is the machine being busy with something else)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


def tree_cpu() -> float:
    """Seconds of CPU this process and all its descendants have used: the live ones as they stand, the
    reaped ones through their parents' children's times (a reaped process is in exactly one of them)."""
    me = psutil.Process()
    total = 0.0
    for proc in (me, *me.children(recursive=True)):
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # ended between the listing and the reading: its time reaches its parent's children
        total += t.user + t.system + t.children_user + t.children_system
    return total


@dataclass
class OthersCpu:
    """Started when a measurement starts; :meth:`figures` at its end."""

    started: float = field(default_factory=time.monotonic)
    busy: float = field(default_factory=machine_busy)
    ours: float = field(default_factory=tree_cpu)

    def cores(self) -> tuple[float, float, float]:
        """The mean cores the other processes and the bench's own process tree used since the start, and the
        wall time since (0.0 cores each when no time has passed)."""
        wall = time.monotonic() - self.started
        if wall <= 0:
            return 0.0, 0.0, 0.0
        ours = max(0.0, tree_cpu() - self.ours) / wall
        return max(0.0, (machine_busy() - self.busy) / wall - ours), ours, wall

    def figures(self) -> dict[str, Any]:
        """``cpu``: the mean cores the other processes (``others_cores``) and the bench's own process tree
        (``bench_cores``) used during the measurement, the machine's ``cpus`` and whether it was ``quiet``."""
        others, ours, wall = self.cores()
        cpus = os.cpu_count() or 1
        if wall <= 0:
            return {}
        return {"cpu": {"others_cores": round(others, 2), "bench_cores": round(ours, 2), "cpus": cpus,
                        "seconds": round(wall, 1), "quiet": others < QUIET_SHARE * cpus}}  # fmt: skip


def is_quiet(fig: dict[str, Any]) -> bool | None:
    """Whether a measurement's figures say it was quiet; None when they predate the measure (no ``cpu``)."""
    cpu = fig.get("cpu")
    return bool(cpu["quiet"]) if isinstance(cpu, dict) and "quiet" in cpu else None


def cpu_text(fig: dict[str, Any]) -> str:
    """``others used 0.05 of 2 cores`` (and the bench's own), as the table and the page show it."""
    cpu = fig.get("cpu")
    if not isinstance(cpu, dict):
        return ""
    text = f"others {cpu['others_cores']:g} of {cpu['cpus']} cores (bench {cpu['bench_cores']:g})"
    left = cpu.get("excluded_rounds")
    if left:  # takeover.benchmarks.rounds: the rounds during which others used the machine are not in the figure
        text += f"; {left} disturbed round{'s' if left > 1 else ''} left out"
    if cpu.get("too_few_quiet"):
        text += "; too few quiet rounds"
    return text
