"""Detection power: how often, and how soon, does a stress run catch each planted bug, and how much
of that do the aimed faults buy?

Why: takeover exists to find lease bugs, and a checker that is right about a run proves nothing
when the run never lines up the window a bug needs. Each queue of
:data:`takeover.queues.planted.PLANTED` is the reference queue with one realistic bug; this module
runs each under N real ``takeover stress`` runs (profile ``stress``, seeds 1..N, ``--duration S``,
the derived drain timeout, as ``takeover selftest`` runs them, through its own helper), twice per
seed: once as the profile is (``aimed``), once with every aimed fault's rate set to 0
(``random``: the random and phase-aimed kills, pauses, lost replies and slow tasks only), so that
the gain of the aimed faults shows as ratios measured in the same bench run. Per bug and mode:

- ``caught_fraction``: the share of runs in which one of the bug's expected invariants is violated;
- ``median_first_violation_s``: over the runs that caught it, the median time from the run's
  ``run start`` record to the first violating operation (:attr:`InvariantResult.first_at`), or to
  the first mid-run snapshot probe that showed a mismatch (``state_matches_history``, with the
  profile's ``probe_rate``). A violation only the final snapshot shows (``no_lost_task``, or
  ``state_matches_history`` when no probe saw it) has no such moment; those runs count with the
  time of the ``drain_end`` record, after which the snapshot is taken, since that is when the
  evidence exists (``at_end`` says how many did);

and per mode ``bugs_per_minute``: caught runs per minute of wall time spent in that mode's runs
(faults, drain and check of every run, caught or not), and (added later) ``model_coverage``: how many of the
spec's situations (takeover._internal.coverage_space cells) the mode's runs reached, median and range over every run
of the mode, the reference queue's included. The reference queue runs over the same seeds
in both modes: a false alarm there (an INVALID run) is a release blocker, so its folder is kept.

Targets: caught in at least 95 % of runs, median time to the first violation at most 3 s. The time
target cannot apply to a bug whose every expected invariant is judged on the final snapshot
(:data:`SNAPSHOT_ONLY`): no operation of such a run breaks a rule (a task that is never claimable),
so the evidence exists only once the drain ended (an off-by-one in ``snapshot()`` was such a bug
until the mid-run probes: a probe shows it within a fraction of a second). For those the
target that applies instead is "caught at the end of the run" in at least 95 % of runs, and the
output says so with that reason.

    python -m takeover.benchmarks.detection [--bugs NAME,...] [--seeds N] [--seconds S] [--jobs J]
        [--modes aimed,random] [--no-reference] [--keep DIR] [--json]

``--jobs`` runs that many stress runs at once (default 2, one per core). Runs are submitted seed
by seed with a bug's aimed and random runs next to each other, so the two runs a ratio compares
mostly run side by side, under the same load. The windows a bug needs are milliseconds wide and
the machine is shared: timing figures are noisy, and ``load_avg`` records how loaded it was. Runs
go in a temp dir that is removed (``--keep DIR`` keeps every run folder; an INVALID reference run
is kept anyway); Ctrl-C kills every run this module started before it returns. The table it prints is
:mod:`takeover.benchmarks.detection_table`'s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover.benchmarks.detection_table import TARGET_CAUGHT_FRACTION, TARGET_MEDIAN_FIRST_S, fmt_s, table
from takeover.errors import UsageError, under_error_contract
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:  # the checker (pandas) is loaded when a run is checked, not when this module is imported
    from takeover._internal.checker import CheckResult
    from takeover._internal.fanout.launch import Launcher

PROFILE = "stress"
SEEDS = 10
JOBS = 2
MODES = ("aimed", "random")
REFERENCE = "reference"
# Judged on the final snapshot alone: a bug that only these catch has no violating operation to time.
# ``state_matches_history`` is not among them: the stress profile's mid-run snapshot probes
# (``probe_rate``, takeover._internal.checker.probes) date its violations at the probe that saw them.
SNAPSHOT_ONLY = frozenset({"no_lost_task"})
END_ONLY_REASON = ("its only evidence is the final snapshot after the drain ({}): no operation of the run "
                   "breaks a rule, so there is no moment before the end to time; the target that applies is "
                   "caught at the end of the run")


def mode_args(mode: str) -> tuple[str, ...]:
    """The stress options of a mode: ``aimed`` is the profile as it is, ``random`` sets every aimed
    fault's rate to 0 (and nothing else), so the two differ by the aimed faults alone."""
    from takeover._internal.options import AIMED_FAULTS, FAULT_RATES

    if mode == "aimed":
        return ()
    flags = {o.field.removeprefix("faults."): o.flag for o in FAULT_RATES}
    return tuple(a for kind in AIMED_FAULTS for a in (flags[kind], "0"))


