"""The selftest's runs: which (profile, faulted seconds, planted bugs, reference seeds), each a real
``takeover stress`` in a child process (takeover._internal.child_run.stress_command) or on a dask cluster
(takeover._internal.fanout), a planted bug tried seed after seed until caught; each try judged
(takeover._internal.selftest.verdict) and its line printed in order.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover._internal import db, store
from takeover._internal.child_run import stress_command
from takeover._internal.options import positive
from takeover._internal.selftest.verdict import (
    conclude,
    first_violation,
    has_fault,
    passed,
    ref_line,
    row_line,
    unreached_cells,
)
from takeover.contract import reference_queue
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:  # the selftest reads the summaries its runs wrote; it never runs the checker itself
    from takeover._internal.fanout.launch import Done, Launcher
    from takeover.summary_types import Summary

# The quick set holds bugs that any takeover exposes, wherever the displaced holder's late call
# falls: NoBumpOnTakeover repeats a generation on every takeover, StealsLiveLeases hands out a
# lease that every slow or paused holder still has. FinishIgnoresGeneration is caught only when
# the stale holder's finish lands inside the new holder's lease, a window of a few tens of ms
# that a loaded machine often misses in a 3 s run; the full selftest keeps it (with more tries).
QUICK = ("NoBumpOnTakeover", "StealsLiveLeases")
# The runs of the full selftest are the detection bench's (takeover.benchmarks.detection): 10 s of
# the default profile, where every planted bug was caught in 9 or 10 of 10 runs. Smoke runs (4 s,
# 3 workers, no arrivals) are hardly cheaper (a selftest of about 5 minutes either way) but too
# short for the bugs whose window takes an aimed fault and some luck: IdempotentFinish,
# NonAtomicClaim and RegisterReplaces were caught in 2 of 5 smoke runs each, so three tries missed
# one of them about half the time. --quick keeps smoke: its two bugs show in any run.
PROFILE, DURATION = "stress", 10.0
# The network era's bugs (--hosts) need a partition or a restart to meet a holder: 20 s runs, where each was
# caught in at least 9 of 10 (the detection bench with --hosts).
NETWORK_DURATION = 20.0
QUICK_PROFILE, QUICK_DURATION = "smoke", 3.0
RESULT_FILE = "selftest.json"  # in the runs' folder: what --json prints, for takeover merge of --shard folders


def profile_and_duration(args: argparse.Namespace) -> tuple[str, float | None]:
    """The profile and faulted seconds of every run; None keeps the profile's own duration."""
    if args.profile is None:
        profile, duration = (QUICK_PROFILE, QUICK_DURATION) if args.quick else (PROFILE, DURATION)
        return profile, args.duration if args.duration is not None else duration
    return args.profile, args.duration if args.duration is not None else QUICK_DURATION if args.quick else None


def run_selftest(args: argparse.Namespace, database: str) -> ExitCode:
    """The selftest of ``takeover selftest``'s options (``args``) on ``database`` (served by the caller): its
    lines printed as they come, ``selftest.json`` in the runs' folder, its exit code."""
    from takeover.queues.planted_postgres import planted_queues

    module, planted = planted_queues(database)
    network: tuple[str, ...] = ()
    if args.hosts:
        from takeover.queues import planted_network

        if db.kind(database) != db.POSTGRES or database != db.POSTGRES:
            raise UsageError("--hosts needs --db postgres (the runs start their own server on their network)")
        module, planted = planted_network.__name__, planted_network.PLANTED
        network = ("--hosts", str(args.hosts), *planted_network.FAULT_ARGS)
        if args.duration is None and args.profile is None and not args.quick:
            args.duration = NETWORK_DURATION
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    if args.duration is not None:
        positive("--duration", args.duration)  # the stress runs would refuse it, one run later
    unknown = [n for n in args.only if n not in planted]
    if unknown:
        raise UsageError(f"unknown planted queue {unknown[0]!r}; known: {', '.join(planted)}")
    names = args.only or (list(QUICK) if args.quick and not args.hosts else list(planted))
    ref_seeds = list(range(1, (1 if args.quick else args.seeds) + 1))
    shard: tuple[int, int] | None = getattr(args, "shard", None)
    if shard and not args.keep:
        raise UsageError("--shard needs --keep DIR: the shard's folder, which takeover merge joins with the others")
    if shard:  # planted bug i and reference seed i (from 0) go to shard i mod N + 1
        from takeover._internal.sweep.runner import shard_of

        order = [*names, *(f"reference-s{seed}" for seed in ref_seeds)]
        names, ref_seeds = shard_of(names, shard), shard_of(ref_seeds, shard)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="takeover-selftest-"))
    root.mkdir(parents=True, exist_ok=True)
    profile, duration = profile_and_duration(args)
    # The runs use this command's database: a private server is shared with them (takeover._internal.db.SERVER_ENV).
    extra = (*(("--duration", f"{duration:g}") if duration is not None else ()),
             *(("--db", db.redact(database)) if database != db.DEFAULT else ()),
             *(("--keep-db",) if args.keep_db else ()), *network)
    from takeover._internal.fanout.launch import open_launcher

    launcher = open_launcher(getattr(args, "cluster", None), db=database)
    try:
        results, refs = _runs(args, launcher, module, planted, names, ref_seeds, root, profile, extra, database)
    finally:
        launcher.close()
    doc = {"ok": passed(results, refs), "profile": profile, "duration": duration, "planted": results,
           "reference": refs, "runs": str(root)}
    store.write_json(root / RESULT_FILE, doc)
    if shard:
        from takeover._internal.fanout.merge import write_shard

        write_shard(root, "selftest", shard, order, {"profile": profile, "duration": duration})
    return conclude(doc, args.json)


