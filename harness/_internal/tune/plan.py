"""What a tuning runs: the user's workload in production units, the time scale, and each run's config.

Why a time scale: production tasks take seconds to minutes and leases tens of seconds, and a search
needs a few thousand tasks; run as they are, that is days. Dividing every duration, lease and rate
period by K (``--time-scale``) keeps every ratio the lease decision depends on (task time to lease,
crashes and stalls per task) and makes hours of production minutes here; results are multiplied back.
What does not scale is the harness itself: each queue call, each action and each process switch takes
about the same milliseconds at any K. So the scaled tasks must stay well above that per-call latency,
which is measured on the queue under test before anything runs (:func:`measure_call_latency`), and
the default K puts the scaled median task at :data:`TARGET_RATIO` calls' latency; a K that puts it under
:data:`MIN_RATIO` is refused.

Why the crashes in the runs are not the production rate: recovery time (kill to takeover) is what a
crash costs in waiting, and it does not depend on how often crashes happen; at a real rate of a few a
day a run would see none. So the runs kill a lease holder about once per :data:`TASKS_PER_KILL` tasks,
or at the production rate when that is higher, and the crash-caused duplicates (a kill after the
action: S5) are scaled back by the ratio of the production rate to the run's rate.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover._internal.config import TaskTime
from takeover._internal.scratch import scratch_dir
from takeover._internal.sweep.grid import Cell, Distribution, Grid, Mode
from takeover._internal.sweep.metrics import ACTION_OVERHEAD
from takeover._internal.sweep.wilson import tasks_needed
from takeover._internal.task_times import TaskTimes, survival
from takeover._internal.tune.search import nice_ladder
from takeover.contract import has_extension, open_queue
from takeover.errors import UsageError

TARGET_RATIO = 160.0  # the default K puts the scaled median task at this many calls' latency
MIN_RATIO = 5.0  # a K that puts it under this many is refused: the harness would be measuring itself
LATENCY_FLOOR = 0.001  # seconds: a measured latency below this is taken as this (timer and scheduler noise)
WORKERS = 6  # worker processes per run, as the sweep's default grid
TASKS_PER_KILL = 40  # the runs kill a worker about once per this many tasks, at least
LOCAL_STEP = 0.002  # scaled seconds between the action and finish: short, as in production
POLL = 0.01  # scaled base poll interval of an idle worker
RUN_OVERHEAD = 4.0  # seconds a run costs beyond its work: processes, drain, check (measured: 3-5 s)
HEARTBEAT_FRACTION = 0.3  # the heartbeat lease search extends every 0.3 leases, as the sweep's default grid
FRACTIONS = (0.7, 0.6, 0.5, 0.4, HEARTBEAT_FRACTION)  # the fraction search, riskiest first
FIXED_FLOOR_LOSS = 20  # the fixed-lease ladder starts where the samples say 20x the target outlive it


@dataclass(frozen=True)
class Failures:
    """The failure profile in production units (per worker and hour; a probability per action).

    Stalls (GC or VM pauses) freeze a lease holder for one of ``pause_file``'s durations (production
    seconds), ``pause_rate_per_hour`` times per worker-hour. Unlike crashes they run at the production
    rate: a stall that outlives the lease makes a lease-caused duplicate, the very rate the target is about.
    """

    crash_rate_per_hour: float = 0.5
    lost_reply_rate: float = 0.0
    pause_rate_per_hour: float = 0.0
    pause_file: str = ""


@dataclass
class Plan:
    """Everything the tuning needs, resolved and checked before a run starts."""

    spec: str  # the durations file (absolute; FILE:COLUMN kept)
    times: TaskTimes
    target: float  # lease-caused duplicates per 1000 tasks
    budget_s: float
    scale: float
    scale_derived: bool
    latency_s: float  # the harness's per-call latency, measured
    queue: str
    has_extend: bool
    seed: int = 1
    stall_s: float = 0.0  # this machine's scheduler stalls (p99 of a 1 ms sleep's overshoot), measured
    failures: Failures = field(default_factory=Failures)
    tasks_per_hour: float | None = None
    db: str = "sqlite"  # --db, handed to every run (takeover._internal.db), without a password
    workers: int = WORKERS
    # --hosts and the network faults as given (takeover._internal.options' NET_FIELDS), in production units; see
    # network()
    net: dict[str, Any] = field(default_factory=dict)

    # -- sizes --------------------------------------------------------------------------------------
    @property
    def needed(self) -> int:
        """Tasks one lease needs to show the target at 0 observed (the sweep's Wilson rule)."""
        n = tasks_needed(self.target / 1000)
        assert n is not None  # target 0 is refused by check()
        return n

    @property
    def tasks_per_run(self) -> int:
        """Enough for one clean run to decide a point (1.5x what 0 observed needs), in fifties: 300 for 20 per
        1000, as many as a run of the sweep's default grid."""
        return int(min(1500, max(50, 50 * math.ceil(1.5 * self.needed / 50))))

    @property
    def cap(self) -> int:
        """Tasks after which an undecided point is given up: two runs, 600 for 20 per 1000, the evidence one
        cell of the sweep's default grid has (its two seeds of 300). More would decide points whose rate sits
        next to the target, which moves the answer by less than a ladder step and costs runs everywhere."""
        return 2 * self.tasks_per_run

    @property
    def scaled_mean(self) -> float:
        return self.times.mean / self.scale

    def run_seconds(self) -> float:
        """A run's expected wall time: its work spread over the workers, plus the fixed cost of a run."""
        work = self.tasks_per_run * (self.scaled_mean + LOCAL_STEP + ACTION_OVERHEAD) / self.workers
        return 1.1 * work + RUN_OVERHEAD

    @property
    def work_seconds(self) -> float:
        """The faulted phase: about as long as the registered tasks take, so faults meet all of them."""
        return max(1.0, round(self.tasks_per_run * self.scaled_mean / self.workers, 2))

    # -- the ladders, in production seconds ------------------------------------------------------------
    @property
    def overhead_prod(self) -> float:
        """The fixed steps after the work (action, local step), in production seconds."""
        return (LOCAL_STEP + ACTION_OVERHEAD) * self.scale

    def fixed_ladder(self) -> list[float]:
        """From where the samples say FIXED_FLOOR_LOSS x the target outlive the lease, to 1.5x the longest task."""
        q = max(0.5, 1 - FIXED_FLOOR_LOSS * self.target / 1000)
        return nice_ladder(self.times.quantile(q), 1.5 * self.times.max + self.overhead_prod)

    def fixed_start(self, ladder: list[float]) -> int:
        """The first lease where the samples predict at most half the target: the likeliest answer."""
        for i, lease in enumerate(ladder):
            if 1000 * survival(self.times.samples, lease - self.overhead_prod) <= self.target / 2:
                return i
        return len(ladder) - 1

    def heartbeat_ladder(self, ceiling: float) -> list[float]:
        """From the median task (shorter would cost every task several extends for a recovery gain under one
        median task), or 20 calls' latency if that is longer, up to ``ceiling``."""
        floor = max(self.times.p50, 20 * self.latency_s * self.scale)
        return nice_ladder(floor, max(floor, ceiling))

    # -- the runs ----------------------------------------------------------------------------------
    def kill_rate(self) -> float:
        """Random kills per (scaled) second in a run: the production rate, or one per TASKS_PER_KILL tasks."""
        return max(self.production_kill_rate(), self.throughput() / TASKS_PER_KILL)

    def production_kill_rate(self) -> float:
        """The production crash rate in scaled seconds, over the run's workers."""
        return self.failures.crash_rate_per_hour / 3600 * self.scale * self.workers

    def pause_rate(self) -> float:
        """Stalls per (scaled) second in a run: the production rate over the run's workers."""
        return self.failures.pause_rate_per_hour / 3600 * self.scale * self.workers

    def throughput(self) -> float:
        return self.workers / (self.scaled_mean + LOCAL_STEP + ACTION_OVERHEAD)

    def crash_ratio(self) -> float:
        """Production crashes per task over the runs' kills per task: S5 duplicates are scaled by it."""
        return min(1.0, self.production_kill_rate() / self.kill_rate())

    def grid(self) -> Grid:
        """The sweep grid the tuning's runs are cells of (the sweep's config code builds every run)."""
        fixed: dict[str, Any] = {
            "queue": self.queue, "workers": self.workers, "tasks": self.tasks_per_run,
            "duration": self.work_seconds, "local_step": LOCAL_STEP, "poll": POLL,
            "client_timeout": max(0.05, min(0.25, 5 * self.scaled_mean)),
        }  # fmt: skip
        if self.failures.pause_file:
            fixed.update({"pause_time_file": self.failures.pause_file, "pause_time_scale": self.scale})
        fixed.update(self.network())
        dist = Distribution("tasks", TaskTime(dist="empirical", file=self.spec, scale=self.scale))
        return Grid(name="tune", description="takeover tune", base="smoke", seeds=1, seed=self.seed,
                    target=self.target, leases=[], fixed=fixed,
                    faults={"kill": round(self.kill_rate(), 6), "lose_reply": self.failures.lost_reply_rate,
                            "pause": round(self.pause_rate(), 6)},
                    distributions=[dist], modes=[], db=self.db)  # fmt: skip

    def network(self) -> dict[str, Any]:
        """The runs' hosts and network faults: the rates (per production second) times the time scale, the
        delay divided by it, as every rate and duration of the tuning; the hosts and the loss as they are.
        A partition's length is drawn in leases, so it scales with them; a restart's down time does not."""
        scaled = {"partition_rate": self.scale, "conn_kill_rate": self.scale, "db_restart_rate": self.scale,
                  "db_pause_rate": self.scale,
                  "net_delay": 1 / self.scale}
        return {k: round(v * scaled[k], 6) if k in scaled else v for k, v in self.net.items()}

    def cell(self, grid: Grid, lease: float, fraction: float = 0.0, remedy: str = "none") -> Cell:
        """One run's cell: ``lease`` in production seconds, scaled here."""
        return Cell(grid.distributions[0], round(lease / self.scale, 6), 1.0, Mode(remedy, fraction))

    # -- checks ------------------------------------------------------------------------------------
    def min_runs(self) -> int:
        """The fewest runs a resolved answer takes: a bisection of each ladder, one decided run per point."""
        per_point = math.ceil(self.needed / self.tasks_per_run)
        points = math.ceil(math.log2(len(self.fixed_ladder()) + 1)) + 1
        if self.has_extend:
            points += 2  # the heartbeat lease from its floor, and one heartbeat fraction
        return points * per_point

    def check(self) -> None:
        """Refuse what cannot work: a scale that makes the harness measure itself, a target the budget
        cannot resolve (naming the budget that would)."""
        scaled_p50 = self.times.p50 / self.scale
        if scaled_p50 < MIN_RATIO * self.latency_s:
            most = self.times.p50 / (MIN_RATIO * self.latency_s)
            raise UsageError(f"--time-scale {self.scale:g} makes the median task {1000 * scaled_p50:.2g} ms, under "
                             f"{MIN_RATIO:g}x the harness's per-call latency ({1000 * self.latency_s:.2g} ms "
                             "measured): "
                             f"use --time-scale {_round_down(most):g} or less (the default would be "
                             f"{default_scale(self.times, self.latency_s):g})")
        need_s = self.min_runs() * self.run_seconds()
        if need_s > self.budget_s:
            raise UsageError(f"--target {self.target:g} per 1000 needs >= {self.needed} tasks at each lease tried "
                             f"(about {self.min_runs()} runs of {self.tasks_per_run} tasks, {need_s / 60:.1f} min "
                             f"here); --budget {self.budget_s / 60:g} cannot resolve it: --budget "
                             f"{math.ceil(1.5 * need_s / 60)} would")


def _round_down(x: float) -> float:
    """Two significant digits, rounded down."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return math.floor(x / 10**e) * 10**e


def _round2(x: float) -> float:
    return float(f"{x:.2g}")


def default_scale(times: TaskTimes, latency_s: float) -> float:
    """K that puts the scaled median task at TARGET_RATIO calls' latency (two significant digits)."""
    return _round2(times.p50 / (TARGET_RATIO * latency_s))


def measure_call_latency(queue: str, calls: int = 40) -> tuple[float, bool]:
    """The queue's per-call latency on a scratch database here (of the --db being served: the 90th
    percentile of register, claim and finish calls, at least LATENCY_FLOOR), and whether it has ``extend``.

    Why the 90th percentile: the lease decision is hurt by the slow calls, and on a shared machine the
    median hides the scheduler's delays that a run will meet.
    """
    with scratch_dir("takeover-tune-") as tmp, db.current().database(Path(tmp), "tune") as d:
        q = open_queue(queue, d)
        try:
            extend = has_extension(q, "extend")
            took: list[float] = []
            for i in range(calls):
                t0 = time.perf_counter()
                q.register(f"t{i}", time.time())
                t1 = time.perf_counter()
                claim = q.claim("w", time.time(), 60.0)
                t2 = time.perf_counter()
                if claim is not None:
                    q.finish(claim[0], claim[1], "done", time.time())
                t3 = time.perf_counter()
                took += [t1 - t0, t2 - t1, t3 - t2]
        finally:
            q.close()
    p90 = statistics.quantiles(took, n=10)[-1]
    return max(LATENCY_FLOOR, p90), extend


def measure_stall(samples: int = 100) -> float:
    """The 99th percentile of how late a 1 ms sleep wakes up here, in seconds: the scheduler's stalls.

    Why it is reported: a run's processes stall this long now and then whatever the time scale, and a
    stall is K times longer in production units. A recommendation whose margin (the lease beyond the
    tail, or a lease minus its heartbeat interval) is near ``stall x K`` measures this machine, not the
    workload; tuning.json says how long that is, and the scale check shows whether it mattered.
    """
    late = []
    for _ in range(samples):
        t0 = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - t0 - 0.001)
    return max(0.0, statistics.quantiles(late, n=100)[-1])
