"""When a claim whose outcome is unknown can still take effect, and which generations it can explain.

Why: a generation no claim returned (a gap between two claims of a task, or a snapshot or probe above every
claim) is allowed only where an indeterminate claim (killed mid-call, or ended in ``info``) may have taken
it, one generation each. Counted by invoke time alone, as Jepsen counts an ``info`` operation (it may take
effect at any time after its invoke, even after the history ends), every kill early in a run excuses a
skipped generation anywhere after it. That hides a queue whose claim runs twice on one call: a claim whose
answer the server lost, sent again by its client (``--db-lost-reply-rate``; planted
``planted_redis.RetriedClaim``), takes a second task, and the first stays running under a generation no
worker was given until its lease runs out. Its call *answered*, so it explains the one generation it
returned; the orphaned one needs an unknown claim of its own, and in a stress run with a kill a second
there always was one, somewhere earlier.

Where takeover runs the database itself, on this machine (``--db redis``, its own server, no ``--hosts``), it
knows when an unknown claim can no longer reach the server:

* a claim killed mid-call: its process is dead at its ``exit`` record (the coordinator writes it after
  reaping the process; an ``exec:`` adapter dies with its worker: the same process group, and a death
  signal);
* a claim that ended in ``info``: its client gave up at that record, after its own retries (redis-py's are
  inside the call); nothing of it is left but bytes already sent;
* bytes already sent (to the server, or to the relay of ``--db-lost-reply-rate``) are read and run at the
  server's next turn, unless the server is frozen (``--db-pause-rate``): then when it runs again, so a freeze
  that began before that end moves the end to the freeze's end;
* :data:`GRACE` on top: the relay's thread and the server's event loop may wait for a core on a loaded machine.

A restart (``--db-restart-rate``) drops what the server had not run; a connection kill ends the session.
Neither lets a command run later, so neither moves the end.

Nowhere else is there such a bound: PostgreSQL runs a dead client's statement to its commit (a statement
waiting on a row lock can wait for a frozen worker, and commit seconds later), a user's server by URL may sit
behind a network that delays a packet for as long as it likes, and ``--hosts`` puts one between. Those runs
keep the invoke-time rule, so their verdicts are what they were (SQLite's too: it is not needed there, where
the writer is the process that died).

With the ends known, a generation no claim returned needs an unknown claim whose life (invoke to end)
overlaps the time that generation can have been taken: after the claim that returned the generation below it
was invoked (or the task's registration, for generation 1), and before the claim that returned the one above
it returned (for a probe: before the probe's read; for the final snapshot: any time). :func:`unexplained` is
that matching.
"""

from __future__ import annotations

import bisect

import numpy as np
import pandas as pd

from takeover._internal.checker.facts import Facts
from takeover._internal.checker.invariant_result import unexplained_each

GRACE = 2.0  # seconds a server may take to run bytes already sent, on a machine with a load of 25 on 2 cores


def bounded(fx: Facts) -> bool:
    """Whether the run's unknown claims have known ends: a Redis server takeover started here (``--db redis``,
    config.json's ``db`` exactly ``redis``), no ``--hosts``."""
    hosts = fx.config.get("hosts")
    return fx.config.get("db") == "redis" and not (isinstance(hosts, int) and hosts > 0)


def claim_ends(fx: Facts) -> np.ndarray:
    """Per indeterminate claim, in the order of ``fx.ind_claim_times``: the latest time it may take effect
    (``inf`` where unknown: every claim of a run that is not :func:`bounded`). Kept on ``fx``."""
    cached = fx.__dict__.get("_claim_ends")
    if cached is not None:
        return cached
    ind = fx.claims_ind.sort_values("t_inv", kind="stable")
    ends = np.full(len(ind), np.inf)
    if bounded(fx) and len(ind):
        ends = _ends(fx, ind)
    fx.__dict__["_claim_ends"] = ends
    return ends


