"""The coordinator: the run loop — set up, faulted phase, drain, stop — and nothing else.

Why one single-threaded loop: every decision that touches processes (kill, pause, resume,
respawn, stop) happens in one place and one order, so the history's process-0 records are in a
true order and signal handlers only need to set a flag. The loop never blocks for long; the
nemesis tells it how long it may sleep (about 1 ms while hunting for a phase).

The loop drives the other roles of :mod:`takeover._internal.run`: the supervisor starts, reaps and restarts
the processes and takes the signals (:mod:`.supervision`), the nemesis decides the faults and the
effectors carry them out (:mod:`.nemesis`, :mod:`.effectors`), and the progress model is filled
for whoever watches (:mod:`.progress`). What a worker does is the caller's: it passes the worker's
entry point (``worker=``, for ``takeover stress`` that is ``takeover.workloads.worker.worker_main``).

The coordinator's own calls into the queue (open, register, snapshot, close) go through
:mod:`takeover._internal.run.queue_caller`: each has a deadline (the drain timeout) and gives way to Ctrl-C,
so a queue that blocks can neither hang the run nor make it deaf to signals.

Order of the end (docs/history.md): ``run faults_stop`` (paused workers resumed), the drain until
every task is terminal or no task became terminal for the drain timeout, ``run drain_end``, the
workers stopped and reaped (``exit`` records), then ``snapshot.json`` — so the snapshot comes
after every recorded operation.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import answers, bridge, store
from takeover._internal.config import RunConfig
from takeover._internal.db import REDIS, run_database
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.run.effectors import Effectors
from takeover._internal.run.nemesis import Nemesis
from takeover._internal.run.own_calls import OwnCalls
from takeover._internal.run.phases import COUNTERS, task_id
from takeover._internal.run.power import PowerLoss
from takeover._internal.run.probes import Prober
from takeover._internal.run.progress import Progress
from takeover._internal.run.queue_caller import QueueCaller, QueueHung
from takeover._internal.run.reached import Reached
from takeover._internal.run.registration import register_tasks
from takeover._internal.run.supervision import Supervisor, WorkerEntry
from takeover._internal.run.tally import Tally
from takeover.contract import TERMINAL_STATES, capabilities, open_queue

SNAPSHOT_EVERY = 0.25  # drain: how often the queue is asked whether everything is terminal
READY_WAIT, READY_POLL = 5.0, 0.005  # how long, and how often, the run's start waits for its workers to be ready
# The drain's clock of no progress stands still while every live worker is still starting (none has opened
# its queue yet), for at most this long: on a machine loaded far past its cores, starting a worker process
# took 18 s, and a drain that counted that time called 192 pending tasks stuck (no_lost_task) that no worker
# had yet been able to ask for.
STARTING_MAX = 60.0
STATES_TIMEOUT = 0.5  # an aimed fault's look at the task states (duplicate_register picks a task by state)


@dataclass
class RunOutcome:
    """What the run itself saw, before any check: registrations, final states, the drain, the faults
    injected, the processes. (What a checked run concluded is takeover.run_result.RunResult.)"""

    run_dir: Path
    config: RunConfig
    registered: int = 0
    states: Counter = field(default_factory=Counter)
    not_terminal: list[str] = field(default_factory=list)
    snapshot_error: str | None = None
    interrupted: bool = False
    drain_timed_out: bool = False
    drain_started: bool = False  # with ``interrupted``: stopped during the drain rather than before it
    drain_seconds: float = 0.0
    tally: Tally = field(default_factory=Tally)
    counters: dict[str, int] = field(default_factory=dict)
    spawned: int = 0
    crashes: int = 0
    service_restarts: int = 0
    elapsed: float = 0.0
    probes: int = 0  # mid-run snapshot probes answered (takeover._internal.run.probes)


class Coordinator:
    """One run of ``cfg`` into ``run_dir``: ``Coordinator(cfg, run_dir, worker=worker_main).run()``.

    ``worker`` is the entry point every worker process runs (a module-level function: the ``spawn``
    start method names it in the child). ``on_progress`` gets the :class:`Progress` model a few
    times a second and once at the end.
    """

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        *,
        worker: WorkerEntry,
        on_progress: Callable[[Progress], None] | None = None,
        database: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.database = database
        self.on_progress = on_progress
        self.hist = HistoryWriter(self.run_dir / store.HISTORY_FILE, 0)
        self.supervisor = Supervisor(cfg, self.run_dir, self.hist, worker)
        self.board = self.supervisor.board
        self.result = RunOutcome(self.run_dir, cfg)
        self.progress = Progress(duration=cfg.duration, workers=cfg.workers)
        self.queue: Any = None
        self.caller = QueueCaller()
        effectors = Effectors(self.supervisor, self.hist)
        self.nemesis = Nemesis(
            cfg,
            self.board,
            live_slots=self.supervisor.live_slots,
            probe=effectors.probe,
            release=effectors.release,
            kill=effectors.kill,
            pause=effectors.pause,
            resume=effectors.resume,
            record=self.hist.write,
            producer=_Producer(self),
        )
        self._next_task = cfg.tasks  # the index of the next task registered during the run
        self.power = PowerLoss(cfg, self.run_dir, self.supervisor, self.hist) if cfg.power_loss_rate > 0 else None
        if self.power is not None:
            self.supervisor.queue_path = self.power.queue_path
            self.power.others = self._probe_process
        self.prober: Prober | None = None
        self.site: Any = None  # the run's hosts and their server (takeover._internal.run.net_site), with --hosts
        # their partitions, connection kills and restarts (takeover._internal.run.net_faults)
        self.net_faults: Any = None

    # -- public -----------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        """The whole run. Never raises for what a worker or the queue does; returns what happened.

        The run's database is the one handed in (``database=``), else one of its own for ``cfg.db``
        (takeover._internal.db), gone when the run is: a SQLite file in the run folder, or a fresh PostgreSQL
        database on the server the command serves."""
        if self.cfg.hosts > 0:
            return self._run_on_hosts()
        if self.cfg.db == REDIS:
            return self._run_on_redis()
        if self.database is not None:
            return self._run(self.database)
        with run_database(self.cfg.db, self.run_dir) as database:
            return self._run(database)

    def _run_on_hosts(self) -> RunOutcome:
        """With ``--hosts``: the run on a network of its own, its database on a server of its own there
        (takeover._internal.run.net_site), whatever database the command made for it; all of it gone afterwards."""
        from takeover._internal.run.net_site import Site

        if self.cfg.db == REDIS:
            from takeover._internal.run.redis_site import RedisHostsSite

            site_of: Any = RedisHostsSite(self.cfg)
        else:
            site_of = Site(self.cfg.hosts, self.run_dir.name, self.cfg.net_delay, self.cfg.net_loss)
        with site_of as site:
            self.supervisor.site = site
            self._attach(site)
            return self._run(site.database)

    def _run_on_redis(self) -> RunOutcome:
        """With ``--db redis``: the run on a redis-server of its own, with the run's persistence, which the
        server faults crash, freeze and cut the connections of (takeover._internal.run.redis_site); gone afterwards."""
        from takeover._internal.run.redis_site import RedisSite

        if self.power is not None:  # the server's files on the power-loss layer, from its first write
            self.power.start()
        with RedisSite(self.cfg, self.power.server_dir if self.power is not None else None) as site:
            self._attach(site)
            return self._run(site.database)

    def _attach(self, site: Any) -> None:
        """The run's site (hosts, or its own Redis server) and the faults on it, which reach the workers by slot."""
        from takeover._internal.run.net_faults import NetworkFaults

        self.site = site
        sup = self.supervisor
        site.pid_of = lambda slot: (sup.handles[slot].proc.pid if slot in sup.handles else None)
        # The live workers that opened their queue: a connection kill has a session to end.
        self.net_faults = NetworkFaults(self.cfg, site, self.hist, lambda: {
            s: h.process for s, h in list(sup.handles.items()) if h.proc.exitcode is None and self.board.ready(s)})

    def _await_workers(self) -> None:
        """Wait until every live worker has opened the queue (at most READY_WAIT), so the run's start,
        its faulted phase and every time measured from it begin with the workers, not with their
        process start-up. A worker that died or hangs in its queue's constructor is not waited for
        past READY_WAIT: the run then starts without it, as it did before."""
        sup = self.supervisor
        end = time.time() + READY_WAIT
        while not self.signals and time.time() < end:
            live = sup.live_slots()
            if all(self.board.ready(s) for s in live):
                return
            time.sleep(READY_POLL)

    def _run(self, database: str) -> RunOutcome:
        t0 = time.time()
        if self.power is None or self.cfg.db == REDIS:  # the layer keeps the SQLite file where it can cut its power
            self.supervisor.queue_path = database
        sup = self.supervisor
        sup.open()
        faults_stopped = False
        told, bridge.on_broken = bridge.on_broken, self._adapter_broke
        try:
            store.write_config(self.run_dir, self.cfg.to_dict())
            if self.power is not None:
                self.power.start()
            try:
                self._open_queue()
            except QueueHung:
                return self.result  # interrupted or wedged while opening: the finally still records and reaps
            store.write_config(self.run_dir, self.cfg.to_dict(), capabilities(self.queue))
            if self.cfg.probe_rate > 0:
                # Started first: its start-up (a second on a loaded machine) overlaps the registration and the
                # workers', so it probes from the workers' first claims on; a probe before them judges nothing.
                self.prober = Prober(self.cfg, self.run_dir, sup.ctx, sup.queue_path)
                self.prober.start(time.time())
            self.result.registered = register_tasks(
                self.queue, self.hist, [task_id(i) for i in range(self.cfg.tasks)], time.time(), self._queue_call
            )
            sup.start_service()
            for slot in range(self.cfg.workers):
                if self.signals:  # Ctrl-C while many workers start: stop starting them (issue 34)
                    break
                sup.spawn(slot)
            self._await_workers()
            self.board.start()
            self.board.set_faults_enabled(True)
            self.hist.write("info", "run", value="start")
            start = time.time()
            self.nemesis.start(start)
            if self.net_faults is not None:
                self.net_faults.start(start)
            if self.power is not None:
                self.power.begin(start)
            self._faulted_phase(start)
            faults_stopped = self._stop_faults()
            if not self.signals:
                self._drain()
        finally:
            if not faults_stopped:
                self._stop_faults()
            if self.prober is not None:  # stopped before the run's last mark: every probe comes before it
                self.prober.stop(at_once=sup.killed_all)
                self.result.probes = self.prober.count
            if self.signals:
                self.result.interrupted = True
                self.hist.write("info", "run", value="interrupted")
            else:
                self.hist.write("info", "run", value="drain_end")
            sup.stop_workers()
            self._final_snapshot()
            sup.stop_service()
            if self.queue is not None:
                try:
                    self._queue_call("close", self.queue.close, interruptible_from=2)
                except Exception:  # noqa: BLE001 - nothing left to protect; a hung close is left behind
                    pass
            self.caller.stop()
            if self.power is not None:
                if self.cfg.db == REDIS:  # its files are open on the layer: the server goes before the mount
                    self.site.server.stop()
                self.power.close()
            bridge.on_broken = told
            self.hist.close()
            sup.close()
            self.result.tally = self.nemesis.tally
            self.result.counters = {name: self.board.total(idx) for name, idx in COUNTERS.items()}
            self.result.spawned = sup.spawned
            self.result.crashes = sup.crashes
            self.result.service_restarts = sup.service_restarts
            self.result.elapsed = time.time() - t0
            self._report_progress("finished", force=True)
        return self.result

    @property
    def signals(self) -> int:
        """Stop requests so far (signals taken by the supervisor, or :meth:`request_stop`)."""
        return self.supervisor.signals

    def _adapter_broke(self, op: str, line: str) -> None:
        """The coordinator's own adapter broke the protocol (takeover._internal.bridge): recorded as a worker's is."""
        self.hist.write("info", "adapter", value=op, detail=line)

    def request_stop(self) -> None:
        """Stop the run the way a first Ctrl-C does: faults end, no drain, the run is marked interrupted."""
        self.supervisor.signals = max(self.supervisor.signals, 1)

    def _open_queue(self) -> None:
        self.queue = self._queue_call("open", open_queue, self.cfg.queue, str(self.supervisor.queue_path))

    def _drop_queue(self) -> None:
        """At a power loss: the connection dies with the power. Its ``close()`` runs after the cut, so
        nothing it does reaches the disk; whatever it raises or however long it takes is of no interest."""
        queue, self.queue = self.queue, None
        if queue is not None:
            try:
                self._queue_call("close", queue.close)
            except Exception:  # noqa: BLE001
                pass

    def _power_loss(self) -> None:
        assert self.power is not None
        if self.cfg.db == REDIS:  # the server's machine loses its power, not the workers'
            self.power.cut_server(self.site.server)
            return
        self.power.cut(self._drop_queue, self._open_queue)
        if self.prober is not None:  # killed with the workers (it has the queue open): back on the rebooted disk
            self.prober.restart()
        self.nemesis.power_lost()

    def _probe_process(self) -> list[Any]:
        """The processes besides the workers that have the queue open: the probe process, if any."""
        proc = self.prober.alive() if self.prober is not None else None
        return [proc] if proc is not None else []

    def _queue_call(self, name: str, fn: Callable[..., Any], *args: Any, interruptible_from: int = 1) -> Any:
        """A coordinator call into the queue: given up after the drain timeout (a call that makes no
        progress for that long is stuck), or as soon as ``interruptible_from`` signals arrived, so a
        hung queue can neither hang the run nor deafen it to Ctrl-C. Raises QueueHung then."""
        return self.caller.call(name, fn, *args, timeout=self.cfg.effective_drain_timeout,
                                abandon=lambda: self.signals >= interruptible_from)  # fmt: skip

    # -- stages ------------------------------------------------------------------------------------
    def _reap(self, now: float) -> None:
        self.supervisor.reap(now, respawn=True, next_resume=self.nemesis.next_resume())

    def _faulted_phase(self, start: float) -> None:
        cfg = self.cfg
        end = start + cfg.duration
        arrival_registered = 0
        while not self.signals:
            now = time.time()
            if now >= end:
                break
            self._reap(now)
            if cfg.arrival_rate > 0:
                due = int(cfg.arrival_rate * (now - start)) - arrival_registered
                if due > 0:
                    self.register_new(due, now)
                    arrival_registered += due
            if self.power is not None and self.power.due(now):
                self._power_loss()
            wait = self.nemesis.tick(time.time())
            if self.net_faults is not None:
                wait = min(wait, self.net_faults.tick(time.time()))
            if self.power is not None:
                wait = min(wait, max(self.power.next_at - time.time(), 0.01))  # 10 ms steps while it waits
            self._report_progress("faults", elapsed=now - start)
            time.sleep(max(0.0, min(wait, end - time.time(), 0.05)))

    def register_new(self, count: int, now: float) -> list[str]:
        """Register ``count`` tasks never registered before (arrivals, and the claim stampede's)."""
        ids = [task_id(i) for i in range(self._next_task, self._next_task + count)]
        self._next_task += count
        if self.site is not None and self.queue is None:  # a reopen after a restart failed: once more
            self._reopen_on_hosts()
        done = register_tasks(self.queue, self.hist, ids, now, self._queue_call)
        self.result.registered += done
        if done < len(ids):  # with hosts, a registration that failed may have met a restart: reopen
            self._reopen_on_hosts()
        return ids

    def _stop_faults(self) -> bool:
        if self.power is not None:
            self.power.stop()
        self.board.set_faults_enabled(False)
        self.nemesis.stop()
        if self.net_faults is not None:
            self.net_faults.stop()
        self.hist.write("info", "run", value="faults_stop")
        return True

    def _drain(self) -> None:
        self.result.drain_started = True
        start = last_progress = time.time()
        # Workers that die while starting (a crash loop) are not slow to start: the clock runs for them.
        sup_crashes = self.supervisor.crashes
        timeout = self.cfg.effective_drain_timeout
        best = -1
        next_look = 0.0
        while not self.signals:
            now = time.time()
            self._reap(now)
            if now >= next_look:
                next_look = now + SNAPSHOT_EVERY
                try:
                    terminal = self._count_terminal()
                except QueueHung:
                    break
                if terminal is not None:
                    self.progress.terminal = terminal
                    if terminal > best:
                        best, last_progress = terminal, now
                    if terminal >= self.result.registered:
                        break
                if self._all_starting() and sup_crashes == self.supervisor.crashes and now - start < STARTING_MAX:
                    last_progress = now  # no worker can make progress yet: the queue is not to blame
                if now - last_progress > timeout:
                    self.result.drain_timed_out = True
                    break
            self._report_progress("drain", elapsed=now - start)
            time.sleep(0.02)
        self.result.drain_seconds = time.time() - start

    def _all_starting(self) -> bool:
        """Every live worker is still starting up: none has opened its queue since it was (re)spawned."""
        live = self.supervisor.live_slots()
        return bool(live) and not any(self.board.ready(s) for s in live)

    def _count_terminal(self) -> int | None:
        try:
            rows = answers.snapshot(self._queue_call("snapshot", self.queue.snapshot), self.cfg.queue)
        except QueueHung:
            self.result.drain_timed_out = True  # a queue that cannot answer will not drain either
            raise
        except Exception:  # noqa: BLE001 - a locked or broken queue (or a malformed answer): look again later
            self._reopen_on_hosts()
            return None
        return sum(1 for r in rows if r[1] in TERMINAL_STATES)

    def _reopen_on_hosts(self) -> bool:
        """With hosts, a coordinator call that raised may have met a connection a database restart ended,
        and a queue that does not reconnect by itself would fail every later call (the final snapshot too):
        close it and open it again, as the workers do. False when it was not reopened (no hosts, or the
        open failed: the next look tries again)."""
        if self.site is None:
            return False
        self._drop_queue()
        try:
            self._open_queue()
        except Exception:  # noqa: BLE001 - the server may still be starting: the next call tries again
            return False
        return True

    def _final_snapshot(self) -> None:
        rows, error = None, None
        if self.queue is None and self.site is not None:  # a reopen after a restart failed: once more
            self._reopen_on_hosts()
        if self.queue is None:
            error = "the queue was never opened"
        else:
            try:  # after a first Ctrl-C the snapshot is still wanted; a second one gives up on it
                rows = self._queue_call("snapshot", self.queue.snapshot, interruptible_from=2)
                rows = answers.snapshot(rows, self.cfg.queue)
            except Exception as exc:  # noqa: BLE001
                error = error_text(exc)
                if isinstance(exc, answers.MalformedAnswer | answers.QueueEscaped):  # the check names it
                    rows = None
                    self.hist.write("info", answers.ANSWER_RECORD, value="snapshot", detail=exc.what)
                if not isinstance(exc, QueueHung) and self._reopen_on_hosts():
                    try:
                        rows, error = self._queue_call("snapshot", self.queue.snapshot, interruptible_from=2), None
                    except Exception as again:  # noqa: BLE001
                        error = error_text(again)
        store.write_snapshot(self.run_dir, rows, error)
        self.result.snapshot_error = error
        if rows is not None:
            self.result.states = Counter(str(r[1]) for r in rows)
            self.result.not_terminal = [str(r[0]) for r in rows if r[1] not in TERMINAL_STATES]
            self.progress.terminal = len(rows) - len(self.result.not_terminal)

    # -- progress ----------------------------------------------------------------------------------
    _last_report = 0.0

    def _report_progress(self, stage: str, elapsed: float | None = None, force: bool = False) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last_report < 0.25:
            return
        self._last_report = now
        p = self.progress
        p.stage = stage
        if elapsed is not None:
            p.elapsed = elapsed
        p.observe(self.board, self.nemesis.tally, registered=self.result.registered,
                  alive=len(self.supervisor.live_slots()))  # fmt: skip
        if self.prober is not None:
            p.probes = self.prober.count
        self.on_progress(p)


