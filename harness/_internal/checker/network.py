"""What the network did to a worker (runs with ``--hosts``, or on a run's own Redis server): which partition
cut it off, which connection kill ended its session, which database restart dropped it, which freeze of
the server stalled it, while it held a task.

Why a module of its own: the duplicates' causes (takeover._internal.checker.duplicate_causes) and the diagnosis'
sentences (takeover._internal.checker.diagnosis) both ask it, and both must answer alike. A run without hosts has none
of these records (nor a run on SQLite), so nothing here changes what is said of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from takeover._internal.checker.facts import Facts

PARTITION = "partition"
CONN_KILL = "conn_kill"
DB_RESTART = "db_restart"
DB_PAUSE = "db_pause"
DB_LOST_REPLY = "db_lost_reply"
NETWORK_CAUSES = (PARTITION, CONN_KILL, DB_RESTART, DB_PAUSE, DB_LOST_REPLY)  # first match wins, in this order
COUNTED = (PARTITION, CONN_KILL, DB_RESTART)  # summary.json's ``network.faults`` always has these (a freeze when any)


def has_network(fx: Facts) -> bool:
    """Whether the run had hosts, or a Redis server of its own (whose faults need none): only then do the
    duplicates list the network's causes."""
    hosts = fx.config.get("hosts")
    return (isinstance(hosts, int) and hosts > 0) or on_redis(fx)


def on_redis(fx: Facts) -> bool:
    """Whether the run's database was Redis (its own server, or a user's by URL)."""
    return str(fx.config.get("db", "")).partition("://")[0] == "redis"


def process_hosts(fx: Facts) -> dict[float, str]:
    """Each worker incarnation's host, from its spawn record (or config.json's placement of its slot)."""
    placement = fx.config.get("placement") or {}
    spawns = fx.ops.spawns
    return {float(t): str(placement.get(str(w), "")) for t, w in zip(spawns["target"], spawns["worker"], strict=True)
            if not np.isnan(t)}


@dataclass(frozen=True)
class Hit:
    """A network fault that reached a worker: its kind, when it began and ended, and the host it was on."""

    kind: str
    start: float
    end: float
    host: str


def _windows(fx: Facts, kind: str) -> list[tuple[float, float, Any, Any]]:
    """Each fault of ``kind``: start, end (the run's end when it has none), hosts, target. Kept on ``fx``: every
    violation and every duplicate asks (a planted bug makes hundreds)."""
    cache: dict[str, list[tuple[float, float, Any, Any]]] = fx.__dict__.setdefault("_network_windows", {})
    if kind not in cache:
        cache[kind] = _read_windows(fx, kind)
    return cache[kind]


def _read_windows(fx: Facts, kind: str) -> list[tuple[float, float, Any, Any]]:
    f = fx.ops.faults
    w = f[f["f"] == kind]
    hosts = w["host"] if "host" in w else [None] * len(w)
    return [(float(s), float(e) if not np.isnan(e) else fx.t1, h, t)
            for s, e, h, t in zip(w["t_inv"], w["t_comp"], hosts, w["target"], strict=True)]


def hits(fx: Facts, process: float, since: float, until: float) -> list[Hit]:
    """The network faults that reached worker ``process`` between ``since`` and ``until``, in cause order:
    a partition of its host overlapping that time, a kill of its session, a restart of the database."""
    if not has_network(fx) or np.isnan(process):
        return []
    if "_process_hosts" not in fx.__dict__:  # kept on fx, as the windows are
        fx.__dict__["_process_hosts"] = process_hosts(fx)
    host = fx.__dict__["_process_hosts"].get(float(process), "")
    found = []
    for s, e, cut, _ in _windows(fx, PARTITION):
        if host and isinstance(cut, str) and host in cut.split(",") and s <= until and e >= since:
            found.append(Hit(PARTITION, s, e, host))
    for s, e, _, target in _windows(fx, CONN_KILL):
        if target == process and since <= s <= until:
            found.append(Hit(CONN_KILL, s, e, host))
    for s, e, _, _ in _windows(fx, DB_RESTART):
        if since <= s <= until:
            found.append(Hit(DB_RESTART, s, e, host))
    for s, e, _, _ in _windows(fx, DB_PAUSE):
        if s <= until and e >= since:
            found.append(Hit(DB_PAUSE, s, e, host))
    for s, e, _, target in _windows(fx, DB_LOST_REPLY):
        if target == process and since <= e <= until:  # when the answer was lost (an arm that met none: the end)
            found.append(Hit(DB_LOST_REPLY, s, e, host))
    return found


