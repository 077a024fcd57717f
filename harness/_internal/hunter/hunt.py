"""One hunt's loop and what it is asked: short runs on successive seeds, aimed and swarm in turn, until the
first violation (:class:`Hunt`), and the options as values (:class:`HuntOptions`).

The runs are made in this process, as the soak makes its segments (the coordinator, then the checker),
rather than as child commands as the selftest makes them: the checker (pandas) is loaded once, not once
per run; its result gives the time of the first violating operation directly; and a Ctrl-C is taken by
the coordinator's own handlers, which stop the run and reap every process it started before the hunt
stops.

What is kept: the violating run (with its reports), any run that could not be checked or was
interrupted, and the last ``--keep-valid`` valid runs; older valid runs are deleted as the hunt goes,
``hunt.json`` keeps their rows. ``hunt.json`` is rewritten after every run, so a hunt that is killed
still says what it tried.

The exit code (:meth:`Hunt.exit_code`, the command's): 1 a violation was found; 0 the budget ran out and
every run was valid; 2 bad input; 3 a run could not be checked (or tested nothing) and no violation was
found; 130 interrupted.

Why apart from :mod:`takeover._internal.hunter.core`: the loop on a cluster (:mod:`takeover._internal.hunter.cluster`)
is this loop with its runs submitted elsewhere, and the hunt as a library call chooses between the two.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import signal
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from takeover._internal import db, steering, store, swarm
from takeover._internal.config import RunConfig
from takeover._internal.hunter.display import HuntDisplay
from takeover._internal.options import DEFAULT_PROFILE, RUN_OPTIONS
from takeover._internal.soak.display import clock
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

DEFAULT_BUDGET = 300.0
DEFAULT_RUN_SECONDS = 10.0
DEFAULT_KEEP_VALID = 3
MODES = ("aimed", "swarm")  # run i (from 0) is MODES[i % 2]
# The run options the hunt hands to every run as they are: every option of ``takeover stress`` (task
# times, fault rates and clock faults included) but the four that are the hunt's to decide: --duration is
# --run-seconds, --seed the first seed, --swarm every other run, --out the hunt's folder.
HUNTS_OWN = ("duration", "seed", "swarm", "out")
PASSED_ON = tuple(o.dest for o in RUN_OPTIONS if o.dest not in HUNTS_OWN)
# Verdicts of a run in hunt.json and on its progress line.
VALID, VIOLATED, INCONCLUSIVE, UNCHECKED, INTERRUPTED, RUNNING = (
    "valid", "violated", "inconclusive", "unchecked", "interrupted", "running")  # fmt: skip


@dataclass(frozen=True)
class HuntOptions:
    """What a hunt is asked to do: ``takeover hunt``'s options, as values.

    ``run_options`` are the stress options every run takes as they are, by dest (``task_time_mean``;
    None or absent: the profile's; :data:`PASSED_ON`), ``db`` among them; the rest is the hunt's own.
    """

    run_options: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 1
    budget: float = DEFAULT_BUDGET
    run_seconds: float = DEFAULT_RUN_SECONDS
    keep_valid: int = DEFAULT_KEEP_VALID
    out: str | None = None  # the hunt's folder (default runs/hunt-<timestamp>)
    keep_db: bool = False
    cluster: str | None = None  # takeover._internal.fanout: a dask scheduler's address, or local:N
    shard: tuple[int, int] | None = None  # I/N: this hunt makes runs I, I+N, ... of the whole hunt
    command: str = ""  # the line that started the hunt, for hunt.json

    @property
    def profile(self) -> str:
        return str(self.run_options.get("profile") or DEFAULT_PROFILE)

    @property
    def db(self) -> str:
        return db.check(self.run_options.get("db") or db.DEFAULT)

    def check(self) -> None:
        """The hunt's own values; every run option is checked by resolving the first runs' configs."""
        unknown = sorted(set(self.run_options) - set(PASSED_ON) - {"db"})
        if unknown:
            raise UsageError(f"the hunt decides {', '.join(unknown)} itself (run_options takes {', '.join(PASSED_ON)})")
        if not self.run_seconds > 0 or self.run_seconds == float("inf"):
            raise UsageError(f"--run-seconds must be a positive number of seconds, got {self.run_seconds!r}")
        if not self.budget >= self.run_seconds or self.budget == float("inf"):
            raise UsageError(f"--budget must be a number of seconds at least --run-seconds ({self.run_seconds:g}), "
                             f"got {self.budget!r}")  # fmt: skip
        if self.keep_valid < 0:
            raise UsageError(f"--keep-valid must be an integer >= 0, got {self.keep_valid}")

    def run_config(self, seed: int, mode: str, out: Path | None = None) -> RunConfig:
        """The config of one run of the hunt, resolved exactly as ``takeover stress`` resolves its options,
        so the run's reproduce line is a plain ``takeover stress`` line."""
        from takeover._internal.stress_run import resolve

        given = {**{dest: self.run_options.get(dest) for dest in PASSED_ON}, "profile": self.profile}
        ns = argparse.Namespace(**given, seed=seed, duration=self.run_seconds,
                                swarm=True if mode == "swarm" else None, db=self.run_options.get("db"))
        cfg = resolve(ns)
        return dataclasses.replace(cfg, out=None if out is None else str(out))


class Hunt:
    """The loop: one run per seed until a violation, the budget, or a Ctrl-C; ``hunt.json`` after each."""

    def __init__(self, opts: HuntOptions, root: Path, display: HuntDisplay, queue: str) -> None:
        self.opts = opts
        self.queue = queue
        self.root = root
        self.display = display
        self.command = opts.command
        self.code: ExitCode | None = None  # what the hunt ended with (run_hunt sets it; a cluster may change it)
        self.rows: list[dict[str, Any]] = []
        self.found: dict[str, Any] | None = None
        self.status = RUNNING
        self.started = time.time()
        self.t0 = time.monotonic()
        self.next_estimate: float | None = None  # why the hunt stopped: the run that did not fit
        # Model coverage of the runs so far (summary.json's coverage.model), which steers the next run's
        # faults (takeover._internal.steering): the cells reached, the queue's optional methods, and how many runs
        # were steered toward each cell.
        # --shard I/N: this hunt makes runs I, I+N, I+2N, ... of the whole hunt (run numbers from 1).
        shard = opts.shard
        self.first: int = shard[0] - 1 if shard else 0
        self.step: int = shard[1] if shard else 1
        self.reached: set[str] = set()
        self.extensions: list[str] | None = None
        self.tried: Counter[str] = Counter()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def run(self) -> ExitCode:
        # The checker and the reports are loaded before the first run (seconds, pandas): a Ctrl-C landing
        # in their first import would leave them half-imported.
        import takeover._internal.pipeline  # noqa: F401

        # SIGTERM and SIGHUP stop the hunt as Ctrl-C does; while a run is under way the coordinator
        # takes all three itself, stops the run and reaps it, and gives them back afterwards.
        old = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
        interrupted = False
        try:
            self.write()
            index = self.first
            while self.found is None and self.fits():
                self.one_run(index, self.opts.seed + index, MODES[index % len(MODES)])
                index += self.step
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self.status = INTERRUPTED if interrupted else "finished"
            self.write()
        return self.exit_code()

    def fits(self) -> bool:
        """Whether the next run can finish within the budget: as long as the longest run so far took,
        or, before the first, its faulted phase."""
        estimate = max((r["wall_s"] for r in self.rows), default=self.opts.run_seconds)
        if self.elapsed() + estimate <= self.opts.budget:
            return True
        self.next_estimate = estimate
        return False

    # -- one run ----------------------------------------------------------------------------------
    def one_run(self, index: int, seed: int, mode: str) -> None:
        from takeover._internal.stress_run import run_once

        row, cfg, run_dir = self.prepare(index, seed, mode)
        started = time.monotonic()
        self.display.start(row)
        try:
            result = run_once(cfg, run_dir, on_progress=lambda p: self.display.update(p, self.elapsed()))
            if result.interrupted:  # the coordinator took the Ctrl-C, stopped the run and reaped it
                raise KeyboardInterrupt
            self.check(row, run_dir)
        except KeyboardInterrupt:
            row["verdict"], row["exit_code"] = INTERRUPTED, int(ExitCode.INTERRUPTED)
            raise
        finally:
            row["wall_s"] = round(time.monotonic() - started, 2)
            self.finish(row)

    def finish(self, row: dict[str, Any]) -> None:
        """A run's line, the pruning of old valid runs and ``hunt.json``, once the run is over."""
        self.display.note(f"[hunt {clock(self.elapsed())}/{clock(self.opts.budget)}] {self.progress_line(row)}")
        self.prune()
        self.write()

    def prepare(self, index: int, seed: int, mode: str) -> tuple[dict[str, Any], RunConfig, Path]:
        """Run ``index``'s folder, its config (steered by the coverage absorbed so far) and its row, listed."""
        run_dir = self.root / store.hunt_run_name(seed)
        run_dir.mkdir(parents=True, exist_ok=False)
        cfg = self.opts.run_config(seed, mode, run_dir)
        steer = None
        if self.extensions is not None:  # from the second run on: toward the cells not reached so far
            cfg, steer = steering.steered(cfg, self.reached, self.extensions, self.tried)
            self.tried.update(steer.toward)
            self.display.note(f"[hunt] run {index + 1} steered {steer.describe()}")
        row: dict[str, Any] = {
            "run": index + 1, "seed": seed, "mode": mode, "mix": swarm.mix(cfg), "verdict": RUNNING,
            "exit_code": None, "violated": {}, "first_violation_s": None, "at_end": False,
            "started_s": round(self.elapsed(), 2), "wall_s": 0.0, "run_dir": str(run_dir), "kept": True,
            "command": cfg.command(),
        }  # fmt: skip
        if steer is not None:
            row["steered"] = {"toward": steer.toward, "kinds": steer.kinds}
        self.rows.append(row)
        self.write()
        return row, cfg, run_dir

    def check(self, row: dict[str, Any], run_dir: Path) -> None:
        from takeover._internal.pipeline import check_and_report

        try:
            result = check_and_report(run_dir, reports=False)
        except Exception as exc:  # noqa: BLE001 - the run is kept for a re-check; it does not count as valid
            row.update(verdict=UNCHECKED, exit_code=int(ExitCode.INCONCLUSIVE), error=f"{type(exc).__name__}: {exc}")
            return
        row["exit_code"] = int(result.exit_code)
        model = result.summary.get("coverage", {}).get("model")
        if model is not None:
            self.absorb(row, list(model["cells"]), list(model["extensions"]))
            row["cells_reached"] = {"run": model["reached"], "so_far": len(self.reached), "possible": model["possible"]}
        if result.verdict is True:
            row["verdict"] = VALID
            return
        if result.verdict is not False:
            row["verdict"] = INCONCLUSIVE
            return
        fired = {name: inv.violations for name, inv in result.invariants.items() if inv.valid is False}
        first, at_end = result.first_violation(list(fired))
        row.update(verdict=VIOLATED, violated=fired, first_violation_s=None if first is None else round(first, 3),
                   at_end=at_end)  # fmt: skip
        if self.found is not None and self.found["run"] < row["run"]:  # on a cluster: an earlier run violated too
            return
        self.found = {k: row[k] for k in ("run", "seed", "mode", "mix", "violated", "first_violation_s", "at_end",
                                          "run_dir", "command")}  # fmt: skip
        self.found["detected_after_s"] = round(self.elapsed(), 2)
        try:  # the run that matters gets its reports; the verdict is in summary.json already
            from takeover.reports import write_reports

            write_reports(run_dir, result)
        except Exception as exc:  # noqa: BLE001
            self.display.note(f"[hunt] could not write the reports of {run_dir}: {type(exc).__name__}: {exc}")

    def absorb(self, row: dict[str, Any], cells: list[str], extensions: list[str]) -> None:
        """Take a checked run's model coverage into what steers the next runs (at once: runs here end in order)."""
        self.reached.update(cells)
        self.extensions = extensions

    def prune(self) -> None:
        """Delete the folders of the valid runs past the last ``--keep-valid``."""
        kept = [r for r in self.rows if r["verdict"] == VALID and r["kept"]]
        for r in kept[: max(0, len(kept) - self.opts.keep_valid)]:
            shutil.rmtree(r["run_dir"], ignore_errors=True)
            r["kept"] = False

    # -- the outcome -------------------------------------------------------------------------------
    def exit_code(self) -> ExitCode:
        if self.found is not None:
            return ExitCode.VIOLATED
        if self.status == INTERRUPTED:
            return ExitCode.INTERRUPTED
        if not self.rows or any(r["verdict"] != VALID for r in self.rows):
            return ExitCode.INCONCLUSIVE
        return ExitCode.VALID

    def verdict(self) -> str:
        if self.found is not None:
            return "invalid"
        if self.rows and all(r["verdict"] == VALID for r in self.rows):
            return VALID
        return INCONCLUSIVE

    def summary(self) -> dict[str, Any]:
        a = self.opts
        return {
            "status": self.status,
            "verdict": self.verdict(),
            "exit_code": int(self.exit_code()) if self.status != RUNNING else None,
            "command": self.command,
            "queue": self.queue,
            "profile": a.profile,
            "first_seed": a.seed,
            "budget_s": a.budget,
            "run_seconds": a.run_seconds,
            "keep_valid": a.keep_valid,
            "started": self.started,
            "elapsed_s": round(self.elapsed(), 2),
            "runs": self.rows,
            "found": self.found,
        }

    def write(self) -> None:
        store.write_hunt_summary(self.root, self.summary())

    @staticmethod
    def progress_line(row: dict[str, Any]) -> str:
        what = f"run {row['run']}, seed {row['seed']}, {row['mode']}"
        if row["mode"] == "swarm":
            what += f" ({', '.join(f'{k} {v:g}' for k, v in row['mix'].items())})"
        else:
            what += f" (every fault kind of the profile: {len(row['mix'])} on)"
        verdict = row["verdict"].upper()
        if row["verdict"] == VIOLATED:
            verdict += " (" + ", ".join(f"{n} {c}" for n, c in row["violated"].items()) + ")"
            verdict += ", first violation " + _when(row)
        return f"{what}: {verdict}, {row['wall_s']:.1f} s"

    def print_outcome(self, out: TextIO) -> None:
        hunt_file = self.root / store.HUNT_FILE
        tried = len(self.rows)
        if self.found is not None:
            f = self.found
            print(f"\nhunt: VIOLATION found after {f['detected_after_s']:.1f} s of hunting, run {f['run']} "
                  f"(seed {f['seed']}, {f['mode']})", file=out)  # fmt: skip
            print("violated: " + ", ".join(f"{n} ({c} violation{'s' if c != 1 else ''})"
                                           for n, c in f["violated"].items()), file=out)  # fmt: skip
            print(f"first violation: {_when(f)}", file=out)
            print(f"run folder: {f['run_dir']}", file=out)
            print(f"reproduce with: {f['command']}", file=out)
        elif self.status == INTERRUPTED:
            last = self.rows[-1]["run_dir"] if self.rows else "none"
            print(f"\nhunt: interrupted after {tried} run(s) in {self.elapsed():.1f} s; no violation found; "
                  f"the interrupted run is kept, check it with: takeover check {last}", file=out)  # fmt: skip
        else:
            unchecked = [r for r in self.rows if r["verdict"] != VALID]
            why = (f"the next run (about {self.next_estimate:.0f} s) would not fit in the {self.opts.budget:g} s budget"
                   if self.next_estimate is not None else "")
            word = "every run valid" if not unchecked else (
                f"{len(unchecked)} run(s) NOT CHECKED or inconclusive: seeds "
                + ", ".join(str(r["seed"]) for r in unchecked))  # fmt: skip
            print(f"\nhunt: no violation in {tried} run(s) (seeds {self.opts.seed}-{self.opts.seed + tried - 1}) in "
                  f"{self.elapsed():.1f} s, {word}; {why}", file=out)  # fmt: skip
        print(f"hunt summary: {hunt_file}", file=out, flush=True)


def _when(row: dict[str, Any]) -> str:
    """The first violation's moment in words: an operation's time, or the run's end (the snapshot alone)."""
    at = row["first_violation_s"]
    if at is None:
        return "not timed"
    if row["at_end"]:
        return f"at the run's end, {at:.2f} s in (only the final snapshot shows it)"
    return f"{at:.2f} s into the run"


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt
