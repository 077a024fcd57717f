"""``takeover selftest``: prove the checker's power — every planted bug caught, the reference passes.

Each run is a real ``takeover stress --profile stress --duration 10`` (the detection bench's run;
``--quick``: 3 s of profile ``smoke``) in a child process (real workers, real signals), checked by
the same checker users get. A planted bug counts as caught when one of the
invariants it targets is violated; the time to detection is the wall time of the run that caught
it, and when the first violation happened in that run. Each planted bug declares the model-coverage cells
its defect lives on (takeover.queues.planted.NEEDS_CELLS): a run on it that reached none of them could
not have shown the bug, and says so (NEVER REACHED); the selftest fails when no run of the bug reached
one, or the run that caught it did not (:func:`cells_failed`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover import db, store
from takeover.child_run import stress_in_child
from takeover.contract import reference_queue
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode
from takeover.options import add_db_options, db_given, positive

if TYPE_CHECKING:  # the selftest reads the summaries its runs wrote; it never runs the checker itself
    from takeover.fanout.launch import Done, Launcher
    from takeover.summary_types import Summary

HELP = "run planted-bug queues and the reference queue under short stress runs: is every bug caught?"
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


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help=f"only {', '.join(QUICK)} and one reference seed, {QUICK_DURATION:g} s faulted phases of "
                             f"profile {QUICK_PROFILE} (for the test suite)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="seeds for the reference queue; a planted bug may use up to this many tries (default 3)")
    parser.add_argument("--profile",
                        help=f"stress profile for every run (default {PROFILE}; {QUICK_PROFILE} with --quick)")
    parser.add_argument("--duration", type=float, metavar="SECONDS",
                        help=f"faulted seconds of every run (default {DURATION:g} with the default profile, "
                             f"{QUICK_DURATION:g} with --quick, the profile's own with --profile)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only this planted queue (repeatable)")
    parser.add_argument("--keep", metavar="DIR", help="keep the run folders in DIR (default: a temp dir)")
    parser.add_argument("--hosts", type=int, default=0, metavar="N",
                        help="the network era's planted bugs instead (takeover.queues.planted_network), each run on N "
                             f"hosts under the network faults alone, {NETWORK_DURATION:g} s unless --duration; needs "
                             "--db postgres and root")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    add_db_options(parser)
    from takeover.options import add_fanout_options

    add_fanout_options(parser)  # --shard I/N needs --keep DIR: the shard's folder, for takeover merge


# The example field that holds the time of the violating operation itself, per invariant. The
# examples also name earlier operations that are not wrong on their own (the accepted finish before a
# reclaim, the previous claim before a repeated generation): taking the earliest time of any field
# dated a RegisterReplaces run's reclaim at 13 s by the first, legitimate finish at 2 s.
VIOLATING_AT = {"finish_within_lease": "now", "no_stale_commit": "finish_at",
                "no_reclaim_after_terminal": "reclaimed_at", "generation_monotonic": "claimed_at",
                "lease_exclusive": "granted_now", "single_finish": "finished_at"}


def _first_violation(summary: Summary, names: tuple[str, ...]) -> float | None:
    """The earliest time of a violating operation among the examples of the violated ``names``
    (:data:`VIOLATING_AT`; another invariant's examples by every ``*_at``/``now`` field). A list of
    times is every accepted finish of one task (single_finish's ``finished_at``): the repeat exists
    from its second."""
    times = [t for n in names if summary["invariants"][n]["valid"] is False
             for ex in summary["invariants"][n]["examples"] for k, v in ex.items()
             if (k == VIOLATING_AT[n] if n in VIOLATING_AT else k.endswith(("_at", "now")))
             for t in (sorted(v)[1:2] if isinstance(v, list) else [v])
             if isinstance(t, int | float) and not isinstance(t, bool)]
    return min(times) if times else None


def _has_fault(summary: Summary, kind: str) -> bool:
    """Did the run ask for fault ``kind`` (config.json ``faults``, a rate above 0)?"""
    rate = (summary["config"].get("faults") or {}).get(kind)
    return isinstance(rate, int | float) and rate > 0


def unreached_cells(name: str, summary: Summary, needs: dict[str, tuple[str, ...]] | None = None) -> list[str] | None:
    """The cells bug ``name`` needs (``needs``: name -> cells, by default the planted bugs'
    NEEDS_CELLS) when the run reached none of them: it could not have shown the bug, caught or not;
    None when it reached one, or when its summary has no model coverage (checked before it existed)."""
    from takeover.coverage_space import unreached_needs
    from takeover.queues.planted import NEEDS_CELLS
    from takeover.queues.planted_redis import NEEDS_CELLS as REDIS_NEEDS_CELLS  # the Redis idioms' own

    table = {**REDIS_NEEDS_CELLS, **NEEDS_CELLS} if needs is None else needs
    model = summary["coverage"].get("model")
    if model is None or name not in table:
        return None
    return unreached_needs({name: table[name]}, model["cells"]).get(name)


def row_line(row: dict[str, Any]) -> str:
    """A planted bug's line: caught, or MISSED (with the fault its runs lacked), and NEVER REACHED for
    each run that reached none of the cells it needs."""
    name, expected = row["queue"], row["expected"]
    if row["caught"]:
        at = row["first_violation_at"]
        # Violations seen only in the final snapshot (or over the whole run) have no moment.
        when = f"first violation at t={at} s" if at is not None else "caught at the final check"
        line = (f"caught  {name:<24} seed {row['seed']}, run {row['seconds']} s, {when}; "
                f"violated: {', '.join(row['violated'])}")
    else:
        why = (f"; its runs had no {row['absent_fault']} fault, the only kind that can expose it"
               if "absent_fault" in row else "")
        line = f"MISSED  {name:<24} after {row['tries']} run(s); expected {', '.join(expected)}{why}"
    for seed, cells in row.get("unreached", {}).items():
        more = f" (or any of {len(cells) - 1} more)" if len(cells) > 1 else ""
        line += (f"\nNEVER REACHED {name:<18} seed {seed}: the run never reached cell {cells[0]}{more}, "
                 f"which planted bug {name} needs")
    return line


def cells_failed(row: dict[str, Any]) -> bool:
    """A planted bug's runs fail on its cells: none of them reached one, or the run that caught it did
    not (then its declared cells are wrong). A run that missed both the bug and its cells is what the
    next seed is for, as a run that missed the bug alone: its line says NEVER REACHED all the same."""
    unreached = row.get("unreached") or {}
    return bool(unreached) and (len(unreached) >= row["tries"] or (row["caught"] and row["seed"] in unreached))


def passed(results: list[dict[str, Any]], refs: list[dict[str, Any]]) -> bool:
    """Every planted bug caught, its runs having reached its cells (:func:`cells_failed`); the reference
    valid on every seed."""
    return (all(r["caught"] and not cells_failed(r) for r in results)
            and all(r["valid"] is True for r in refs))


def _profile_and_duration(args: argparse.Namespace) -> tuple[str, float | None]:
    """The profile and faulted seconds of every run; None keeps the profile's own duration."""
    if args.profile is None:
        profile, duration = (QUICK_PROFILE, QUICK_DURATION) if args.quick else (PROFILE, DURATION)
        return profile, args.duration if args.duration is not None else duration
    return args.profile, args.duration if args.duration is not None else QUICK_DURATION if args.quick else None


def run(args: argparse.Namespace) -> ExitCode:
    from takeover.fanout.launch import check_cluster

    database = db_given(args)
    check_cluster(args.cluster, db=database)
    with db.serve(database, keep=args.keep_db):
        return _run(args, database)


def _runs(args: argparse.Namespace, launcher: Launcher, module: str, planted: dict[str, tuple[str, ...]],
          names: list[str], ref_seeds: list[int], root: Path, profile: str, extra: tuple[str, ...], database: str
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every planted bug's tries (seed 1, then 2, ... until caught, each try after the one before it) and the
    reference's seeds, through ``launcher``: here one run at a time in that order, as always; on a cluster
    the bugs side by side. Lines are printed in the same order either way."""
    from takeover.fanout.launch import Job, announce, fanout_outcome, write_record

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
        return Job(folder.name, folder, argv, lambda: stress_in_child(queue, seed, profile, folder, options), (),
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


def ref_line(ref: dict[str, Any]) -> str:
    """A reference seed's line: passed, or FAILED with the invariants that did not hold."""
    word = "passed" if ref["valid"] is True else "FAILED"
    return (f"{word:<7} reference queue, seed {ref['seed']}, run {ref['seconds']} s"
            + (f"; not holding: {', '.join(ref['not_holding'])}" if ref["not_holding"] else ""))


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
                   first_violation_at=_first_violation(summary, tuple(expected)), run_dir=str(run_dir))
        return True
    row.update(violated=fired, seconds=round(took, 1))
    need = NEEDS_FAULT.get(name)
    if need and not _has_fault(summary, need):
        row["absent_fault"] = need  # no other seed of this profile can catch it either
        return True
    return seed >= seeds


def _run(args: argparse.Namespace, database: str) -> ExitCode:
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
        from takeover.sweep.runner import shard_of

        order = [*names, *(f"reference-s{seed}" for seed in ref_seeds)]
        names, ref_seeds = shard_of(names, shard), shard_of(ref_seeds, shard)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="takeover-selftest-"))
    root.mkdir(parents=True, exist_ok=True)
    profile, duration = _profile_and_duration(args)
    # The runs use this command's database: a private server is shared with them (takeover.db.SERVER_ENV).
    extra = (*(("--duration", f"{duration:g}") if duration is not None else ()),
             *(("--db", db.redact(database)) if database != db.DEFAULT else ()),
             *(("--keep-db",) if args.keep_db else ()), *network)
    from takeover.fanout.launch import open_launcher

    launcher = open_launcher(getattr(args, "cluster", None), db=database)
    try:
        results, refs = _runs(args, launcher, module, planted, names, ref_seeds, root, profile, extra, database)
    finally:
        launcher.close()
    doc = {"ok": passed(results, refs), "profile": profile, "duration": duration, "planted": results,
           "reference": refs, "runs": str(root)}
    store.write_json(root / RESULT_FILE, doc)
    if shard:
        from takeover.fanout.merge import write_shard

        write_shard(root, "selftest", shard, order, {"profile": profile, "duration": duration})
    return conclude(doc, args.json)


def conclude(doc: dict[str, Any], as_json: bool) -> ExitCode:
    """The selftest's last lines (or the whole result as JSON) and its exit code; ``takeover merge`` ends a
    selftest's shards with this too."""
    out, results, refs, duration = sys.stdout, doc["planted"], doc["reference"], doc["duration"]
    if as_json:
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        caught = sum(r["caught"] for r in results)
        unreached = [r["queue"] for r in results if cells_failed(r)]
        if unreached:
            out.write(f"selftest: FAILED: runs on {', '.join(unreached)} never reached the cells those bugs need\n")
        out.write(f"selftest: {caught}/{len(results)} planted bugs caught, reference "
                  f"{'passed' if all(r['valid'] is True for r in refs) else 'FAILED'} on {len(refs)} seed(s); "
                  f"profile {doc['profile']}, {'its own' if duration is None else f'{duration:g} s'} faulted phase "
                  f"per run; runs in {doc['runs']}\n")
    return ExitCode.VALID if doc["ok"] else ExitCode.VIOLATED
