"""A tuning split over N machines (``takeover tune --shard I/N``) and joined again (``takeover merge``).

Why not split the runs as a sweep's are: a tuning has no list of runs. Each run is chosen from the
runs before it (:mod:`takeover._internal.tune.driver`): a bisection over a ladder of leases, then one over heartbeat
leases whose top is the first answer, then one over heartbeat intervals at the second answer. Shards that
cannot see each other's runs cannot follow that path. What they can do is make the evidence the path would
read, at every place it could go, so the path can be walked afterwards:

- **the ladders, speculatively**: the fixed-lease ladder, the heartbeat ladder up to the fixed ladder's top
  (the highest ceiling the first answer can give it; every lower ceiling gives a prefix of it) and, at each
  of its leases, the heartbeat intervals (the fraction search's values; 0.3 is the heartbeat ladder's own
  point). These points, in that order, are dealt out as a sweep's runs are: point j (from 0) to shard
  ``j mod N + 1``.
- **each point until it is decided**: a point's runs are made until its pooled bound says under, over or
  capped (:class:`~takeover._internal.tune.search.Search`'s states). The search never asks a decided point for
  another run and keeps asking an open one, so whatever path the search takes, every run it asks of a
  point is one the shard made: the point's first runs, in order. Run r of point j has seed
  ``--seed + j + r * (number of points)``.
- **the merge walks the path** (:func:`replay`): the unsharded search itself (the same
  :class:`~takeover._internal.tune.driver.Tuning`), each run it asks for answered by the next run the shards made at
  that point instead of a new one. The answer is therefore the one the unsharded search reaches from
  runs with those outcomes: the same lease, heartbeat and interval wherever each point's verdict is the
  same (as between any two tunings, or a tuning here and on a cluster: runs are real processes).
  ``tune.csv`` and ``tuning.json`` hold the runs the path read, in its order; the shards' other runs
  (points the search never reached) are counted in ``tuning.json``'s ``sharded``, not used.

The price, and what is left out: the shards make every point of the ladders rather than the few a
bisection visits, several times the runs of one tuning (N machines buy wall time, not CPU). The two
remedy runs and the scale check stand at the answer, which no shard knows; a merged tuning has none
(``searches``: ``stopped: "sharded"``), and says so. Every shard must run the same ladders: ``--shard``
needs ``--time-scale`` (the derived scale is measured on each machine), and the merge refuses shards
whose points differ.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.config import RunConfig
from takeover._internal.fanout.launch import Launcher
from takeover._internal.store import TUNE_CSV
from takeover._internal.sweep.grid import Cell
from takeover._internal.sweep.runner import SweepResult, run_cells, shard_of
from takeover._internal.task_times import TaskTimes
from takeover._internal.tune.driver import Phase, Tuning
from takeover._internal.tune.plan import FRACTIONS, HEARTBEAT_FRACTION, Failures, Plan
from takeover._internal.tune.search import OPEN, UNTRIED, Search

RUNS_FILE = "tune-shard.json"  # a shard's runs, as the search reads them (typed rows, not tune.csv's text)
SAMPLES_FILE = "task-times.json"  # in a merged tuning's folder: the durations the shards ran with
SHARDED = "sharded"  # why a merged tuning has no remedy runs and no scale check


def points(plan: Plan) -> list[tuple[str, float, float]]:
    """Every (phase, lease, heartbeat fraction) the search could ask for, in the order the shards deal them."""
    fixed = plan.fixed_ladder()
    out = [("fixed", lease, 0.0) for lease in fixed]
    if plan.has_extend:
        ladder = plan.heartbeat_ladder(fixed[-1])
        out += [("heartbeat", lease, HEARTBEAT_FRACTION) for lease in ladder]
        out += [("fraction", lease, f) for lease in ladder for f in FRACTIONS if f != HEARTBEAT_FRACTION]
    return out


def point_key(plan: Plan, lease: float, fraction: float, remedy: str = "none") -> str:
    """The run's cell, which names a point whatever phase asks for it."""
    return plan.cell(plan.grid(), lease, fraction, remedy).cell_id


class ShardTuning(Tuning):
    """A shard's runs: its points of :func:`points`, each until decided, within the budget."""

    def __init__(self, plan: Plan, out: Path, shard: tuple[int, int]) -> None:
        super().__init__(plan, out)
        self.shard = shard
        self.all = points(plan)
        self.made: list[dict[str, Any]] = []  # every row, with its point's key and run number there
        self.stopped = "done"  # or "budget": a point of this shard left undecided; "interrupted"
        self._point: tuple[int, int] = (0, 0)  # the run under way: its point (index in self.all) and run there

    def runs(self) -> Generator[tuple[Cell, int, RunConfig], None, None]:
        everything = list(enumerate(self.all))
        for j, (name, lease, fraction) in shard_of(everything, self.shard):
            value = fraction if name == "fraction" else lease
            phase = Phase(name, Search([value], self.plan.target / 1000, self.plan.cap, 0), lease=lease)
            assert phase.search is not None
            rep = 0
            while phase.search.state(0) in (UNTRIED, OPEN):
                if self.violations():
                    return
                if not self._time_for(1.0):
                    self.stopped = "budget"
                    return
                self._point = (j, rep)
                yield self._run(phase, 0, lease, fraction, "none", seed=self.plan.seed + j + rep * len(self.all))
                rep += 1

    def on_row(self, row: dict[str, Any]) -> None:
        super().on_row(row)
        j, rep = self._point
        name, lease, fraction = self.all[j]
        self.made.append({"key": point_key(self.plan, lease, fraction), "rep": rep, "point": j, "phase": name,
                          "row": row})


