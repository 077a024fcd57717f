"""Drive the searches with real runs, one after another, and turn their evidence into the recommendation.

The phases, each a :class:`takeover._internal.tune.search.Search` over its own ladder:

1. ``fixed``: the shortest fixed lease (remedy none, no heartbeat) shown under the target;
2. ``heartbeat`` (a queue with ``extend()``): the shortest lease shown under the target with a
   heartbeat every 0.3 leases, from the median task up to the fixed answer;
3. ``fraction``: at that lease, the longest heartbeat interval (as a fraction of the lease, 0.3 to 0.7)
   still shown under: fewer extend calls for the same protection;
4. ``remedies``: one run each of idempotency-key and fencing at the recommended lease (and heartbeat),
   for what each leaves over;
5. ``scale``: at half the time scale, one run at the recommendation and one at the lease below it
   (see ``_scale_check``).

Each phase may spend the budget up to its share (:data:`SHARES`; what a phase leaves is the next
one's). A run is started only when it is expected to finish within that share, estimated from the
runs so far. A run that breaks an invariant ends the tuning: a queue bug, not a tuning result.

The runs go through the sweep's runner (:func:`takeover._internal.sweep.runner.run_cells`) and are checked into
the sweep's rows (:func:`takeover._internal.sweep.metrics.cell_row`); the pooled bounds come from the sweep's
:func:`takeover._internal.sweep.recommend.cell_means`, so a tuning and a sweep judge a lease the same way.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from takeover._internal.config import RunConfig
from takeover._internal.fanout.launch import Launcher
from takeover._internal.store import TUNE_CSV
from takeover._internal.sweep.grid import Cell, Grid
from takeover._internal.sweep.recommend import cell_means, frame
from takeover._internal.sweep.runner import SweepResult, cell_dir, run_cells
from takeover._internal.tune.plan import FRACTIONS, HEARTBEAT_FRACTION, Plan
from takeover._internal.tune.search import CAPPED, Point, Search

SHARES = {"fixed": 0.35, "heartbeat": 0.55, "fraction": 0.7, "remedies": 0.8, "scale": 1.0}
REMEDIES = ("idempotency-key", "fencing")


@dataclass
class Phase:
    name: str
    search: Search | None  # None: the remedies, a fixed list of runs
    lease: float = 0.0  # the fraction phase's lease (production seconds)
    stopped: str = ""  # why it ended: resolved, budget, ladder, violation, skipped

    def value(self, index: int) -> float:
        assert self.search is not None
        return self.search.values[index]


@dataclass
class Tuning:
    """The searches, their runs and their rows; :meth:`runs` feeds the sweep's runner."""

    plan: Plan
    out: Path
    grid: Grid = field(init=False)
    phases: dict[str, Phase] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)  # every run's sweep row, plus phase and value
    started: float = field(default_factory=time.monotonic)
    _pending: tuple[Phase, int, float] | None = None  # the run under way: its phase, ladder index, lease
    _mark: float = 0.0  # when it was handed to the runner
    _walls: list[float] = field(default_factory=list)  # each run's wall time, run and check

    def __post_init__(self) -> None:
        self.grid = self.plan.grid()
        fixed = self.plan.fixed_ladder()
        target = self.plan.target / 1000
        self.phases["fixed"] = Phase("fixed", Search(fixed, target, self.plan.cap, self.plan.fixed_start(fixed)))

    # -- the runs -----------------------------------------------------------------------------------
    def runs(self) -> Generator[tuple[Cell, int, RunConfig], None, None]:
        """The next run, decided from every row so far (the runner records each row before asking again)."""
        shares = dict(SHARES)
        if not self.plan.has_extend:
            shares.update({"fixed": 0.7})
        yield from self._search(self.phases["fixed"], shares["fixed"], lambda lease: (lease, 0.0))
        fixed = self.phases["fixed"].search
        assert fixed is not None
        if self.plan.has_extend and not self.violations():
            ceiling = fixed.answer() or fixed.values[-1]
            ladder = self.plan.heartbeat_ladder(ceiling)
            hb = Phase("heartbeat", Search(ladder, fixed.target, fixed.cap, 0))
            self.phases["heartbeat"] = hb
            yield from self._search(hb, shares["heartbeat"], lambda lease: (lease, HEARTBEAT_FRACTION))
            assert hb.search is not None
            lease = hb.search.answer()
            if lease is not None and not self.violations():
                frac = Search(list(FRACTIONS), fixed.target, fixed.cap, FRACTIONS.index(0.5))
                best = hb.search.points[hb.search.values.index(lease)]
                # 0.3 at this lease is the heartbeat search's evidence: counted, not run again
                frac.points[len(FRACTIONS) - 1] = Point(best.k, best.n, best.runs)
                phase = Phase("fraction", frac, lease=lease)
                self.phases["fraction"] = phase
                yield from self._search(phase, shares["fraction"], lambda f: (phase.lease, f))
        lease, fraction = self.recommended()
        remedies = Phase("remedies", None)
        self.phases["remedies"] = remedies
        if lease is None or self.violations():
            remedies.stopped = "skipped"
            return
        for remedy in REMEDIES:
            if not self._time_for(shares["remedies"]):
                remedies.stopped = "budget"
                break
            yield self._run(remedies, -1, lease, fraction or 0.0, remedy)
        else:
            remedies.stopped = "done"
        yield from self._scale_check(lease, fraction)

    def _scale_check(self, lease: float, fraction: float | None) -> Iterator[tuple[Cell, int, RunConfig]]:
        """One run at half the time scale (tasks twice as long here) at the recommendation, and one at the
        lease below it that its search did not show under: if the answer were an artefact of the scale (the
        harness's own stalls are K times longer in production units), the first would lose leases where it
        did not, or the second would pass where it did not."""
        phase = Phase("scale", None, lease=lease)
        self.phases["scale"] = phase
        other = dataclasses.replace(self.plan, scale=self.plan.scale / 2)
        grid = other.grid()
        for point in self.scale_points(lease, fraction):
            if not self._time_for(1.0, other.run_seconds()):
                phase.stopped = "budget"
                return
            cell = other.cell(grid, point[0], point[1])
            seed = self.plan.seed + len(self.rows)
            cfg = grid.config(cell, seed, cell_dir(self.out, cell, seed))
            self._pending = (phase, -1, point[0])
            self._mark = time.monotonic()
            yield cell, seed, cfg
        phase.stopped = "done"

    def scale_points(self, lease: float, fraction: float | None) -> list[tuple[float, float]]:
        """(lease, fraction) the scale check runs: the recommendation, then the longest lease below it that its
        search tried and did not show under (at that search's heartbeat fraction)."""
        points = [(lease, fraction or 0.0)]
        name = "heartbeat" if fraction is not None else "fixed"
        search = self.phases[name].search
        if search is not None and search.best() is not None and search.below() >= 0:
            points.append((search.values[search.below()], HEARTBEAT_FRACTION if fraction is not None else 0.0))
        return points

    def _search(self, phase: Phase, share: float, point: Any) -> Iterator[tuple[Cell, int, RunConfig]]:
        search = phase.search
        assert search is not None
        while True:
            if self.violations():
                phase.stopped = "violation"
                return
            index = search.next()
            if index is None:
                phase.stopped = "resolved" if search.resolved() else "ladder"
                return
            if not self._time_for(share):
                phase.stopped = "budget"
                return
            lease, fraction = point(search.values[index])
            yield self._run(phase, index, lease, fraction, "none")

    def _run(self, phase: Phase, index: int, lease: float, fraction: float,
             remedy: str, seed: int | None = None) -> tuple[Cell, int, RunConfig]:
        """The run at one point of ``phase`` (seed: the tuning's seed + the runs so far, unless given)."""
        cell = self.plan.cell(self.grid, lease, fraction, remedy)
        seed = self.plan.seed + len(self.rows) if seed is None else seed
        cfg = self.grid.config(cell, seed, cell_dir(self.out, cell, seed))
        self._pending = (phase, index, lease)
        self._mark = time.monotonic()
        return cell, seed, cfg

    def pending_phase(self) -> Phase:
        """The phase of the run handed out last (the one :meth:`on_row` will be given)."""
        assert self._pending is not None
        return self._pending[0]

    def on_row(self, row: dict[str, Any]) -> None:
        """The runner's callback: the row goes to its point's evidence before the next run is chosen."""
        assert self._pending is not None
        phase, index, lease = self._pending
        self._walls.append(time.monotonic() - self._mark)
        self.rows.append({**row, "phase": phase.name, "lease_prod": lease,
                          "value": lease if phase.name != "fraction" else row["heartbeat_fraction"]})
        if phase.search is not None and row["valid"] is not False:
            phase.search.record(index, int(row["dup_lost_lease"] or 0), int(row["tasks"] or 0))

    def progress_line(self, row: dict[str, Any]) -> str:
        """One run's progress line, in production seconds as the answer is: where it ran, its lease-caused
        duplicates (what the Evidence table and the target count) with all causes beside, labelled, the
        pooled judgement of its point after it, and its recovery. Called after :meth:`on_row`."""
        assert self._pending is not None
        phase, index, lease = self._pending
        scale = self.plan.scale / 2 if phase.name == "scale" else self.plan.scale
        fraction = float(row["heartbeat_fraction"] or 0.0)
        where = {"fixed": "fixed lease", "heartbeat": "heartbeat search", "fraction": "heartbeat interval search",
                 "remedies": f"remedy {row['remedy']}",
                 "scale": f"scale check (time scale {scale:g})"}.get(phase.name, phase.name)
        beat = f", heartbeat every {lease * fraction:.3g} s ({fraction:g} lease)" if fraction else ""
        tasks = int(row["tasks"] or 0)
        k, extra = int(row["dup_lost_lease"] or 0), int(row["dup_extra"] or 0)
        per = f"{1000 * k / tasks:.3g}" if tasks else "-"
        text = (f"{where}: lease {lease:g} s{beat}, seed {row['seed']}: lease-caused duplicates {k} of {tasks} "
                f"tasks ({per} per 1000; all causes {extra})")
        search = phase.search
        if search is not None and index >= 0 and row["valid"] is not False:
            p = search.points[index]
            hi = p.bounds()[1]
            state = search.state(index)
            why = (f" (undecided at the cap of {search.cap} tasks a point may use: counted as not under)"
                   if state == CAPPED else "")
            text += (f"; this {'interval' if phase.name == 'fraction' else 'lease'} so far: {p.k} in {p.n} "
                     f"(95% upper {1000 * hi:.3g} per 1000, target {self.plan.target:g}): {state}{why}")
        rec = row.get("recovery_p99")
        if rec not in (None, ""):
            text += f"; recovery p99 {float(rec) * scale:.3g} s"
        return text + f"; run took {float(row.get('elapsed_s') or 0):.0f} s of wall time"

    def _time_for(self, share: float, estimate: float | None = None) -> bool:
        """Whether one more run fits in ``share`` of the budget, judged by the slowest of the last runs."""
        spent = time.monotonic() - self.started
        guess = max(self._walls[-3:]) if self._walls else self.plan.run_seconds()
        if estimate is not None:
            guess = max(guess, estimate)
        return spent + guess <= share * self.plan.budget_s

    # -- what the evidence says -------------------------------------------------------------------------
    def violations(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["valid"] is False]

    def recommended(self) -> tuple[float | None, float | None]:
        """(lease, heartbeat fraction) in production seconds: with extend, the heartbeat answer when there is
        one; else the fixed answer (fraction None)."""
        fixed = self.phases["fixed"].search
        assert fixed is not None
        hb = self.phases.get("heartbeat")
        if hb is not None and hb.search is not None and hb.search.answer() is not None:
            frac = self.phases.get("fraction")
            f = HEARTBEAT_FRACTION
            if frac is not None and frac.search is not None and frac.search.answer() is not None:
                f = float(frac.search.answer() or HEARTBEAT_FRACTION)
            return hb.search.answer(), f
        return fixed.answer(), None

    def resolved(self) -> bool:
        """The recommendation is resolved when each lease search it rests on is (the fraction is a refinement)."""
        if self.violations():
            return False
        names = ["fixed", "heartbeat"] if self.plan.has_extend else ["fixed"]
        return all(n in self.phases and self.phases[n].search is not None
                   and self.phases[n].search.resolved() for n in names)  # type: ignore[union-attr]

    def means(self) -> pd.DataFrame:
        """The sweep's cell means of every run (pooled bounds per lease, fraction and remedy), production leases."""
        df = frame([r for r in self.rows if r["valid"] is not False])
        if df.empty:
            return df
        df["distribution"] = df["phase"].where(df["phase"] != "fraction", "heartbeat")
        df["lease"] = df["lease_prod"]
        return cell_means(df)


def run_tuning(plan: Plan, out: Path, *, live: bool | None = None,
               launcher: Launcher | None = None) -> tuple[Tuning, SweepResult]:
    """The search's runs through ``launcher`` (default: here), one out at a time: each is chosen from the
    rows of the runs before it, so the answer does not depend on where the runs are made."""
    tuning = Tuning(plan, out)
    estimate = plan.min_runs() * 2
    result = run_cells(tuning.runs(), out, planned=estimate, csv_name=TUNE_CSV, label="tune", live=live,
                       on_row=tuning.on_row, describe=tuning.progress_line, launcher=launcher, depth=1)
    return tuning, result
