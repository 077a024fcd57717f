"""``takeover hunt --cluster``: the hunt's runs several at a time on a dask cluster, with the local hunt's rules.

What stays as it is: run i has seed ``--seed + i`` and mode aimed/swarm in turn; each finished run is checked
here from its gathered folder (:meth:`Hunt.check`); the runs before the first violation are all made, and the
first violation is the violating run with the lowest number, whatever order the runs finished in (runs after
it still under way are cancelled and their folders removed, as the local hunt would never have started them).

What a cluster changes: a run's faults are steered by the model coverage of the runs before it
(takeover._internal.steering), and with W runs out at once run i cannot wait for run i-1. So run i is steered by the
runs up to i-W (waited for, and taken in order): a fixed rule, so the same hunt on the same number of slots
makes the same runs, and with one slot it is the local hunt exactly. ``hunt.json`` says the lag
(``steer_lag``), each run's line says what it was steered toward, and its reproduce line holds the faults it
ran with.
"""

from __future__ import annotations

import shutil
from typing import Any

from takeover._internal.config import command_argv
from takeover._internal.fanout.launch import ClusterLost, Done, Job, Launcher
from takeover._internal.hunter.hunt import INTERRUPTED, MODES, RUNNING, UNCHECKED, Hunt
from takeover.exit_codes import ExitCode


class ClusterHunt(Hunt):
    def __init__(self, *args: Any, launcher: Launcher, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.launcher = launcher
        self.lag = launcher.slots
        self.coverage: dict[int, tuple[list[str], list[str]]] = {}  # run -> its cells and extensions, not absorbed
        self.absorbed = 0  # runs 1..absorbed have steered the runs since
        self.gathered: set[int] = set()
        self.order: list[int] = []  # the run numbers this hunt made, in the order it made them
        self.done: list[Done] = []
        self.cluster_lost = ""

    def absorb(self, row: dict[str, Any], cells: list[str], extensions: list[str]) -> None:
        self.coverage[row["run"]] = (cells, extensions)  # taken in run order, by steer_from()

    def steer_from(self, through: int) -> None:
        """Absorb the coverage of this hunt's runs 1..``through`` (all gathered), in run order."""
        while self.absorbed < through:
            run = self.order[self.absorbed]
            self.absorbed += 1
            cells, extensions = self.coverage.pop(run, (None, None))
            if cells is not None and extensions is not None:
                super().absorb({}, cells, extensions)

    def run(self) -> ExitCode:
        import takeover._internal.pipeline  # noqa: F401 - loaded before the first run, as the local hunt does

        interrupted = False
        try:
            self.write()
            made = 0  # this hunt's runs so far (with --shard, every N-th run of the whole hunt)
            while True:
                while self.found is None and self.launcher.free() and self.fits():
                    through = made + 1 - self.lag  # this hunt's run made+1 is steered by its runs 1..through
                    if any(r not in self.gathered for r in self.order[:max(0, through)]):
                        break
                    self.steer_from(through)
                    index = self.first + made * self.step
                    self.order.append(index + 1)
                    self.submit(index)
                    made += 1
                if not self.launcher.busy() or self.found is not None and not self.earlier_out():
                    break
                self.gather(self.launcher.next_done())
        except KeyboardInterrupt:
            interrupted = True
        except ClusterLost as exc:
            self.cluster_lost = str(exc)
        finally:
            if self.launcher.busy():
                self.launcher.cancel()
            self.drop_after_found()
            for row in self.rows:
                if row["verdict"] == RUNNING:
                    row["verdict"] = INTERRUPTED if interrupted else UNCHECKED
                    row["exit_code"] = int(ExitCode.INTERRUPTED if interrupted else ExitCode.INCONCLUSIVE)
                    if self.cluster_lost:
                        row["error"] = self.cluster_lost
            self.status = INTERRUPTED if interrupted else "finished"
            self.write()
        return self.exit_code()

    def submit(self, index: int) -> None:
        seed = self.opts.seed + index
        row, cfg, run_dir = self.prepare(index, seed, MODES[index % len(MODES)])
        row["steered_by_runs"] = self.absorbed
        self.launcher.submit(Job(f"run{row['run']}-s{seed}", run_dir, command_argv(cfg), lambda: None,
                                 tuple(cfg.pythonpath), index, {"row": row}))  # fmt: skip
        self.display.note(f"[hunt] run {row['run']} (seed {seed}, {row['mode']}) sent to the cluster | "
                          + self.launcher.status())  # fmt: skip

    def earlier_out(self) -> bool:
        """Whether a run before the violation found is still under way (it may be the first violation)."""
        assert self.found is not None
        return any(r["verdict"] == RUNNING and r["run"] < self.found["run"] for r in self.rows)

    def gather(self, done: Done) -> None:
        self.done.append(done)
        row = done.job.info["row"]
        self.gathered.add(row["run"])
        row["wall_s"] = round(done.wall_s, 2)
        if done.note:
            row["cluster_note"] = done.note
        if done.interrupted:
            row["verdict"], row["exit_code"] = INTERRUPTED, int(ExitCode.INTERRUPTED)
            raise KeyboardInterrupt
        if done.lost:
            row.update(verdict=UNCHECKED, exit_code=int(ExitCode.INCONCLUSIVE), error=done.note)
        else:
            self.check(row, done.job.run_dir)
        self.finish(row)
        if done.note:
            self.display.note(f"[hunt] run {row['run']}: {done.note}")

    def drop_after_found(self) -> None:
        """The runs after the first violation: never part of the hunt (the local hunt stops there)."""
        if self.found is None:
            return
        after = [r for r in self.rows if r["run"] > self.found["run"]]
        for r in after:
            shutil.rmtree(r["run_dir"], ignore_errors=True)
        self.rows = [r for r in self.rows if r["run"] <= self.found["run"]]

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "steer_lag": self.lag}
