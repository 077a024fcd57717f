"""``takeover soak --cluster``: the soak's segments several at a time on a dask cluster.

What stays: the banked seeds are replayed first, then segment i (from 0) has seed ``base.seed + i`` and a
faulted phase of ``min(checkpoint, what is left of --minutes)`` when it starts, as a local soak's; every
segment is checked here from its gathered folder (the checkpoint), recorded, banked when it failed and
pruned exactly as a local segment is (:class:`~takeover._internal.soak.driver.Soak`). What a cluster changes: W
segments run at once (W the cluster's slots), so a night covers W times the seeds; the segments' lines in
``soak.json`` are in segment order whatever order they finished in.

A segment's own counts (registered, finished, faults) come from its ``summary.json``, since its run
happened elsewhere; the soak's live panel shows the cluster's done / running / queued instead of one run's
progress. Ctrl-C (or SIGTERM) cancels every remote segment at once; those segments are not recorded (they
never reached their checkpoint), the ones gathered are.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from takeover._internal.config import RunConfig, command_argv
from takeover._internal.fanout.launch import ClusterLost, Done, Job, Launcher
from takeover._internal.soak.driver import Soak, segment_config, segment_length, segment_name


@dataclass
class GatheredRun:
    """What a segment's :class:`~takeover._internal.run.coordinator.RunResult` gives :meth:`Soak.record`, read from the
    summary of a segment that ran on a dask worker."""

    elapsed: float
    interrupted: bool
    registered: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    tally: Any = None

    @classmethod
    def from_summary(cls, summary: dict[str, Any] | None, done: Done) -> GatheredRun:
        if summary is None:
            return cls(done.wall_s, done.interrupted, tally=_Tally())
        c, cov = summary.get("counts", {}), summary.get("coverage", {})
        counters = {"done": int(c.get("final_states", {}).get("done", 0)),
                    "lose_reply": int(cov.get("lost_replies", {}).get("history", 0) or 0),
                    "slow": int(cov.get("slows", {}).get("total", 0) or 0)}  # fmt: skip
        tally = _Tally(Counter({"all": int(cov.get("kills", {}).get("total", 0) or 0)}),
                       Counter({"all": int(cov.get("pauses", {}).get("total", 0) or 0)}))
        return cls(float(c.get("duration_s") or done.wall_s), done.interrupted, int(c.get("tasks", 0)), counters,
                   tally)


@dataclass
class _Tally:
    kills: Counter[str] = field(default_factory=Counter)
    pauses: Counter[str] = field(default_factory=Counter)


class ClusterSoak(Soak):
    def __init__(self, *args: Any, launcher: Launcher, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.launcher = launcher
        self.done: list[Done] = []
        self.cluster_lost = ""
        launcher.on_wait = self._waiting  # the panel (and resources.csv) show the cluster as it is

    def _waiting(self) -> None:
        if not self.in_check:
            self.segment_name = self.launcher.status()
            self._show("running")

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Ctrl-C ends the soak at once: the remote segments are cancelled, not waited for. Inside a
        # checkpoint the check finishes first, as a local soak's does, unless pressed twice.
        self.stopping += 1
        if not self.in_check or self.stopping >= 2:
            raise KeyboardInterrupt

    def run_segments(self) -> None:
        """The replays were made by :meth:`Soak.run` one at a time (few, and they must come first); the
        segments are made here, the cluster's slots full until the budget is spent."""
        self.budget_start = time.time()
        deadline = self.budget_start + self.o.minutes * 60.0
        indices = self.o.segment_indices()
        filled = False  # the first W segments start together: each gets the whole first length, as the
        # header announced seg-0001's (and as W shards' first segments get it), not what is left after the
        # milliseconds the ones before them took to submit
        try:
            while not self.stopping:
                while self.launcher.free():
                    duration = segment_length(self.o.checkpoint, deadline - (time.time() if filled else
                                                                             self.budget_start))
                    if duration is None:
                        break
                    index = next(indices)
                    cfg = segment_config(self.o.base, index, duration, self.o.pinned)
                    self.submit(cfg, segment_name(index), index + 1)
                filled = True
                if not self.launcher.busy():
                    break
                self.segment_name = self.launcher.status()
                self._show("running", force=True)
                self.gather(self.launcher.next_done())
        except KeyboardInterrupt:
            self.stopping = max(self.stopping, 1)
        except ClusterLost as exc:
            self.cluster_lost = str(exc)
            self.stopping = max(self.stopping, 1)
        finally:
            if self.launcher.busy():
                self.launcher.cancel()
            self.segments.sort(key=lambda seg: seg["name"])

    def run_segment(self, cfg: RunConfig, name: str, kind: str) -> dict[str, Any]:
        """A banked seed's replay, on the cluster too (one at a time, before the segments)."""
        self.submit(cfg, name, 0, kind)
        try:
            return self.gather(self.launcher.next_done())
        except KeyboardInterrupt:
            self.launcher.cancel()
            self.stopping = max(self.stopping, 1)
            return {}

    def submit(self, cfg: RunConfig, name: str, index: int, kind: str = "segment") -> None:
        run_dir = self.root / name
        cfg = dataclasses.replace(cfg, out=str(run_dir))
        self.launcher.submit(Job(name, run_dir, command_argv(cfg), lambda: None, tuple(cfg.pythonpath), index,
                                 {"cfg": cfg, "kind": kind}))  # fmt: skip

    def gather(self, done: Done) -> dict[str, Any]:
        """One finished segment: checked here (its checkpoint), recorded, banked, pruned, as a local one."""
        self.done.append(done)
        cfg, kind, run_dir = done.job.info["cfg"], done.job.info["kind"], done.job.run_dir
        name = done.job.key
        if done.lost:
            self.display.note(f"[soak] {name} (seed {cfg.seed}) LOST, not counted: {done.note}")
            return {}
        self._show("checking", force=True)
        code, summary = self.check(run_dir)
        seg = self.record(name, kind, cfg, GatheredRun.from_summary(dict(summary) if summary else None, done),
                          code, summary)  # fmt: skip
        if done.note:
            seg["cluster_note"] = done.note
        self.settle(seg, run_dir, interrupted=done.interrupted)
        self.display.note(self.checkpoint_line(seg) + (f" [{done.note}]" if done.note else ""))
        return seg