def run_shard(plan: Plan, out: Path, shard: tuple[int, int], *, launcher: Launcher | None = None
              ) -> tuple[ShardTuning, SweepResult]:
    """Make shard I/N's points (one run out at a time: each point's next run waits for its last)."""
    tuning = ShardTuning(plan, out, shard)
    mine = len(shard_of(tuning.all, shard))
    result = run_cells(tuning.runs(), out, planned=mine, csv_name=TUNE_CSV, label=f"tune shard {shard[0]}/{shard[1]}",
                       on_row=tuning.on_row, describe=tuning.progress_line, launcher=launcher, depth=1)
    return tuning, result


def write_tune_shard(out: Path, shard: tuple[int, int], tuning: ShardTuning, command: str,
                     elapsed_s: float = 0.0) -> None:
    """``shard.json`` (the points, which every shard of one tuning shares, and the plan) and the runs."""
    from takeover._internal.fanout.merge import write_shard

    plan = dataclasses.asdict(tuning.plan)
    plan["times"] = {"samples": list(tuning.plan.times.samples), "source": tuning.plan.times.source,
                     "n_read": tuning.plan.times.n_read}
    order = [f"{name} {point_key(tuning.plan, lease, fraction)}" for name, lease, fraction in tuning.all]
    write_shard(out, "tune", shard, order, {"plan": plan, "command": command, "stopped": tuning.stopped,
                                            "elapsed_s": round(elapsed_s, 1)})
    (out / RUNS_FILE).write_text(json.dumps({"runs": tuning.made}, indent=1, default=_plain) + "\n")


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def plan_of(meta: dict[str, Any], out: Path) -> Plan:
    """The plan a shard ran (the same in every shard: the merge checked their points), its durations read from
    ``out/task-times.json`` (the samples, written there: the merge may run where the user's file is not)."""
    fields = dict(meta["plan"])
    t = fields.pop("times")
    failures = Failures(**fields.pop("failures"))
    out.mkdir(parents=True, exist_ok=True)
    (out / SAMPLES_FILE).write_text(json.dumps(t["samples"]) + "\n")
    fields["spec"] = str((out / SAMPLES_FILE).absolute())
    return Plan(**fields, times=TaskTimes(tuple(t["samples"]), t["source"], int(t["n_read"])), failures=failures)


def replay(plan: Plan, out: Path, made: list[dict[str, Any]]) -> Tuning:
    """The unsharded search, each run it asks for answered by the shards' next run at that point."""
    pool: dict[str, list[dict[str, Any]]] = {}
    for m in sorted(made, key=lambda m: (m["key"], m["rep"])):
        pool.setdefault(m["key"], []).append(m["row"])
    tuning = Tuning(plan, out)
    used: Counter[str] = Counter()
    search = tuning.runs()
    try:
        while True:
            try:
                cell, _seed, _cfg = next(search)
            except StopIteration:
                break
            phase = tuning.pending_phase()
            rows = pool.get(cell.cell_id, [])
            if used[cell.cell_id] >= len(rows):  # a point no shard decided (out of budget), or past the ladders
                phase.stopped = SHARDED if phase.name in ("remedies", "scale") else "budget"
                break
            tuning.on_row(rows[used[cell.cell_id]])
            used[cell.cell_id] += 1
    finally:
        search.close()
    # A violation anywhere is a queue bug the merged tuning must not drop, even where the path did not go.
    if not tuning.violations():
        for m in made:
            if m["row"]["valid"] is False:
                lease = round(float(m["row"]["lease"]) * plan.scale, 6)  # the run's lease, in production seconds
                tuning.rows.append({**m["row"], "phase": m["phase"], "lease_prod": lease, "value": lease})
                break
    return tuning


def say_shard(tuning: ShardTuning, result: SweepResult, shard: tuple[int, int]) -> None:
    mine = len(shard_of(tuning.all, shard))
    print(f"tune shard {shard[0]}/{shard[1]}: {len(result.rows)} run(s) at {mine} of the {len(tuning.all)} points "
          f"({tuning.stopped}); join the shards with: takeover merge SHARD_DIRS... --out DIR", file=sys.stdout)


def copy_runs(tuning: Tuning, sources: dict[str, Path], out: Path) -> None:
    """The run folders the path read, from their shards into ``out/cells`` (``run_dir`` pointed there)."""
    import shutil

    for row in tuning.rows:
        folder = Path(str(row["run_dir"]))
        src = sources.get(folder.name)
        dest = out / store.SWEEP_CELLS / folder.name
        if src is not None and (src / folder.name).is_dir() and not dest.exists():
            shutil.copytree(src / folder.name, dest)
        row["run_dir"] = str(dest)