def _ends(fx: Facts, ind: pd.DataFrame) -> np.ndarray:
    t_inv = ind["t_inv"].to_numpy(dtype="float64")
    t_comp = ind["t_comp"].to_numpy(dtype="float64")
    process = ind["process"].to_numpy(dtype="float64")
    exits = fx.ops.exits.dropna(subset=["target"])
    workers = set(fx.ops.spawns["target"].dropna().to_numpy(dtype="float64").tolist())
    died = {float(p): np.sort(g.to_numpy(dtype="float64"))
            for p, g in exits["time"].groupby(exits["target"].to_numpy(dtype="float64"))}
    faults = fx.ops.faults
    pauses = faults[faults["f"] == "db_pause"].sort_values("t_inv")
    pause_start = pauses["t_inv"].to_numpy(dtype="float64")
    pause_end = pauses["t_comp"].fillna(np.inf).to_numpy(dtype="float64")
    ends = np.full(len(ind), np.inf)
    for j in range(len(ind)):
        exit_at = died.get(float(process[j]), np.zeros(0))
        exit_at = exit_at[exit_at >= t_inv[j]]
        if float(process[j]) not in workers:
            continue  # not a worker's (the coordinator gives up on a call it cannot stop): no end known
        if not np.isnan(t_comp[j]):
            end = float(t_comp[j])  # info: the client gave up here
        elif len(exit_at):
            end = float(exit_at[0])  # killed mid-call: dead at its exit record
        else:
            continue  # still in flight when the history ends: no end known
        for s, e in zip(pause_start, pause_end, strict=True):
            if s <= end and e >= t_inv[j]:
                end = max(end, float(e))  # sent before or during a freeze: run once the server runs again
        ends[j] = end + GRACE
    return ends


def unexplained(fx: Facts, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """Per row (a generation range no claim returned, taken after ``lo`` and before ``hi``; ``lo`` NaN or
    ``-inf``: any time before), how many of its ``missing`` generations no unknown claim can explain, each
    unknown claim explaining one generation at most.

    A run that is not :func:`bounded` keeps the invoke-time rule (invariant_result.unexplained_each), row for
    row. Otherwise an unknown claim fits a row when it was invoked before ``hi`` and its end is after ``lo``;
    rows are served in the order of ``hi`` (stable), each taking the fitting claims that end soonest. That
    matching explains as many generations as any can: a claim invoked before one row's ``hi`` is invoked
    before every later row's, and of two claims that fit, the one ending later fits every later row the
    other fits."""
    lo = np.nan_to_num(np.asarray(lo, dtype="float64"), nan=-np.inf)
    hi = np.asarray(hi, dtype="float64")
    missing = np.asarray(missing, dtype=np.int64)
    invoked = fx.ind_claim_times
    if not bounded(fx):
        return unexplained_each(hi, missing, invoked)
    ends = claim_ends(fx)
    order = np.argsort(hi, kind="stable")
    out = np.zeros(len(hi), dtype=np.int64)
    free: list[tuple[float, int]] = []  # (end, claim) of the claims invoked before the current row's hi
    nxt = 0
    for k in order.tolist():
        while nxt < len(invoked) and invoked[nxt] < hi[k]:
            bisect.insort(free, (float(ends[nxt]), nxt))
            nxt += 1
        need = int(missing[k])
        at = bisect.bisect_right(free, (float(lo[k]), len(invoked)))
        take = min(need, len(free) - at)
        del free[at : at + take]
        out[k] = need - take
    return out


def registered_at(fx: Facts, task: np.ndarray) -> np.ndarray:
    """Per task code: when its first registration was invoked (``-inf``: none recorded), the earliest a claim
    can have taken its generation 1."""
    reg = fx.ops.registers.dropna(subset=["task"])
    first = reg.groupby("task")["t_inv"].min()
    return pd.Series(np.asarray(task, dtype="float64")).map(first).fillna(-np.inf).to_numpy(dtype="float64")


def taken_after(fx: Facts, task: np.ndarray, gen: np.ndarray) -> np.ndarray:
    """Per (task, generation): the earliest a generation above it can have been taken: when the first claim
    that returned it was invoked, or the task's registration for generation 0 (``-inf``: unknown)."""
    task, gen = np.asarray(task, dtype="float64"), np.asarray(gen, dtype="float64")
    c = fx.claims_ok[["task", "gen", "t_inv"]].groupby(["task", "gen"])["t_inv"].min()
    got = c.reindex(pd.MultiIndex.from_arrays([task, gen])).to_numpy(dtype="float64")
    at = np.where(gen > 0, got, registered_at(fx, task))
    return np.nan_to_num(at, nan=-np.inf)
