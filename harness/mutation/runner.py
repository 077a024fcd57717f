"""Run mutants through takeover's own stages, cheapest first, and say which stage killed each and when.

Each mutant is its module's whole mutated source, written to a temp folder under a name of its own
(``takeover_mutant_NNN_<module>``) and loaded as ``MODULE:ATTR`` from there: that folder is put on
this process's import path and on ``PYTHONPATH``, so the worker processes of a stress run import the
same mutant. The package itself is never edited.

The stages, each run only when the ones before did not kill the mutant:

1. **crash**: the module does not import, the queue cannot be opened, or every call the scenarios
   make raises. Such a mutant is killed, but by nothing takeover checks; it is counted apart.
2. **scenarios**: the spec's five scenarios on the logical clock
(:func:`takeover._internal.scenario.replay.run_scenarios`). 3. **explore**: random contract-call sequences checked
against the spec's model (``takeover._internal.explorer``). 4. **stress**: one real stress run (profile ``stress``,
``--duration`` the stress seconds, the given
   seed), made in this process as ``takeover hunt`` makes its runs (the coordinator, then the checker),
   one at a time: two stress runs at once on 2 cores would slow each other's workers into timing
   differences that are not the mutant's.

A mutant no stage killed is a survivor, unless the reviewed table of
:mod:`takeover.mutation.equivalent` says why it cannot be told from the original: then it is
equivalent, with that reason. A mutant in the table that is killed anyway is counted killed, and
flagged: the table is wrong about it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover.mutation.generate import Mutant

KILLED, SURVIVED, EQUIVALENT = "killed", "survived", "equivalent"
CRASH, SCENARIOS, EXPLORE, STRESS = "crash", "scenarios", "explore", "stress"
STAGES = (CRASH, SCENARIOS, EXPLORE, STRESS)
STRESS_PROFILE = "stress"
DEFAULT_STRESS_SECONDS = 20.0
# Explore's budget is examples, deterministic from the seed: the same mutant gets the same examples on an idle
# machine and a loaded one (a budget of 5 s let a kill come or not with the load). The seconds are a safety net
# only, checked between batches of examples, for a mutant whose every call is slow.
DEFAULT_EXPLORE_EXAMPLES = 200
DEFAULT_EXPLORE_SECONDS = 60.0
SCENARIO_STEP_TIMEOUT = 5.0


@dataclass
class Outcome:
    """What became of one mutant."""

    mutant: Mutant
    verdict: str = SURVIVED
    stage: str | None = None  # the stage that killed it
    time_to_kill_s: float | None = None  # the killing stage's time to its verdict (stress: to the first violation)
    detail: str = ""  # why it was killed, in one line (the first departure, the invariants violated)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)  # each stage run: its wall time and result
    reason: str | None = None  # an equivalent mutant's reason
    table_wrong: bool = False  # listed as equivalent, but killed
    coverage: Any = None  # the model-coverage cells its stress run reached (summary.json's coverage.model)
    run_dir: str | None = None  # a survivor's stress run folder, kept

    def to_json(self) -> dict[str, Any]:
        out = self.mutant.to_json()
        out.update(verdict=self.verdict, stage=self.stage, time_to_kill_s=self.time_to_kill_s, detail=self.detail,
                   stages=self.stages)  # fmt: skip
        if self.reason is not None:
            out["reason"] = self.reason
        if self.table_wrong:
            out["equivalence_table_wrong"] = True
        if self.coverage is not None:
            out["coverage_model"] = self.coverage
        if self.run_dir is not None:
            out["run_dir"] = self.run_dir
        return out


@dataclass
class Settings:
    seed: int = 1
    stress_seconds: float = DEFAULT_STRESS_SECONDS
    explore_seconds: float = DEFAULT_EXPLORE_SECONDS  # the cap
    explore_examples: int = DEFAULT_EXPLORE_EXAMPLES  # the budget
    stages: tuple[str, ...] = STAGES
    database: str = "sqlite"
    # Stress-run the mutants the equivalence table lists too (minutes each): a wrong entry then shows as killed.
    # Off, they get the cheap stages only; a wrong entry then counts equivalent, which can only lower the score.
    verify_equivalents: bool = False


class Runner:
    """Writes each mutant into ``folder`` (on the import path while the runner is open) and judges it."""

    def __init__(self, folder: Path, runs: Path, settings: Settings, equivalent: dict[str, str]) -> None:
        self.folder = folder
        self.runs = runs
        self.settings = settings
        self.equivalent = equivalent
        self._old_path: str | None = None
        self.count = 0
        self.never_called: set[str] = set()  # operations the reference's stress run never called (baseline)

    def __enter__(self) -> Runner:
        self.folder.mkdir(parents=True, exist_ok=True)
        sys.path.insert(0, str(self.folder))
        self._old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join([str(self.folder), *filter(None, [self._old_path])])
        return self

    def __exit__(self, *exc: Any) -> None:
        if str(self.folder) in sys.path:
            sys.path.remove(str(self.folder))
        if self._old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = self._old_path

    def write(self, mutant: Mutant) -> str:
        """The mutant as a module of its own; its ``MODULE:ATTR``."""
        self.count += 1
        name = f"takeover_mutant_{self.count:03d}_{mutant.module.rpartition('.')[2]}"
        (self.folder / f"{name}.py").write_text(mutant.source, encoding="utf-8")
        # A runner before this one (in the same process) may have loaded a module of that name from its folder.
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return f"{name}:{mutant.attr}"

    def baseline(self, queue: str) -> dict[str, Any]:
        """One stress run of the unmutated queue, as each mutant's is made: it must be VALID (else a kill by
        stress means nothing), and the operations it never calls are those no mutant's run calls either:
        a mutant whose change sits only in their code is not stress-run (it survives that stage unseen)."""
        outcome = Outcome(Mutant("reference", queue.partition(":")[0], queue.partition(":")[2], "reference",
                                 "none", "the queue as it is", 0, "", ""))
        started = time.monotonic()
        got = self._stress(queue, outcome)  # the reference's own failure is raised, never None
        assert got is not None
        killed, _at, detail = got
        cells = ((outcome.coverage or {}).get("all_cells") or {}) if outcome.coverage else {}
        called = {k.split("/")[0] for k in cells}
        self.never_called = set(CONFIGURED_OPS) - called if cells else set()
        if outcome.run_dir:
            shutil.rmtree(outcome.run_dir, ignore_errors=True)
        return {"verdict": "INVALID" if killed else detail, "wall_s": round(time.monotonic() - started, 2),
                "never_called": sorted(self.never_called), "detail": detail if killed else ""}

    def run(self, mutant: Mutant, prior: dict[str, Any] | None = None) -> Outcome:
        """Judge one mutant; ``prior`` (its record in an earlier mutate.json) gives the stages already run."""
        outcome = Outcome(mutant)
        if prior is not None and prior.get("verdict") == KILLED:
            outcome.verdict, outcome.stage, outcome.detail = KILLED, prior["stage"], prior.get("detail", "")
            outcome.time_to_kill_s, outcome.stages = prior.get("time_to_kill_s"), dict(prior.get("stages", {}))
            if outcome.stage == SCENARIOS and EXPLORE in self.settings.stages and EXPLORE not in outcome.stages:
                self._explore_too(self.write(mutant), outcome)
            return self._judge(outcome)
        spec = self.write(mutant)
        steps: dict[str, Callable[[str, Outcome], tuple[bool, float | None, str] | None]] = {
            SCENARIOS: self._scenarios, EXPLORE: self._explore, STRESS: self._stress}
        for stage in (SCENARIOS, EXPLORE, STRESS):
            if stage not in self.settings.stages:
                continue
            done = (prior or {}).get("stages", {}).get(stage)
            if done is not None and done.get("run", True) and not done.get("killed"):
                outcome.stages[stage] = done  # run before, and it did not kill
                if prior and prior.get("detail", "").startswith(stage):
                    outcome.detail = prior["detail"]
                continue
            if stage == STRESS and mutant.id in self.equivalent and not self.settings.verify_equivalents:
                outcome.stages[stage] = {"run": False, "why": "listed as equivalent (--verify-equivalents runs it)"}
                continue
            ops = ops_of(mutant.site)
            if stage == STRESS and ops and set(ops) <= self.never_called:
                names = " or ".join(dict.fromkeys(o.partition("_")[0] for o in ops))
                outcome.stages[stage] = {"run": False, "why": f"the reference's stress run never calls {names}"}
                outcome.detail = (f"stress: not run: the reference queue's stress run never calls {names}, the only "
                                  f"operation this code serves")
                continue
            started = time.monotonic()
            got = steps[stage](spec, outcome)
            wall = round(time.monotonic() - started, 2)
            if outcome.verdict == KILLED:  # a crash, seen by the scenarios stage
                outcome.stages[stage] = {"wall_s": wall, "killed": True}
                outcome.time_to_kill_s = wall if outcome.time_to_kill_s is None else outcome.time_to_kill_s
                break
            if got is None:
                outcome.stages[stage] = {**outcome.stages.get(stage, {}), "wall_s": wall, "run": False}
                if "error" in outcome.stages[stage]:
                    outcome.detail = f"{stage}: no verdict, the stage failed: {outcome.stages[stage]['error']}"
                continue
            killed, at, detail = got
            outcome.stages[stage] = {**outcome.stages.get(stage, {}), "wall_s": wall, "killed": killed}
            if not killed and detail:
                outcome.detail = f"{stage}: {detail}"
            if killed:
                outcome.verdict, outcome.stage, outcome.detail = KILLED, stage, detail
                outcome.time_to_kill_s = wall if at is None else at
                break
        if outcome.stage == SCENARIOS and EXPLORE in self.settings.stages:
            self._explore_too(spec, outcome)
        return self._judge(outcome)

    def _explore_too(self, spec: str, outcome: Outcome) -> None:
        """A mutant the scenarios killed is a logic mutant (one process on the logical clock shows it): explore
        runs on it too, for the record (``stages.explore``), since explore must kill every logic mutant alone."""
        started = time.monotonic()
        got = self._explore(spec, outcome)
        if got is not None:
            killed, at, detail = got
            outcome.stages[EXPLORE] = {"wall_s": round(time.monotonic() - started, 2), "killed": killed,
                                       "time_to_kill_s": at, "detail": detail, "after_the_verdict": True}

    def _judge(self, outcome: Outcome) -> Outcome:
        """The reviewed table's word on a mutant no stage killed; a listed mutant that was killed is flagged."""
        reason = self.equivalent.get(outcome.mutant.id)
        if reason is not None:
            if outcome.verdict == KILLED:
                outcome.table_wrong = True
            else:
                outcome.verdict, outcome.reason = EQUIVALENT, reason
        return outcome

    # -- the stages ------------------------------------------------------------------------------------
    def _scenarios(self, spec: str, outcome: Outcome) -> tuple[bool, float | None, str]:
        from takeover._internal.scenario.replay import run_scenarios

        try:
            results = run_scenarios(spec, None, SCENARIO_STEP_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - does not import, or cannot be opened: a crash
            _crash(outcome, f"{type(exc).__name__}: {exc}")
            return True, None, outcome.detail
        ran = [s for r in results for s in r.steps if not s.skipped]
        if ran and all("raised" in s.observed for s in ran):
            _crash(outcome, f"every call raised: {ran[0].observed['raised']}")
            return True, None, outcome.detail
        failures = [line for r in results for line in r.failures()]
        return bool(failures), None, failures[0] if failures else ""

    def _explore(self, spec: str, outcome: Outcome) -> tuple[bool, float | None, str] | None:
        """``takeover._internal.explorer`` with a budget of examples (the seconds a cap); None (not run) when explore
        could not judge the mutant. Its time to kill is when the first departure came, before Hypothesis and
        the replay shrink it; the stage's record says which example that was (``examples_to_kill``), how many
        ran, and whether the cap cut the budget short (``capped``)."""
        from takeover._internal.explorer import explore_queue

        options: dict[str, Any] = {"seed": self.settings.seed, "examples": self.settings.explore_examples,
                                   "seconds": self.settings.explore_seconds,
                                   "shrink_budget": 0}  # the verdict is wanted here, not the minimal sequence
        try:
            result = explore_queue(spec, **options)
        except Exception as exc:  # noqa: BLE001 - explore could not judge this mutant: the stage did not run
            outcome.stages[EXPLORE] = {"run": False, "error": _first_line(f"{type(exc).__name__}: {exc}")}
            return None
        first = getattr(result, "first", None)
        record: dict[str, Any] = {"examples": result.examples}
        if first:
            record["examples_to_kill"] = int(first[1])
        elif result.examples < self.settings.explore_examples:
            record["capped"] = True
        outcome.stages[EXPLORE] = record
        if result.ok:
            return False, None, ""
        return True, None if not first else round(float(first[0]), 3), _first_line(result.message())

    def _stress(self, spec: str, outcome: Outcome) -> tuple[bool, float | None, str] | None:
        from takeover._internal.pipeline import check_and_report
        from takeover._internal.stress_run import run_once

        s = self.settings
        run_dir = self.runs / safe_name(outcome.mutant.id)
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        cfg = stress_config(spec, s.seed, s.stress_seconds, s.database, run_dir)
        try:
            result = run_once(cfg, run_dir)
            if result.interrupted:
                raise KeyboardInterrupt
            checked = check_and_report(run_dir, reports=False)
        except Exception as exc:  # noqa: BLE001 - the harness failed: no verdict, which is not a kill
            if outcome.mutant.id == "reference":
                raise
            outcome.stages[STRESS] = {"run": False, "error": _first_line(f"{type(exc).__name__}: {exc}"),
                                      "run_dir": str(run_dir)}
            return None
        summary = checked.summary
        fired = [n for n, inv in checked.invariants.items() if inv.valid is False]
        killed = checked.verdict is False
        if killed:
            first, _at_end = checked.first_violation(fired)
            shutil.rmtree(run_dir, ignore_errors=True)
            return True, first, "violated: " + ", ".join(f"{n} ({checked.invariants[n].violations})" for n in fired)
        model = (summary.get("coverage") or {}).get("model") if isinstance(summary, dict) else None
        outcome.coverage = coverage_of(outcome.mutant.site, model)
        outcome.run_dir = str(run_dir)
        word = "VALID" if checked.verdict is True else "INCONCLUSIVE"
        outcome.stages.setdefault(STRESS, {})["verdict"] = word
        cov = outcome.coverage
        if cov is not None and cov["ops"] and not cov["cells_of_its_ops"]:
            word += f" (the run never called {' or '.join(dict.fromkeys(o.partition('_')[0] for o in cov['ops']))})"
        return False, None, word


# Which contract operations a site's code serves, from the words of its name (a constant's or a method's):
# the model-coverage cells (takeover._internal.coverage_space) of those operations are where its change can matter.
_SITE_OPS = {"register": ("register",), "pick": ("claim",), "take": ("claim",), "claim": ("claim",),
             "finish": ("finish_done", "finish_uncertain"), "extend": ("extend",), "resolve": ("resolve",),
             "snapshot": ("snapshot",)}  # fmt: skip


# The operations a stress run calls only when its configuration says so (--reconcile): when the reference's run
# never called one, no mutant's run with the same configuration calls it either. Not extend: the stale_heartbeat
# fault calls it when its window comes, so whether a run calls it is the run's luck, not its configuration.
CONFIGURED_OPS = ("resolve",)


def ops_of(site: str) -> tuple[str, ...]:
    """The operations whose code ``site`` is (none for the schema, the checks of arguments, ...)."""
    low = site.lower()
    return tuple(op for word, ops in _SITE_OPS.items() if word in low for op in ops)


def coverage_of(site: str, model: Any) -> dict[str, Any] | None:
    """What a survivor's stress run reached of the model coverage: the cells of its site's operations,
    with their counts, and how many cells the run reached in all. None without ``coverage.model``."""
    if not isinstance(model, dict) or "cells" not in model:
        return None
    ops = ops_of(site)
    cells = {k: n for k, n in model["cells"].items() if k.split("/")[0] in ops}
    out = {"ops": list(ops), "cells_of_its_ops": cells, "reached": model.get("reached"),
           "possible": model.get("possible")}
    if site == "reference":
        out["all_cells"] = model["cells"]
    return out


def _crash(outcome: Outcome, detail: str) -> None:
    outcome.verdict, outcome.stage, outcome.detail = KILLED, CRASH, _first_line(detail)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def safe_name(mutant_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in mutant_id)


def stress_config(spec: str, seed: int, seconds: float, database: str, run_dir: Path) -> Any:
    """The config of a ``takeover stress --profile stress --duration S --seed N`` run of ``spec``,
    resolved as the command resolves it."""
    import dataclasses

    from takeover._internal.stress_run import resolve

    options = {"queue": spec, "profile": STRESS_PROFILE, "duration": float(seconds), "seed": seed, "db": database}
    return dataclasses.replace(resolve(options), out=str(run_dir))