def causes(fx: Facts, process: np.ndarray, since: np.ndarray, until: np.ndarray) -> np.ndarray:
    """Per row: the first network cause (in :data:`NETWORK_CAUSES` order) that reached ``process`` between
    ``since`` and ``until``, or "" when none did."""
    out = np.full(len(process), "", dtype=object)
    if not has_network(fx):
        return out
    for i, (p, lo, hi) in enumerate(zip(process, since, until, strict=True)):
        found = hits(fx, float(p), float(lo), float(hi))
        if found:
            out[i] = found[0].kind
    return out


STORIES = 5  # sentences the summary's ``network`` section tells at most


def _worker(fx: Facts, process: float) -> str:
    spawns = fx.ops.spawns
    slot = spawns.loc[spawns["target"] == process, "worker"]
    return f"worker {slot.iloc[0]} (process {int(process)})" if len(slot) else f"process {int(process)}"


def _s(fx: Facts, t: float) -> str:
    return f"{fx.rel(t):.1f} s"


def _reached(fx: Facts, who: str, hit: Hit) -> str:
    """What the fault did to the worker, in words: the first half of a story."""
    if hit.host:
        who = f"{who} on host {hit.host}"
    if hit.kind == PARTITION:
        return f"{who} was cut off from the database at {_s(fx, hit.start)} until {_s(fx, hit.end)}"
    if hit.kind == CONN_KILL:
        return f"{who} had its database session ended by the server at {_s(fx, hit.start)}"
    if hit.kind == DB_LOST_REPLY:
        return f"{who} lost the server's answer to a call at {_s(fx, hit.end)} (the call ran; its client sent it again)"
    if hit.kind == DB_PAUSE:
        return (f"the database was frozen from {_s(fx, hit.start)} until {_s(fx, hit.end)} while {who} held the "
                "task")
    return f"the database crashed at {_s(fx, hit.start)} and was back at {_s(fx, hit.end)} while {who} held the task"


def duplicate_story(fx: Facts, row: Any) -> str | None:
    """One duplicate's story, in the order things happened: which network fault reached its earlier holder,
    who took the task over, and when each acted (``row``: a row of
    takeover._internal.checker.duplicate_causes.extra_actions)."""
    older_first = row.p_gen <= row.gen
    old, new = (row.p_process, row.process) if older_first else (row.process, row.p_process)
    old_t, new_t = (row.p_t, row.t) if older_first else (row.t, row.p_t)
    since = float(min(old_t, new_t)) - 10 * (fx.lease or 1.0)
    found = [h for h in hits(fx, float(old), since, float(max(old_t, new_t))) if h.kind == row.cause]
    if not found:
        return None
    who, task = _worker(fx, float(old)), fx.name(row.task)
    taken = f" at {_s(fx, row.taken_at)}" if not np.isnan(row.taken_at) else ""
    if old_t <= found[0].start:  # acted, then the fault took its finish (or its session) away
        return (f"{who} acted on {task} at {_s(fx, old_t)}; {_reached(fx, who, found[0])}; "
                f"{'it' if new == old else _worker(fx, float(new))} "
                f"{'claimed it again' if new == old else 'took it over'}{taken} and acted again at {_s(fx, new_t)}")
    if new == old:
        return (f"{_reached(fx, who, found[0])}; it acted on {task} at {_s(fx, old_t)} meanwhile, then claimed it "
                f"again{taken} and acted again at {_s(fx, new_t)}")
    return (f"{_reached(fx, who, found[0])}; {_worker(fx, float(new))} took {task} over{taken} and acted at "
            f"{_s(fx, new_t)}, and {who} acted on it at {_s(fx, old_t)}")