def _runs(args: argparse.Namespace, launcher: Launcher, module: str, planted: dict[str, tuple[str, ...]],
          names: list[str], ref_seeds: list[int], root: Path, profile: str, extra: tuple[str, ...], database: str
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every planted bug's tries (seed 1, then 2, ... until caught, each try after the one before it) and the
    reference's seeds, through ``launcher``: here one run at a time in that order, as always; on a cluster
    the bugs side by side. Lines are printed in the same order either way."""
    from takeover._internal.fanout.launch import Job, announce, fanout_outcome, write_record

    out = sys.stdout
    chains: list[dict[str, Any]] = [{"queue": name, "expected": list(planted[name]), "caught": False, "tries": 0}
                                    for name in names]  # fmt: skip
    refs: list[dict[str, Any]] = []
    open_: dict[int, int] = {i: 1 for i in range(len(chains))}  # chain -> its next seed (absent: chain ended)
    ref_todo, printed = list(ref_seeds), 0
    done_all: list[Done] = []
    announce(launcher, out if not args.json else sys.stderr)

    # A planted module may name the options a bug's runs need beyond the profile (planted_redis.STRESS_ARGS).
    own: dict[str, tuple[str, ...]] = getattr(importlib.import_module(module), "STRESS_ARGS", {})

    def job(chain: int, seed: int) -> Job:
        queue = f"{module}:{chains[chain]['queue']}" if chain >= 0 else reference_queue(database)
        folder = root / (f"{chains[chain]['queue']}-s{seed}" if chain >= 0 else f"reference-s{seed}")
        options = (*extra, *own.get(chains[chain]["queue"], ())) if chain >= 0 else extra
        argv = ["stress", "--profile", profile, "--queue", queue, "--seed", str(seed), *options]
        return Job(folder.name, folder, argv, lambda: stress_command(queue, seed, profile, folder, options), (),
                   len(done_all), {"chain": chain, "seed": seed})

    def flush() -> None:
        nonlocal printed
        while printed < len(chains) and printed not in open_ and "running" not in chains[printed]:
            if not args.json:
                out.write(row_line(chains[printed]) + "\n")
                out.flush()
            printed += 1

    try:
        while True:
            while launcher.free():  # the lowest chain with a try to make, else the next reference seed
                ready = [c for c in sorted(open_) if "running" not in chains[c]]
                if ready:
                    chains[ready[0]]["running"] = True
                    launcher.submit(job(ready[0], open_[ready[0]]))
                elif ref_todo and (printed == len(chains) or launcher.remote):
                    launcher.submit(job(-1, ref_todo.pop(0)))
                else:
                    break
            if not launcher.busy():
                break
            done = launcher.next_done()
            done_all.append(done)
            chain, seed = done.job.info["chain"], done.job.info["seed"]
            if done.lost:  # lost with its workers: no evidence either way (reported; the selftest fails)
                if chain < 0:
                    refs.append({"seed": seed, "valid": None, "exit": None, "seconds": 0.0,
                                 "not_holding": [f"run lost: {done.note}"]})  # fmt: skip
                    continue
                chains[chain].pop("running")
                chains[chain]["lost"] = done.note
                if seed >= args.seeds:
                    del open_[chain]
                else:
                    open_[chain] = seed + 1
                flush()
                continue
            code, took, summary = _outcome(done)
            if chain < 0:
                fired = [n for n, inv in summary["invariants"].items() if inv["valid"] is not True]
                refs.append({"seed": seed, "valid": summary["valid"], "exit": code, "seconds": round(took, 1),
                             "not_holding": fired})  # fmt: skip
                continue
            row = chains[chain]
            del row["running"]
            if _tried(row, seed, code, took, summary, done.job.run_dir, args.seeds):
                del open_[chain]
            else:
                open_[chain] = seed + 1
            flush()
    finally:
        if launcher.busy():
            launcher.cancel()
        if launcher.remote:
            write_record(root, done_all, launcher)
    refs.sort(key=lambda r: r["seed"])
    if not args.json:
        for ref in refs:
            out.write(ref_line(ref) + "\n")
        out.flush()
    fanout_outcome("selftest", "", [d for d in done_all if d.lost])
    return chains, refs


def _outcome(done: Done) -> tuple[int, float, Summary]:
    """A finished run's exit code, wall time and summary: ``run_stress``'s here, the gathered folder's on a
    cluster."""
    if done.value is not None:
        code, took, summary = done.value
        return code, took, summary
    summary = store.read_summary(done.job.run_dir)
    if summary is None:
        raise UsageError(f"selftest: the stress run {done.job.key} failed (exit {done.exit_code}): {done.note}")
    return int(done.exit_code or 0), done.wall_s, summary


def _tried(row: dict[str, Any], seed: int, code: int, took: float, summary: Summary, run_dir: Path,
           seeds: int) -> bool:
    """Note one try of a planted bug on its row; True when its chain ends (caught, out of seeds, or the
    fault it needs absent from the profile)."""
    from takeover.queues.planted import NEEDS_FAULT

    name, expected = row["queue"], row["expected"]
    row["tries"] += 1
    missing = unreached_cells(name, summary)
    if missing:
        row.setdefault("unreached", {})[seed] = missing
    fired = [n for n, inv in summary["invariants"].items() if inv["valid"] is False]
    if any(n in fired for n in expected):
        row.update(caught=True, seed=seed, seconds=round(took, 1), violated=fired,
                   first_violation_at=first_violation(summary, tuple(expected)), run_dir=str(run_dir))
        return True
    row.update(violated=fired, seconds=round(took, 1))
    need = NEEDS_FAULT.get(name)
    if need and not has_fault(summary, need):
        row["absent_fault"] = need  # no other seed of this profile can catch it either
        return True
    return seed >= seeds