def suite(hosts: int = 0) -> tuple[dict[str, tuple[str, ...]], str, str, tuple[str, ...]]:
    """The planted bugs, their module, the reference queue and the stress options every run gets: the
    SQLite set, or with ``hosts`` the network era's (takeover.queues.planted_network) on PostgreSQL with that
    many hosts and the network faults alone (the process faults off: what catches them is the network)."""
    from takeover.contract import POSTGRES_REFERENCE_QUEUE, REFERENCE_QUEUE

    if hosts > 0:
        from takeover.queues import planted_network

        return (planted_network.PLANTED, planted_network.__name__, POSTGRES_REFERENCE_QUEUE,
                ("--db", "postgres", "--hosts", str(hosts), *planted_network.FAULT_ARGS))
    from takeover.queues import planted

    return planted.PLANTED, planted.__name__, REFERENCE_QUEUE, ()


def run_once(name: str, expected: tuple[str, ...], seed: int, seconds: float, root: Path,
             profile: str = PROFILE, mode: str = "aimed", keep: bool = False, hosts: int = 0) -> dict[str, Any]:
    """One real stress run of planted queue ``name`` (or the reference queue, ``name`` =
    :data:`REFERENCE`), checked; its folder is removed afterwards unless ``keep`` or the reference
    queue failed (a false alarm: its folder is the evidence). ``hosts``: the network era's bugs (:func:`suite`)."""
    from takeover._internal.child_run import stress_command

    queue, out, extra = run_args(name, seed, seconds, root, mode, hosts)
    code, took, _ = stress_command(queue, seed, profile, out, extra)
    return judge(name, expected, seed, mode, out, code, took, keep)


def run_args(name: str, seed: int, seconds: float, root: Path, mode: str, hosts: int
             ) -> tuple[str, Path, tuple[str, ...]]:
    """The queue, the run folder and the stress options of one run (beside --profile, --queue, --seed)."""
    _, module, reference, extra = suite(hosts)
    queue = reference if name == REFERENCE else f"{module}:{name}"
    return queue, root / run_key((name, mode, seed)), ("--duration", f"{seconds:g}", *mode_args(mode), *extra)


def judge(name: str, expected: tuple[str, ...], seed: int, mode: str, out: Path, code: int, took: float,
          keep: bool) -> dict[str, Any]:
    """One finished run's row (checked here, wherever it ran); its folder removed unless kept."""
    from takeover._internal.checker.check import analyse

    kept = keep
    try:
        # Checked again in this process: the earliest violating operation's time is on the
        # checker's results, not in summary.json (whose examples hold only the first few).
        result = analyse(out)
        kept = kept or (name == REFERENCE and result.verdict is not True)
    finally:
        if not kept:
            shutil.rmtree(out, ignore_errors=True)
    fired = [n for n, inv in result.invariants.items() if inv.valid is False]
    hits = [n for n in expected if n in fired]
    first, at_end = result.first_violation(hits)
    timed = sorted((t, n) for n in hits if (t := result.invariants[n].first_at) is not None)
    first_invariant = timed[0][1] if timed else hits[0] if hits else None
    row: dict[str, Any] = {"seed": seed, "mode": mode, "exit": int(code), "caught": bool(hits), "violated": fired,
                           "first_violation_s": first, "first_invariant": first_invariant, "at_end": at_end,
                           "wall_s": round(took, 2), "aimed": _aimed(result)}
    model = result.summary["coverage"].get("model")
    if model is not None:  # the spec's situations the run reached (takeover._internal.checker.model_coverage)
        row["model"] = {"reached": model["reached"], "possible": model["possible"]}
    if name != REFERENCE:  # the defects the diagnosis names, each once, in the order it tells them
        row["defects"] = list(dict.fromkeys(e["defect"] for e in result.summary.get("diagnosis", [])))
    if name == REFERENCE:
        row["valid"] = result.verdict
        row["not_holding"] = {n: inv.to_json()["examples"][:1] for n, inv in result.invariants.items()
                              if inv.valid is not True}
    if kept:
        row["run_dir"] = str(out)
    return row