# Per invariant, what the workers of a violation did, in the order of its fields: (the field naming the worker,
# the field with the time, the words). The worker a network fault reached is told first, then these.
DEEDS = {
    "no_stale_commit": (("claimed_by", "claimed_at", "took {task} over"), ("finish_by", "finish_at", "finished it")),
    "lease_exclusive": (("granted_to", "granted_now", "was granted {task} while the older lease held"),),
    "single_finish": (("earlier_by", "earlier_at", "finished {task}"), ("finish_by", "finish_at", "finished it again")),
    "no_reclaim_after_terminal": (("finished_by", "finished_at", "finished {task}"),
                                  ("reclaimed_by", "reclaimed_at", "claimed it again")),
    "generation_monotonic": (("previous_by", "previous_at", "claimed {task}"),
                             ("claimed_by", "claimed_at", "claimed it again at a generation not above")),
}
# What a worker's deed after the fault ended is said to have waited for.
BACK = {PARTITION: "when the network came back", CONN_KILL: "on a new session", DB_RESTART: "after the restart",
        DB_PAUSE: "once the server ran again", DB_LOST_REPLY: "on a new connection"}


def violation_hit(fx: Facts, row: dict[str, Any]) -> tuple[float, Hit] | None:
    """The network fault that reached one of a violation's workers in the three leases before it (the first,
    in cause order), with that worker's process; None when none did (or the run had no hosts)."""
    at, processes = row.get("at"), str(row.get("processes") or "")
    if not has_network(fx) or not isinstance(at, int | float) or not processes:
        return None
    t = float(at) + fx.t0
    for p in processes.split():
        try:
            process = float(p)
        except ValueError:
            continue
        found = hits(fx, process, t - 3 * (fx.lease or 1.0), t)
        if found:
            return process, found[0]
    return None


def violation_cause(fx: Facts, row: dict[str, Any]) -> str:
    """violations.csv's ``cause``: ``partition``, ``conn_kill`` or ``db_restart`` when that network fault reached
    one of the violation's workers in the leases before it, ``power_loss`` for a violation a power loss
    explains (its pattern), empty otherwise: the queue broke its promise without either."""
    if row.get("pattern") == "vanished_on_restart":  # a server without persistence: its restart emptied the queue
        return DB_RESTART
    if row.get("pattern") in ("claim_retried", "probe_claim_retried"):
        return DB_LOST_REPLY
    if row.get("at") is None and finish_reply_lost(fx, row.get("task"), str(row.get("generations") or "").split()):
        return DB_LOST_REPLY
    hit = violation_hit(fx, row)
    if hit is not None:
        return hit[1].kind
    return "power_loss" if row.get("pattern") == "power_loss" else ""


def lost_claim_answers(fx: Facts, *, took_task: bool = False) -> list[float]:
    """When each lost answer of the server (``db_lost_reply``) fell inside a claim call of the worker it hit;
    ``took_task``: only those inside a claim that answered a task (the claims whose resend can take a second
    one). Kept on ``fx``."""
    cache: dict[bool, list[float]] = fx.__dict__.setdefault("_lost_claim_answers", {})
    if took_task not in cache:
        c = fx.ops.claims
        if took_task:
            c = c[(c["status"] == "ok").to_numpy(dtype=bool) & c["task"].notna().to_numpy(dtype=bool)]
        t_inv, t_comp = c["t_inv"].to_numpy(dtype="float64"), c["t_comp"].fillna(np.inf).to_numpy(dtype="float64")
        process = c["process"].to_numpy(dtype="float64")
        cache[took_task] = [e for e, target in _lost_answers(fx)
                            if ((process == target) & (t_inv <= e) & (e <= t_comp)).any()]
    return cache[took_task]


def _lost_answers(fx: Facts) -> list[tuple[float, float]]:
    """(when, the worker process it hit) of each answer the relay lost: the ``ok`` ends of ``db_lost_reply`` (an
    ``info`` end is an arm that met no answer)."""
    f = fx.ops.faults
    ok = f[(f["f"] == DB_LOST_REPLY).to_numpy(dtype=bool) & (f["status"] == "ok").to_numpy(dtype=bool)]
    return list(zip(ok["t_comp"].to_numpy(dtype="float64").tolist(), ok["target"].to_numpy(dtype="float64").tolist(),
                    strict=True))


