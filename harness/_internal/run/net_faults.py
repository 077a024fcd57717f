"""The network's nemesis: partitions, connection kills, database restarts and freezes (``--partition-rate``,
``--conn-kill-rate``, ``--db-restart-rate``, ``--db-pause-rate``), on a run with hosts (takeover._internal.run.net_site)
or on a run's own Redis server (takeover._internal.run.redis_site: no hosts, so no partitions).

Why a nemesis of its own beside takeover._internal.run.nemesis: those faults act on the network and the server,
not on a worker process, and need no view of the phase board. They arrive on the same stratified
plan (one arrival at a uniform instant in each 1/rate-second slot of the faulted phase), each kind from
its own stream of ``--seed``, and everything they draw (which hosts, which shape, how long, which
worker) comes from that stream too.

Each fault is a pair of records in the history (process 0), an ``invoke`` when it starts and an ``ok``
when it ends, naming the hosts (``host``) and the workers it reached (``worker``), so the checker can
tell what a duplicate or a violation owes to it (takeover._internal.checker.diagnosis):

- ``partition``: a drawn set of hosts cut from the database, as Jepsen's partitioners draw them
  (``detail``: ``one`` host, a ``minority``, a ``majority``, or ``one_way``: one host whose requests
  arrive and whose replies are lost), for a drawn time, then healed. One at a time.
- ``conn_kill``: a drawn live worker's database sessions terminated by the server
  (``pg_terminate_backend``, as a pooler or a failover does; Redis: ``CLIENT KILL`` of its connections);
  ``value`` is how many it ended.
- ``db_restart``: the server crashes (immediate stop, no checkpoint) and starts again after a drawn
  down time, in a thread so the run's loop goes on meanwhile; every session drops, and what was
  committed must survive (the checker's invariants say whether it did).
- ``db_pause``: the server frozen (SIGSTOP; PostgreSQL's postmaster with its whole process group) for a
  drawn time (``value``, seconds), then continued: every client's call waits at once, and leases run out
  on the workers' clocks meanwhile. Not while the server restarts, nor two at once.
- ``db_lost_reply`` (a run's own Redis server, takeover._internal.run.reply_dropper): a drawn live worker's
  connection loses the server's next answer and is closed; ``invoke`` when armed, ``ok`` when an answer
  was lost (``value``: its bytes), ``info`` when none came before the faults stopped.
- ``net_loss`` (with ``--net-loss``): one ``ok`` record when faults stop, ``value`` = how many packets the
  loss rules had dropped by then, ``detail`` = the probability: the evidence that the loss reached the run.

Every fault is healed when the faulted phase ends (:meth:`NetworkFaults.stop`): the drain runs on a
whole network and a running server.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from takeover._internal.config import RunConfig
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.net.hosts import application_name, host_name
from takeover._internal.seeds import stream_seed

PARTITION = "partition"
CONN_KILL = "conn_kill"
DB_RESTART = "db_restart"
DB_PAUSE = "db_pause"
DB_LOST_REPLY = "db_lost_reply"
NET_LOSS = "net_loss"  # not a fault window: the packets ``--net-loss`` dropped, written when faults stop
KINDS = (PARTITION, CONN_KILL, DB_RESTART, DB_PAUSE, DB_LOST_REPLY)
SHAPES = ("one", "minority", "majority", "one_way")
# A partition lasts this many leases (uniform): from shorter than a lease (nothing expires) to long enough
# for the server to end the cut-off sessions (a few seconds) and another worker to take the task over.
PARTITION_LEASES = (0.5, 4.0)
DOWN_TIME = (0.2, 1.0)  # seconds a crashed database stays down before it starts again
# A freeze lasts this many leases (uniform): from shorter than a lease to long enough for every lease to run out.
PAUSE_LEASES = (0.5, 3.0)


def rate_of(cfg: RunConfig, kind: str) -> float:
    return float(getattr(cfg, f"{kind}_rate"))


def hosts_cut(rng: random.Random, count: int) -> tuple[str, list[int]]:
    """A partition's shape and hosts, drawn as Jepsen's partitioners do: one host, a minority (fewer than
    half, at least one), a majority (more than half), or one host one way. Fixed-size draws: the n-th
    partition's hosts depend on --seed alone."""
    shape = rng.choice(SHAPES)
    order = list(range(1, count + 1))
    rng.shuffle(order)
    size = {"one": 1, "one_way": 1, "minority": max(1, (count - 1) // 2), "majority": count // 2 + 1}[shape]
    return shape, sorted(order[: min(size, count)])


class NetworkFaults:
    """Driven by the coordinator's loop (:meth:`tick`) during the faulted phase; never sleeps itself."""

    def __init__(self, cfg: RunConfig, site: Any, hist: HistoryWriter, live: Callable[[], dict[int, int]]) -> None:
        self.cfg = cfg
        self.site = site
        self.hist = hist
        self.live = live  # slot -> process of the live workers
        self.rngs = {k: random.Random(stream_seed(cfg.seed, f"net:{k}")) for k in KINDS}
        self.next_at: dict[str, float] = {}
        self._slot: Counter[str] = Counter()
        self._t0 = 0.0
        self.partition: tuple[float, str, list[int], dict[str, Any]] | None = None  # (heal at, shape, hosts, fields)
        self.restart: threading.Thread | None = None
        self.paused: tuple[float, dict[str, Any]] | None = None  # (continue at, fields) of a freeze
        # A freeze ends on a timer of its own, not at the loop's next tick: the loop may itself be waiting
        # on the frozen server (the coordinator's register_many) and would stretch the freeze to its timeout.
        self._pause_timer: threading.Timer | None = None
        self._pause_lock = threading.Lock()
        self.tally: Counter[str] = Counter()  # faults started, by kind
        self.skipped: Counter[str] = Counter()  # arrivals that found their kind (or the server) busy

    def start(self, now: float) -> None:
        self._t0 = now
        for kind in KINDS:
            if rate_of(self.cfg, kind) > 0:
                self.next_at[kind] = self._plan(kind)

    def _plan(self, kind: str) -> float:
        i = self._slot[kind]
        self._slot[kind] += 1
        return self._t0 + (i + self.rngs[kind].random()) / rate_of(self.cfg, kind)

    def tick(self, now: float) -> float:
        """Do what is due; how long the caller may sleep before the next tick."""
        if self.partition is not None and now >= self.partition[0]:
            self._heal()
        if self.paused is not None and now >= self.paused[0]:
            self._resume()
        for kind, due in list(self.next_at.items()):
            if now >= due:
                self.next_at[kind] = self._plan(kind)
                getattr(self, f"_{kind}")(self.rngs[kind])
        waits = [t - time.time() for t in self.next_at.values()]
        if self.partition is not None:
            waits.append(self.partition[0] - time.time())
        if self.paused is not None:
            waits.append(self.paused[0] - time.time())
        return max(0.0, min(waits, default=0.05))

    def stop(self) -> None:
        """No new faults; the partition healed and the server back up before this returns."""
        self.next_at.clear()
        if self.partition is not None:
            self._heal()
        if self._pause_timer is not None:
            self._pause_timer.cancel()
        if self.paused is not None:
            self._resume()
        dropper = getattr(self.site, "dropper", None)
        if dropper is not None:  # armed, never met an answer: said so, before the history closes
            for told in dropper.disarm():
                told(-1)
        if self.restart is not None:
            self.restart.join()
            self.restart = None
        if self.cfg.net_loss > 0:  # what the loss rules dropped in the faulted phase: one record, its evidence
            self.hist.write("ok", NET_LOSS, value=str(self.site.network.lost_packets()),
                            detail=f"{self.cfg.net_loss:g}")

    # -- the kinds ----------------------------------------------------------------------------------------------
    def _workers_on(self, hosts: list[int]) -> str:
        names = [f"w{slot}" for slot in sorted(self.live()) if self.site.host_of(slot) in hosts]
        return ",".join(names)

    def _partition(self, rng: random.Random) -> None:
        shape, hosts = hosts_cut(rng, self.site.count)
        seconds = round(rng.uniform(*PARTITION_LEASES) * self.cfg.lease, 3)
        if self.partition is not None or self._restarting():
            self.skipped[PARTITION] += 1
            return
        fields = {"host": ",".join(host_name(h) for h in hosts), "worker": self._workers_on(hosts),
                  "detail": shape, "value": f"{seconds:g}"}  # fmt: skip
        self.hist.write("invoke", PARTITION, **fields)
        self.site.network.cut(hosts, one_way=shape == "one_way")
        self.partition = (time.time() + seconds, shape, hosts, fields)
        self.tally[PARTITION] += 1

    def _heal(self) -> None:
        assert self.partition is not None
        _, shape, hosts, fields = self.partition
        self.partition = None
        self.site.network.cut(hosts, one_way=shape == "one_way", heal=True)
        self.hist.write("ok", PARTITION, **fields)

    def _conn_kill(self, rng: random.Random) -> None:
        live = self.live()
        slots = sorted(live)
        pick = rng.random()  # one fixed-size draw per arrival
        if not slots or self._restarting() or self.paused is not None:
            self.skipped[CONN_KILL] += 1
            return
        slot = slots[int(pick * len(slots))]
        process = live[slot]
        host = self.site.host_name(slot)
        fields = {"worker": f"w{slot}", "target": process, **({"host": host} if host else {})}
        self.hist.write("invoke", CONN_KILL, **fields)
        try:
            ended = self._terminate(slot, process)
        except Exception as exc:  # noqa: BLE001 - the server may be starting up: the kill is recorded as failed
            self.hist.write("info", CONN_KILL, error=error_text(exc), **fields)
            return
        self.hist.write("ok", CONN_KILL, value=str(ended), **fields)
        self.tally[CONN_KILL] += 1

    def _terminate(self, slot: int, process: int) -> int:
        kill = getattr(self.site, "kill_connections", None)
        if kill is not None:  # a site that knows its clients its own way (Redis: takeover._internal.run.redis_site)
            return int(kill(slot, process))
        from takeover._internal.db import postgres

        name = application_name(slot, process)
        with postgres.connect(self.site.server.admin_url) as conn:
            rows = conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                                (name,)).fetchall()  # fmt: skip
        return sum(1 for (ended,) in rows if ended)

    def _restarting(self) -> bool:
        return self.restart is not None and self.restart.is_alive()

    def _db_lost_reply(self, rng: random.Random) -> None:
        live = self.live()
        slots = sorted(live)
        pick = rng.random()
        if not slots or self._restarting() or self.paused is not None:
            self.skipped[DB_LOST_REPLY] += 1
            return
        slot = slots[int(pick * len(slots))]
        fields = {"worker": f"w{slot}", "target": live[slot]}

        def lost(size: int) -> None:
            if size < 0:
                self.hist.write("info", DB_LOST_REPLY, error="no answer came before the faults stopped", **fields)
            else:
                self.hist.write("ok", DB_LOST_REPLY, value=str(size), **fields)

        self.hist.write("invoke", DB_LOST_REPLY, **fields)
        if not self.site.arm_lost_reply(slot, lost):
            self.hist.write("info", DB_LOST_REPLY, error="the worker had no connection to the server", **fields)
            return
        self.tally[DB_LOST_REPLY] += 1

    def _db_pause(self, rng: random.Random) -> None:
        seconds = round(rng.uniform(*PAUSE_LEASES) * self.cfg.lease, 3)
        if self._restarting() or self.paused is not None:
            self.skipped[DB_PAUSE] += 1
            return
        fields = {"value": f"{seconds:g}"}
        self.hist.write("invoke", DB_PAUSE, **fields)
        self.site.server.pause()
        self.paused = (time.time() + seconds, fields)
        self._pause_timer = threading.Timer(seconds, self._resume)
        self._pause_timer.name = "takeover-db-pause"
        self._pause_timer.daemon = True
        self._pause_timer.start()
        self.tally[DB_PAUSE] += 1

    def _resume(self) -> None:
        """The server continues, and the history says so, once: by the freeze's timer at its time, or by
        the loop (a late timer) or :meth:`stop`, whichever comes first."""
        with self._pause_lock:
            if self.paused is None:
                return
            _, fields = self.paused
            self.paused = None
            self.site.server.resume()
            self.hist.write("ok", DB_PAUSE, **fields)

    def _db_restart(self, rng: random.Random) -> None:
        down = round(rng.uniform(*DOWN_TIME), 3)
        if self._restarting() or self.paused is not None:
            self.skipped[DB_RESTART] += 1
            return
        self.hist.write("invoke", DB_RESTART, value=f"{down:g}")
        self.site.server.crash()
        self.tally[DB_RESTART] += 1

        def back() -> None:
            time.sleep(down)
            try:
                self.site.server.restart()
            except Exception as exc:  # noqa: BLE001 - recorded; the run's end removes the server anyway
                self.hist.write("info", DB_RESTART, value=f"{down:g}", error=error_text(exc))
                return
            self.hist.write("ok", DB_RESTART, value=f"{down:g}")

        self.restart = threading.Thread(target=back, name="takeover-db-restart", daemon=True)
        self.restart.start()