class _Producer:
    """The coordinator as the aimed faults' producer: fresh tasks, repeated registrations, the states."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.c = coordinator
        self._reached: Reached | None = None  # read on from where it left off, at each aim_unreached window
        self._own: OwnCalls | None = None

    def register_new(self) -> str | None:
        ids = self.c.register_new(1, time.time())
        return ids[0] if ids else None

    def register_again(self, ids: Sequence[str]) -> int:
        """Registered again: the history gets the same records as a first registration (the checker
        tells a repeat by the task id); ``registered`` does not count it twice."""
        c = self.c
        return register_tasks(c.queue, c.hist, list(ids), time.time(), c._queue_call)

    def capabilities(self) -> dict[str, bool]:
        """The open queue's optional methods (none before it is open)."""
        return capabilities(self.c.queue) if self.c.queue is not None else {}

    def reached(self) -> set[str]:
        """The cells the history reached so far (takeover._internal.run.reached): read on from the last look."""
        c = self.c
        if self._reached is None:
            self._reached = Reached(c.run_dir / store.HISTORY_FILE, c.cfg.lease)
        return set(self._reached.update())

    def rows(self) -> list[tuple[str, str, int, float | None]] | None:
        """The snapshot's rows (task, state, generation, lease_until), or None (see :meth:`states`)."""
        c = self.c
        try:
            rows = c.caller.call("snapshot", c.queue.snapshot, timeout=STATES_TIMEOUT, abandon=lambda: c.signals >= 1)
        except Exception:  # noqa: BLE001 - a locked or broken queue: the window misses
            return None
        out = []
        for r in rows:
            try:
                out.append((str(r[0]), str(r[1]), int(r[2]), None if r[3] is None else float(r[3])))
            except (TypeError, ValueError, IndexError):
                continue  # a malformed row is the checker's to name (the final snapshot); not a target
        return out

    def ask(self, op: str, task: str, gen: int) -> bool | float | None:
        """One of the coordinator's own recorded calls (takeover._internal.run.own_calls); none while the queue is not
        open (a power loss took it): nothing is asked, nothing recorded."""
        c = self.c
        if c.queue is None:
            return None
        if self._own is None:
            call = lambda name, fn, *args: c.caller.call(  # noqa: E731
                name, fn, *args, timeout=STATES_TIMEOUT, abandon=lambda: c.signals >= 1)
            self._own = OwnCalls(c.hist, c.cfg.lease, c.run_dir / store.LEDGER_FILE, call, c.cfg.queue)
        return self._own.ask(c.queue, op, task, gen)

    def states(self) -> list[tuple[str, str]] | None:
        """The queue's snapshot, given up after STATES_TIMEOUT: the faulted phase's loop must not wait
        for a queue that hangs in snapshot() (the drain's deadline is minutes long)."""
        c = self.c
        try:
            rows = c.caller.call("snapshot", c.queue.snapshot, timeout=STATES_TIMEOUT, abandon=lambda: c.signals >= 1)
        except Exception:  # noqa: BLE001 - a locked or broken queue: the fault picks a running task or misses
            return None
        return [(str(r[0]), str(r[1])) for r in rows]
