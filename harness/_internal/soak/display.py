"""Live progress of a soak: one rich panel on a terminal, a plain line every few seconds otherwise.

Why its own display (not the stress run's): a soak is judged on what accumulated — tasks finished,
faults, duplicates and violations *so far*, over every checkpoint — and on the clock (elapsed and
remaining), which a single run's panel does not know about.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from takeover._internal.run.progress import LiveDisplay

PLAIN_EVERY = 10.0


@dataclass
class Totals:
    """What the checkpoints so far found, plus the segment that is running (``live``)."""

    finished: int = 0
    kills: int = 0
    pauses: int = 0
    lost_replies: int = 0
    slow: int = 0
    duplicate_tasks: int = 0
    violations: int = 0
    checkpoints: int = 0
    invalid: int = 0
    live: dict[str, int] = field(default_factory=dict)

    def add_segment(self, seg: dict[str, Any]) -> None:
        f = seg["faults"]
        self.finished += seg["finished"]
        self.kills += f["kills"]
        self.pauses += f["pauses"]
        self.lost_replies += f["lost_replies"]
        self.slow += f["slow"]
        self.duplicate_tasks += seg["duplicate_tasks"]
        self.violations += sum(seg["violations"].values())
        self.checkpoints += 1
        self.invalid += seg["verdict"] == "invalid"
        self.live = {}

    def shown(self, name: str) -> int:
        return getattr(self, name) + self.live.get(name, 0)


def clock(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


class SoakDisplay(LiveDisplay):
    refresh_per_second = 2

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None, every: float = PLAIN_EVERY) -> None:
        super().__init__(stream, live=live)
        self.every = every
        self._last = 0.0

    def update(self, t: Totals, *, elapsed: float, total: float, segment: str, stage: str, force: bool = False) -> None:
        if self._live is not None:
            self._live.update(self._panel(t, elapsed, total, segment, stage))
            return
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            print(self.line(t, elapsed, total, segment, stage), file=self.stream, flush=True)

    @staticmethod
    def line(t: Totals, elapsed: float, total: float, segment: str, stage: str) -> str:
        return (f"[soak] {clock(elapsed)} of {clock(total)} ({clock(total - elapsed)} left) {segment} {stage} | "
                f"finishes accepted {t.shown('finished')} | faults: kills {t.shown('kills')}, "
                f"pauses {t.shown('pauses')}, "
                f"lost replies {t.shown('lost_replies')}, slow {t.shown('slow')} | checked so far: duplicates "
                f"{t.duplicate_tasks} task(s), violations {t.violations} ({t.checkpoints} checkpoints, "
                f"{t.invalid} invalid)")  # fmt: skip

    @staticmethod
    def _panel(t: Totals, elapsed: float, total: float, segment: str, stage: str) -> Any:
        from rich.table import Table

        g = Table.grid(padding=(0, 2))
        g.add_column(style="bold")
        g.add_column()
        g.add_row("soak", f"{clock(elapsed)} elapsed of {clock(total)}, {clock(total - elapsed)} remaining")
        g.add_row("now", f"{segment} ({stage})")
        g.add_row("finishes accepted", str(t.shown("finished")))
        g.add_row("faults", f"kills {t.shown('kills')}, pauses {t.shown('pauses')}, "
                            f"lost replies {t.shown('lost_replies')}, slow tasks {t.shown('slow')}")  # fmt: skip
        g.add_row("duplicates", f"{t.duplicate_tasks} task(s) with a duplicate side effect (checked so far)")
        style = "red" if t.violations else "green"
        g.add_row("violations", f"[{style}]{t.violations}[/{style}] in {t.invalid} of {t.checkpoints} checkpoints")
        return g