def _aimed(result: CheckResult) -> dict[str, dict[str, Any]]:
    """Per aimed fault kind, the windows the run hit and missed and why (the checker's coverage):
    to tell a miss of the bug from a miss of the window it needs."""
    aimed = result.summary["coverage"].get("aimed", {})
    return {k: {"hit": a["hit"], "missed": a["missed"], "reasons": a["reasons"]} for k, a in aimed.items()}


def summarise(name: str, expected: tuple[str, ...], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One bug's figures from its runs of one mode, each target with the verdict that applies."""
    runs = sorted(runs, key=lambda r: r["seed"])
    caught = [r for r in runs if r["caught"]]
    times = [r["first_violation_s"] for r in caught if r["first_violation_s"] is not None]
    median = round(statistics.median(times), 3) if times else None
    fraction = round(len(caught) / len(runs), 3) if runs else 0.0
    caught_pass = fraction >= TARGET_CAUGHT_FRACTION
    first_pass = median is not None and median <= TARGET_MEDIAN_FIRST_S
    end_only = bool(expected) and set(expected) <= SNAPSHOT_ONLY
    defect = planted_defect(name)
    wordings = planted_wordings(name)  # the same defect in each database's words (a claim race)
    return {
        "expected": list(expected), "runs": len(runs), "caught": len(caught), "caught_fraction": fraction,
        # From a violation to the line to fix: the caught runs whose diagnosis names the planted defect, and
        # those that name it alone (no symptom told as another defect's).
        "defect": defect,
        "diagnosis_names_defect": sum(bool(wordings & set(r.get("defects", []))) for r in caught),
        "diagnosis_names_only_defect": sum(len(r.get("defects", [])) == 1 and r["defects"][0] in wordings
                                           for r in caught),
        "median_first_violation_s": median, "at_end": sum(r["at_end"] for r in caught),
        "caught_pass": caught_pass,
        "first_pass": first_pass,
        # What the time target means for this bug, and its verdict: the median for a bug some
        # operation shows, "caught at the end" (the caught fraction, every catch at the end) for one
        # only the final snapshot shows.
        "time_target": "at_end" if end_only else "median_first_violation_s",
        "time_target_reason": END_ONLY_REASON.format(", ".join(expected)) if end_only else "",
        "time_pass": caught_pass and len(caught) == sum(r["at_end"] for r in caught) if end_only else first_pass,
        "per_run": runs,
    }


def planted_defect(name: str) -> str | None:
    """The defect the diagnosis must name for planted bug ``name`` (None for the reference queue)."""
    from takeover._internal.checker.patterns import PATTERNS
    from takeover.queues.planted import DIAGNOSED

    if name not in DIAGNOSED:
        return None
    invariant, pattern = DIAGNOSED[name]
    return PATTERNS[invariant][pattern].defect


def planted_wordings(name: str) -> set[str]:
    """Every wording of planted bug ``name``'s defect: the SQLite one (:func:`planted_defect`) and, for a defect
    each database makes in its own way, the others (empty for the reference queue)."""
    from takeover._internal.checker.patterns import PATTERNS
    from takeover.queues.planted import DIAGNOSED

    if name not in DIAGNOSED:
        return set()
    invariant, pattern = DIAGNOSED[name]
    p = PATTERNS[invariant][pattern]
    return {p.defect, *(p.by_database or {}).values(), *([p.elsewhere] if p.elsewhere else [])}


def _ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when either is missing or den is 0 (JSON has no infinity)."""
    return round(num / den, 2) if num is not None and den else None


def _per_minute(runs: list[dict[str, Any]]) -> dict[str, Any]:
    caught = sum(r["caught"] for r in runs)
    minutes = sum(r["wall_s"] for r in runs) / 60
    return {"caught_runs": caught, "total_runs": len(runs), "run_minutes": round(minutes, 2),
            "bugs_per_minute": round(caught / minutes, 3) if minutes else 0.0}


def _model_coverage(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The model coverage of a mode's runs (every queue's, the reference's included): how many of the possible
    cells a run reached, the median and the range, as counts and as fractions of the possible cells."""
    rows = [r["model"] for r in runs if r.get("model") and r["model"]["possible"]]
    if not rows:
        return {"runs": 0}
    fractions = [m["reached"] / m["possible"] for m in rows]
    return {"runs": len(rows), "possible": max(m["possible"] for m in rows),
            "median_reached": statistics.median(m["reached"] for m in rows),
            "median_fraction": round(statistics.median(fractions), 3),
            "min_fraction": round(min(fractions), 3), "max_fraction": round(max(fractions), 3)}


def _reference(runs: list[dict[str, Any]]) -> dict[str, Any]:
    runs = sorted(runs, key=lambda r: r["seed"])
    invalid = [{"seed": r["seed"], "valid": r["valid"], "not_holding": r["not_holding"], "run_dir": r.get("run_dir")}
               for r in runs if r["valid"] is not True]
    return {"runs": len(runs), "valid": len(runs) - len(invalid), "invalid": invalid,
            "wall_s": [r["wall_s"] for r in runs]}


def measure(bugs: list[str] | None = None, seeds: int = SEEDS, seconds: float = 10.0, jobs: int = JOBS,
            profile: str = PROFILE, progress: Callable[[str], None] | None = None,
            modes: tuple[str, ...] = MODES, reference: bool = True, keep: Path | None = None,
            hosts: int = 0, launcher: Launcher | None = None) -> dict[str, Any]:
    """Every planted bug (or ``bugs``) over seeds 1..``seeds`` in each mode, and the reference queue
    over the same seeds: the figures bench.json keeps under ``detection``.

    The keys of the first mode (``aimed`` by default) stay at the top level as they always were;
    each other mode's figures go under its own key (``random`` as ``random_only``), and ``gain``
    holds the ratios aimed against random. With ``hosts``: the network era's bugs (:func:`suite`), in
    one mode (their runs have no aimed faults to take away)."""
    made = make_runs(bugs, seeds, seconds, jobs, profile, progress, modes, reference, keep, hosts, launcher)
    return figures(made)


def run_order(names: list[str], seeds: int, modes: tuple[str, ...], reference: bool) -> list[tuple[str, str, int]]:
    """Every run of a detection bench as (queue, mode, seed), in the order they are started: seed by seed,
    a bug's modes next to each other (what a ratio compares runs side by side). ``--shard I/N`` makes runs
    I, I+N, ... of this list (:func:`takeover._internal.sweep.runner.shard_of`)."""
    queues = [*names, *([REFERENCE] if reference else [])]
    return [(n, m, s) for s in range(1, seeds + 1) for n in queues for m in modes]


def run_key(run: tuple[str, str, int]) -> str:
    """A run's name in a shard's ``shard.json`` order (and its folder's): ``NAME-MODE-sSEED``."""
    n, m, s = run
    return f"{n}-{m}-s{s}"


def make_runs(bugs: list[str] | None = None, seeds: int = SEEDS, seconds: float = 10.0, jobs: int = JOBS,
              profile: str = PROFILE, progress: Callable[[str], None] | None = None,
              modes: tuple[str, ...] = MODES, reference: bool = True, keep: Path | None = None,
              hosts: int = 0, launcher: Launcher | None = None, shard: tuple[int, int] | None = None,
              ) -> dict[str, Any]:
    """The runs of :func:`measure` (only shard ``I/N`` of :func:`run_order` with ``shard``), each judged:
    the config, one row per run (its ``queue`` beside :func:`judge`'s keys) and the timings of the making,
    which :func:`figures` turns into the bench's figures (``takeover merge`` gives it every shard's rows)."""
    from takeover._internal.sweep.runner import shard_of

    PLANTED = suite(hosts)[0]  # noqa: N806 - the table, as the SQLite one is named
    if hosts > 0:
        modes = ("aimed",)

    names = bugs or list(PLANTED)
    unknown = [n for n in names if n not in PLANTED]
    if unknown:
        raise UsageError(f"unknown planted bug {unknown[0]!r}; known: {', '.join(PLANTED)}")
    if seeds < 1 or jobs < 1 or seconds <= 0:
        raise UsageError("--seeds and --jobs must be at least 1, --seconds above 0")
    if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
        raise UsageError(f"--modes takes one or both of {', '.join(MODES)}, got {','.join(modes) or 'nothing'}")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    root = keep if keep is not None else Path(tempfile.mkdtemp(prefix="takeover-detection-"))
    started = time.monotonic()
    load_before = [round(x, 2) for x in os.getloadavg()]
    order = shard_of(run_order(names, seeds, modes, reference), shard)
    rows: list[dict[str, Any]] = []

    def done(n: str, r: dict[str, Any]) -> None:
        rows.append({"queue": n, **r})
        if progress:
            progress(_progress_line(n, r))

    if launcher is not None and launcher.remote:
        jobs = launcher.slots  # what ran at once, in the figures' "jobs"
        try:
            _on_cluster(launcher, done, PLANTED, order, seconds, root, profile, keep is not None, hosts)
        finally:
            if keep is None:
                _remove_unless_kept(root)
    else:
        pool = ThreadPoolExecutor(max_workers=jobs)
        try:
            futures = {pool.submit(run_once, n, PLANTED.get(n, ()), s, seconds, root, profile, m, keep is not None,
                                   hosts): n for n, m, s in order}
            for fut in as_completed(futures):
                done(futures[fut], fut.result())
        except BaseException:
            # Ctrl-C (or a failed run): no new run starts, and every run still going is killed with
            # everything it started, before the threads waiting on them are joined.
            pool.shutdown(wait=False, cancel_futures=True)
            from takeover._internal.child_run import stop_all

            stop_all()  # each run with everything it started (takeover._internal.child_run)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if keep is None:
                _remove_unless_kept(root)
    return {"config": {"bugs": names, "seeds": seeds, "seconds": seconds, "profile": profile, "modes": list(modes),
                       "reference": reference, "hosts": hosts},
            "jobs": jobs, "rows": rows,
            "load_avg": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
            "elapsed_s": round(time.monotonic() - started, 1),
            **({"runs_dir": str(root)} if keep is not None or root.exists() else {})}  # fmt: skip


def figures(made: dict[str, Any]) -> dict[str, Any]:
    """The figures bench.json keeps under ``detection``, from the runs :func:`make_runs` made (or every
    shard's, joined): the rows are taken in seed order, so the figures do not depend on which run ended first."""
    config = made["config"]
    planted, names, modes = suite(config["hosts"])[0], config["bugs"], tuple(config["modes"])
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in made["rows"]:
        r = dict(row)
        results.setdefault((r.pop("queue"), r["mode"]), []).append(r)
    first = modes[0]
    per_bug = {n: summarise(n, planted[n], results.get((n, first), [])) for n in names}
    fig: dict[str, Any] = {
        "profile": config["profile"], "seeds": config["seeds"], "seconds": config["seconds"], "jobs": made["jobs"],
        "targets": {"caught_fraction": f">= {TARGET_CAUGHT_FRACTION:g}",
                    "median_first_violation_s": f"<= {TARGET_MEDIAN_FIRST_S:g}"},
        "bugs": per_bug,
        **_per_minute([r for n in names for r in results.get((n, first), [])]),
        "modes": list(modes),
        **({"hosts": config["hosts"]} if config["hosts"] > 0 else {}),
    }  # fmt: skip
    queues = [*names, *([REFERENCE] if config["reference"] else [])]
    fig["model_coverage"] = _model_coverage([r for n in queues for r in results.get((n, first), [])])
    for mode in modes[1:]:
        mode_key = _mode_key(mode)
        for n in names:
            per_bug[n][mode_key] = summarise(n, planted[n], results.get((n, mode), []))
        fig[mode_key] = _per_minute([r for n in names for r in results.get((n, mode), [])])
        fig[mode_key]["model_coverage"] = _model_coverage([r for n in queues for r in results.get((n, mode), [])])
    if modes == MODES:
        fig["gain"] = _gain(fig)
    fig["pass"] = {
        "caught": all(b["caught_pass"] for b in per_bug.values()),
        "time": all(b["time_pass"] for b in per_bug.values()),
    }
    if config["reference"]:
        fig["reference"] = {_mode_key(m): _reference(results.get((REFERENCE, m), [])) for m in modes}
        fig["pass"]["reference"] = all(not ref["invalid"] for ref in fig["reference"].values())
    fig["load_avg"] = made["load_avg"]
    fig["elapsed_s"] = made["elapsed_s"]
    if "runs_dir" in made:
        fig["runs_dir"] = made["runs_dir"]
    return fig


def _on_cluster(launcher: Launcher, done: Callable[[str, dict[str, Any]], None], planted: dict[str, tuple[str, ...]],
                order: list[tuple[str, str, int]], seconds: float, root: Path, profile: str, keep: bool,
                hosts: int) -> None:
    """The same runs as the local pool's, in the same order, on a dask cluster (takeover._internal.fanout): each
    gathered run is judged here as a local one is, and handed to ``done``."""
    from takeover._internal.fanout.launch import Job

    pending = list(enumerate(order))
    try:
        while pending or launcher.busy():
            while pending and launcher.free():
                index, (n, m, s) = pending.pop(0)
                queue, out, extra = run_args(n, s, seconds, root, m, hosts)
                argv = ["stress", "--profile", profile, "--queue", queue, "--seed", str(s), *extra]
                launcher.submit(Job(out.name, out, argv, lambda: None, (), index, {"key": (n, m, s)}))
            finished = launcher.next_done()
            n, m, s = finished.job.info["key"]
            if finished.lost or finished.exit_code == ExitCode.USAGE:
                raise UsageError(f"detection: the run {finished.job.key} failed on the cluster: {finished.note}")
            done(n, judge(n, planted.get(n, ()), s, m, finished.job.run_dir, int(finished.exit_code or 0),
                          finished.wall_s, keep))
    except BaseException:
        launcher.cancel()
        raise


def _mode_key(mode: str) -> str:
    return "aimed" if mode == "aimed" else f"{mode}_only"


def _gain(fig: dict[str, Any]) -> dict[str, Any]:
    """What the aimed faults buy, per bug and overall: caught fraction aimed/random (above 1: caught
    more often), median first violation random/aimed (above 1: caught sooner), bugs per minute
    aimed/random. None where the denominator is 0 or missing (random never caught it, say)."""
    per_bug = {}
    for n, b in fig["bugs"].items():
        rnd = b["random_only"]
        per_bug[n] = {"caught_fraction": _ratio(b["caught_fraction"], rnd["caught_fraction"]),
                      "median_first_violation": _ratio(rnd["median_first_violation_s"], b["median_first_violation_s"])}
    return {"bugs": per_bug,
            "bugs_per_minute": _ratio(fig["bugs_per_minute"], fig["random_only"]["bugs_per_minute"])}


def _remove_unless_kept(root: Path) -> None:
    """Remove the temp dir, unless a run folder was kept in it (an INVALID reference run)."""
    if root.exists() and not any(root.iterdir()):
        root.rmdir()
    elif root.exists():
        for child in root.iterdir():  # half-written folders of runs that were killed
            if not (child / "summary.json").exists():
                shutil.rmtree(child, ignore_errors=True)


def _progress_line(name: str, r: dict[str, Any]) -> str:
    if name == REFERENCE:
        verdict = "VALID" if r["valid"] is True else f"{'INVALID' if r['valid'] is False else 'INCONCLUSIVE'}: " \
                  f"{', '.join(r['not_holding'])} ({r.get('run_dir')})"
        return f"{name:<24} {r['mode']:<6} seed {r['seed']}: {verdict}, run {r['wall_s']:.1f} s"
    when = fmt_s(r["first_violation_s"], r["at_end"])
    aimed = " ".join(f"{k} {v['hit']}/{v['hit'] + v['missed']}" for k, v in r["aimed"].items())
    return (f"{name:<24} {r['mode']:<6} seed {r['seed']}: {'caught' if r['caught'] else 'missed'}, "
            f"first violation {when}, run {r['wall_s']:.1f} s" + (f"; aimed hits {aimed}" if aimed else ""))


def main(argv: list[str] | None = None) -> ExitCode:
    parser = argparse.ArgumentParser(prog="python -m takeover.benchmarks.detection",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bugs", default="", help="comma-separated planted bugs (default: all)")
    parser.add_argument("--seeds", type=int, default=SEEDS, help=f"runs per bug and mode, seeds 1..N (default {SEEDS})")
    parser.add_argument("--seconds", type=float, default=10.0, help="--duration of each run (default 10)")
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"runs at once (default {JOBS}, one per core)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="aimed (the profile), random (every aimed fault rate 0), or both (default)")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the reference queue's runs (the false-alarm check)")
    parser.add_argument("--keep", metavar="DIR", help="keep every run folder in DIR (default: a temp dir, removed)")
    parser.add_argument("--hosts", type=int, default=0, metavar="N",
                        help="the network era's planted bugs (takeover.queues.planted_network) on PostgreSQL with N "
                             "hosts and the network faults alone (needs root)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    bugs = [b.strip() for b in args.bugs.split(",") if b.strip()]
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())

    def body() -> ExitCode:
        fig = measure(bugs or None, args.seeds, args.seconds, args.jobs, modes=modes,
                      reference=not args.no_reference, keep=Path(args.keep) if args.keep else None, hosts=args.hosts,
                      progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(json.dumps(fig, indent=2) if args.json else table(fig))
        return ExitCode.VALID

    return ExitCode(under_error_contract(body, "detection", interrupted="interrupted; every run was stopped"))


if __name__ == "__main__":
    sys.exit(main())
