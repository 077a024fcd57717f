"""What the run itself saw, in words, before (or without) the checker: ``takeover stress``'s run summary.

Why apart from the checker's reports: these lines come from the coordinator's own counts
(takeover._internal.run.coordinator.RunOutcome) and the ledger, so a run can be judged roughly even when the
checker cannot read it; they are printed between the run and its verdict.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.options import AIMED_FAULTS, NEMESIS_FAULTS


def ledger_counts(run_dir: Path) -> dict[str, int]:
    path = run_dir / store.LEDGER_FILE
    if not path.exists():
        return {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(performed), 0), COALESCE(SUM(reply = 'lost'), 0) FROM actions"
        ).fetchone()
        dup = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(n - 1), 0) FROM "
            "(SELECT COUNT(*) AS n FROM actions WHERE performed = 1 GROUP BY task_id HAVING n > 1)"
        ).fetchone()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {"requests": row[0], "performed": row[1], "lost": row[2], "dup_tasks": dup[0], "extra": dup[1]}


def print_run_summary(result: Any, out: Any) -> None:
    """What the run itself saw: enough to judge a run even before the checker reads it."""
    cfg, t = result.config, result.tally
    states = ", ".join(f"{n} {s}" for s, n in sorted(result.states.items())) or "no snapshot"
    print(f"\nrun: {result.elapsed:.1f}s, {cfg.workers} workers, {result.spawned} incarnations, "
          f"lease {cfg.lease:g}s, seed {cfg.seed}", file=out)  # fmt: skip
    print(f"tasks: {result.registered} registered; final states: {states}", file=out)
    if result.snapshot_error:
        print(f"  snapshot failed: {result.snapshot_error}", file=out)
    # An interrupted run never finished its drain: unfinished tasks and missing faults are expected
    # there, and saying otherwise would send the user after a bug that is not there.
    interrupted = getattr(result, "interrupted", False)
    drained = getattr(result, "drain_started", False)
    when = "during the drain" if drained else "before the drain"
    if result.not_terminal:
        shown = ", ".join(result.not_terminal[:5])
        where = f"not terminal when the run was interrupted {when}" if interrupted else "NOT TERMINAL after the drain"
        print(f"  {where}: {len(result.not_terminal)} ({shown}"
              f"{', ...' if len(result.not_terminal) > 5 else ''})", file=out)  # fmt: skip
    if interrupted:
        after = f" after {result.drain_seconds:.1f}s" if drained else ""
        print(f"drain: interrupted {when}{after}", file=out)
    else:
        drain = "timed out" if result.drain_timed_out else "complete"
        print(f"drain: {result.drain_seconds:.1f}s, {drain}", file=out)
    kills = ", ".join(f"{aim} {n} (hit {t.kill_hits[aim]})" for aim, n in sorted(t.kills.items())) or "none"
    pauses = ", ".join(f"{k} {n}" for k, n in sorted(t.pauses.items())) or "none"
    c = result.counters
    print(f"faults: kills: {kills}", file=out)
    print(f"        pauses: {pauses}", file=out)
    print(f"        lost replies: {c.get('lose_reply', 0)}, slow tasks: {c.get('slow', 0)}", file=out)
    aim = t.aimed
    for kind in AIMED_FAULTS:
        if aim.hits[kind] or aim.missed[kind]:
            reasons = "; ".join(f"{r} ({n})" for (k, r), n in sorted(aim.reasons.items()) if k == kind)
            print(f"        {kind}: window hit {aim.hits[kind]}, missed {aim.missed[kind]}"
                  f"{f' ({reasons})' if reasons else ''}", file=out)  # fmt: skip
    if cfg.clock_skew_max > 0 or cfg.clock_jump_rate > 0:
        print(f"        clocks: every incarnation off by up to {cfg.clock_skew_max:g} s; {t.clock_jumps} jumps of up "
              f"to {cfg.clock_jump_max:g} s posted", file=out)  # fmt: skip
    if t.hunts_expired:
        expired = ", ".join(f"{k} {n}" for k, n in sorted(t.hunts_expired.items()))
        print(f"        found no target in time: {expired}", file=out)
    for kind in sorted(aim.skipped):
        print(f"        {kind}: not tried, the queue does not offer what it needs (extend())", file=out)
    for kind in () if interrupted else NEMESIS_FAULTS + ("lose_reply", "slow"):
        if cfg.faults.get(kind, 0) > 0 and _injected(kind, t, c) == 0 and not aim.skipped[kind]:
            print(f"  warning: {kind} was requested but never injected", file=out)
    if cfg.probe_rate > 0:
        print(f"probes: {getattr(result, 'probes', 0)} snapshots read mid-run ({cfg.probe_rate:g}/s), judged against "
              "the history by state_matches_history", file=out)  # fmt: skip
    ledger = ledger_counts(result.run_dir)
    if ledger:
        print(f"ledger: {ledger['requests']} action requests, {ledger['performed']} performed, "
              f"{ledger['lost']} replies lost; {ledger['dup_tasks']} tasks with duplicate side effects "
              f"({ledger['extra']} extra actions)", file=out)  # fmt: skip
    if result.crashes or result.service_restarts:
        print(f"harness: {result.crashes} worker exits not caused by the nemesis, "
              f"{result.service_restarts} service restarts", file=out)  # fmt: skip


def _injected(kind: str, t: Any, c: dict[str, int]) -> int:
    from takeover._internal.config import KILL_AIMS

    if kind in KILL_AIMS:
        return t.kills[KILL_AIMS[kind]]
    if kind == "pause":
        return sum(t.pauses.values())
    if kind in AIMED_FAULTS:
        return int(t.aimed.hits[kind] + t.aimed.missed[kind])
    return c.get(kind, 0)