def lost_reply_coverage(fx: Facts) -> str | None:
    """A warning when ``--db-lost-reply-rate`` was asked for and no lost answer fell inside a claim that took a
    task: the run then never tried whether a claim resent after a lost reply runs twice (a queue that would
    take a second task passes it), and a VALID verdict says nothing about it. None otherwise."""
    rate = fx.config.get("db_lost_reply_rate")
    if not isinstance(rate, int | float) or rate <= 0 or lost_claim_answers(fx, took_task=True):
        return None
    lost = len(_lost_answers(fx))
    in_claims = len(lost_claim_answers(fx))
    return (f"--db-lost-reply-rate {rate:g}: none of the server's {lost} lost answer(s) fell in a claim that took a "
            f"task ({in_claims} in claims that took none), so whether a claim resent after a lost reply runs "
            "twice was not tested")


def finish_reply_lost(fx: Facts, task: Any, gens: list[Any]) -> bool:
    """A finish of ``task`` (its name, or its code) at one of ``gens`` was refused or failed while the server's
    answer to its holder was lost (``db_lost_reply``): the first run of the finish counted, and the client's
    retry was refused (the task was already done)."""
    if not _windows(fx, DB_LOST_REPLY) or task is None or not gens:
        return False
    code = fx.code(task) if isinstance(task, str) else float(task)
    f = fx.ops.finishes
    mine = f[(f["task"] == code) & f["gen"].isin([float(g) for g in gens]) & f["rejected"]]
    for start, end, process in zip(mine["t_inv"], mine["t_comp"].fillna(fx.t1), mine["process"], strict=True):
        for _, e, _, target in _windows(fx, DB_LOST_REPLY):
            if target == process and start <= e <= end:
                return True
    return False


def violation_story(fx: Facts, row: dict[str, Any]) -> str | None:
    """A violation's story when a network fault reached one of its workers in the leases before it: what the
    fault did to that worker, then what each worker of the violation did, and when."""
    hit = violation_hit(fx, row)
    if hit is None:
        return None
    process, found = hit
    at = float(row["at"])
    story = (f"{row.get('invariant')} on {row.get('task')} at {at:.1f} s: "
             f"{_reached(fx, _worker(fx, process), found)}")
    deeds: list[str] = []
    for by, when, words in DEEDS.get(str(row.get("invariant")), ()):
        who, t = row.get(by), row.get(when)
        if not isinstance(who, int | float) or not isinstance(t, int | float):
            continue
        same = float(who) == process  # the worker the fault reached: "it", after the story's first half
        back = f" {BACK[found.kind]}" if same and t + fx.t0 >= found.end else ""
        name = "it" if same and not deeds else _worker(fx, float(who))
        deeds.append(f"{name} {words.format(task=row.get('task'))} at {t:.1f} s{back}")
    return story + ("; " + ", and ".join(deeds) if deeds else "")


def section(fx: Facts, extra: Any, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """summary.json's ``network`` (runs with hosts only): where each worker ran, the faults by kind (and the
    partitions by shape), and up to :data:`STORIES` stories of what they did to violations and duplicates."""
    if not has_network(fx):
        return None
    f = fx.ops.faults
    part = f[f["f"] == PARTITION]
    stories = [s for s in (violation_story(fx, r) for r in rows) if s][:STORIES]
    if extra is not None and len(extra):
        mine = extra[extra["cause"].isin(NETWORK_CAUSES)].sort_values("t").head(STORIES)
        stories += [s for s in (duplicate_story(fx, r) for r in mine.itertuples()) if s][: STORIES - len(stories)]
    out: dict[str, Any] = {"hosts": fx.config.get("hosts"), "placement": fx.config.get("placement") or {},
                           "faults": {k: int((f["f"] == k).sum()) for k in NETWORK_CAUSES
                                      if k in COUNTED or (f["f"] == k).any()},
                           "partitions": {str(k): int(v) for k, v in part["detail"].value_counts().items()},
                           "stories": stories}  # fmt: skip
    lost = lost_packets(fx)
    if lost is not None:
        out["lost_packets"] = lost
    return out


def lost_packets(fx: Facts) -> int | None:
    """The packets ``--net-loss`` dropped in the faulted phase (the run's ``net_loss`` record,
    takeover._internal.run.net_faults); None in a run without loss, or one stored before the record."""
    h = fx.run.history
    if not len(h) or "f" not in h:
        return None
    rows = h.loc[(h["f"] == "net_loss").to_numpy(dtype=bool), "value"]
    return int(float(str(rows.iloc[-1]))) if len(rows) else None
