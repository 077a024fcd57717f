"""The runner: sets up a run, starts and watches every process, drives the nemesis, drains, reaps.

Why one single-threaded loop: every decision that touches processes (kill, pause, resume,
respawn, stop) happens in one place and one order, so the history's process-0 records are in a
true order and signal handlers only need to set a flag. The loop never blocks for long; the
nemesis tells it how long it may sleep (about 1 ms while hunting for a phase).

Processes are started with the ``spawn`` method: nothing (no SQLite connection, no lock, no
thread) is inherited from the coordinator, so a child can never corrupt the coordinator's
connection and vice versa. Children die with the coordinator (takeover.run.lifeline) and carry
``TAKEOVER_RUN_DIR`` in their environment.

The coordinator's own calls into the queue (open, register, snapshot, close) go through
:mod:`takeover.run.queue_caller`: each has a deadline (the drain timeout) and gives way to Ctrl-C, so a
queue that blocks can neither hang the run nor make it deaf to signals.

Order of the end (docs/history.md): ``run faults_stop`` (paused workers resumed), the drain until
every task is terminal or no task became terminal for the drain timeout, ``run drain_end``, the
workers stopped and reaped (``exit`` records), then ``snapshot.json`` — so the snapshot comes
after every recorded operation.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover.config import CONFIG_FILE, RunConfig
from takeover.contract import TERMINAL_STATES, has_extension, open_queue
from takeover.history import HISTORY_FILE, HistoryWriter
from takeover.run.ledger import LEDGER_FILE
from takeover.run.lifeline import RUN_ENV
from takeover.run.nemesis import Nemesis, Pause, Tally
from takeover.run.phases import COUNTERS, PhaseBoard, SlotView, task_id
from takeover.run.queue_caller import QueueCaller, QueueHung
from takeover.run.service import ServiceSpec, listen, service_main
from takeover.rundir import QUEUE_FILE, write_snapshot

STOP_GRACE = 2.0  # seconds a worker gets to leave on its own before SIGTERM, then SIGKILL
SNAPSHOT_EVERY = 0.25  # drain: how often the queue is asked whether everything is terminal
RESPAWN_BACKOFF = 0.2  # a worker that exits by itself (a crash) is restarted after this
# Starting a process takes milliseconds (more on a loaded machine): no respawn begins when a paused
# worker is due to be resumed within this window, so the pause ends when planned; but no respawn
# waits longer than RESPAWN_DEFER_MAX for that.
SPAWN_QUIET = 0.05
RESPAWN_DEFER_MAX = 1.0


@dataclass
class Handle:
    slot: int
    process: int
    proc: Any  # multiprocessing.Process
    started: float


@dataclass
class RunResult:
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


@dataclass
class Progress:
    """What the progress display shows; updated by the loop, read by a renderer."""

    stage: str = "starting"
    elapsed: float = 0.0
    duration: float = 0.0
    registered: int = 0
    terminal: int | None = None
    done: int = 0
    actions: int = 0
    kills: int = 0
    kill_hits: int = 0
    pauses: int = 0
    lost_replies: int = 0
    slow: int = 0
    alive: int = 0
    workers: int = 0


def _direct(_name: str, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def register_tasks(
    queue: Any, hist: HistoryWriter, ids: list[str], now: float, call: Callable[..., Any] = _direct
) -> int:
    """Register tasks with an invoke/completion pair each; one transaction when the queue allows.

    Kept apart from the run so a soak can register continuously at a rate. ``call(name, fn, *args)``
    makes the queue call (the coordinator passes one with a deadline: a hung register is ``info``).
    """
    if not ids:
        return 0
    for tid in ids:
        hist.write("invoke", "register", task=tid, now=now)
    if has_extension(queue, "register_many"):
        try:
            call("register_many", queue.register_many, ids, now)
        except Exception as exc:  # noqa: BLE001 - unknown outcome, recorded as such
            for tid in ids:
                hist.write("info", "register", task=tid, error=_one_line(exc))
            return 0
        for tid in ids:
            hist.write("ok", "register", task=tid)
        return len(ids)
    count = 0
    for tid in ids:
        try:
            call("register", queue.register, tid, now)
        except QueueHung as exc:  # the queue is wedged: the rest would only wait behind it
            for rest in ids[ids.index(tid) :]:
                hist.write("info", "register", task=rest, error=_one_line(exc))
            break
        except Exception as exc:  # noqa: BLE001
            hist.write("info", "register", task=tid, error=_one_line(exc))
            continue
        hist.write("ok", "register", task=tid)
        count += 1
    return count


class Coordinator:
    def __init__(
        self,
        cfg: RunConfig,
        run_dir: Path,
        *,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.on_progress = on_progress
        self.ctx = multiprocessing.get_context("spawn")
        self.board = PhaseBoard.create(self.ctx, cfg.workers)
        self.hist = HistoryWriter(self.run_dir / HISTORY_FILE, 0)
        self.handles: dict[int, Handle] = {}
        self.respawn_at: dict[int, float] = {}
        self.next_process = 1
        self.result = RunResult(self.run_dir, cfg)
        self.progress = Progress(duration=cfg.duration, workers=cfg.workers)
        self.signals = 0
        self.killed_all = False  # a second signal SIGKILLed every child
        self.queue: Any = None
        self.caller = QueueCaller()
        self.service: Any = None
        self.listener: socket.socket | None = None
        self.port = 0
        self.nemesis = Nemesis(
            cfg,
            self.board,
            live_slots=self._live_slots,
            probe=self._probe,
            release=self._release,
            kill=self._kill,
            pause=self._pause,
            resume=self._resume,
        )

    # -- public -----------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """The whole run. Never raises for what a worker or the queue does; returns what happened."""
        t0 = time.time()
        old_handlers = self._install_signals()
        old_env = os.environ.get(RUN_ENV)
        # multiprocessing's shared resource tracker outlives one run in a long-lived caller (tests):
        # start it before the run's marker is set so that it is not mistaken for a straggler.
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        os.environ[RUN_ENV] = str(self.run_dir.absolute())
        faults_stopped = False
        try:
            (self.run_dir / CONFIG_FILE).write_text(self.cfg.to_json())
            try:
                self.queue = self._queue_call("open", open_queue, self.cfg.queue, str(self.run_dir / QUEUE_FILE))
            except QueueHung:
                return self.result  # interrupted or wedged while opening: the finally still records and reaps
            self.result.registered = register_tasks(
                self.queue, self.hist, [task_id(i) for i in range(self.cfg.tasks)], time.time(), self._queue_call
            )
            self._start_service()
            for slot in range(self.cfg.workers):
                self._spawn(slot)
            self.board.set_faults_enabled(True)
            self.hist.write("info", "run", value="start")
            start = time.time()
            self.nemesis.start(start)
            self._faulted_phase(start)
            faults_stopped = self._stop_faults()
            if not self.signals:
                self._drain()
        finally:
            if not faults_stopped:
                self._stop_faults()
            if self.signals:
                self.result.interrupted = True
                self.hist.write("info", "run", value="interrupted")
            else:
                self.hist.write("info", "run", value="drain_end")
            self._stop_workers()
            self._final_snapshot()
            self._stop_service()
            if self.queue is not None:
                try:
                    self._queue_call("close", self.queue.close, interruptible_from=2)
                except Exception:  # noqa: BLE001 - nothing left to protect; a hung close is left behind
                    pass
            self.caller.stop()
            self.hist.close()
            self._restore_signals(old_handlers)
            if old_env is None:
                os.environ.pop(RUN_ENV, None)
            else:
                os.environ[RUN_ENV] = old_env
            self.result.tally = self.nemesis.tally
            self.result.counters = {name: self.board.total(idx) for name, idx in COUNTERS.items()}
            self.result.elapsed = time.time() - t0
            self._report_progress("finished", force=True)
        return self.result

    def _queue_call(self, name: str, fn: Callable[..., Any], *args: Any, interruptible_from: int = 1) -> Any:
        """A coordinator call into the queue: given up after the drain timeout (a call that makes no
        progress for that long is stuck), or as soon as ``interruptible_from`` signals arrived, so a
        hung queue can neither hang the run nor deafen it to Ctrl-C. Raises QueueHung then."""
        return self.caller.call(name, fn, *args, timeout=self.cfg.effective_drain_timeout,
                                abandon=lambda: self.signals >= interruptible_from)  # fmt: skip

    # -- signals ------------------------------------------------------------------------------------
    def _install_signals(self) -> dict[int, Any]:
        def handler(signum: int, _frame: Any) -> None:
            self.signals += 1
            if self.signals >= 2:
                self._kill_everything()

        old = {}
        # SIGHUP (the terminal went away, an ssh session dropped) is a stop request like SIGTERM: by
        # default it would kill the coordinator outright, with no snapshot and no interrupted mark.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                old[sig] = signal.signal(sig, handler)
            except ValueError:
                pass  # not the main thread: the caller handles interruption
        return old

    def _restore_signals(self, old: dict[int, Any]) -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    def _kill_everything(self) -> None:
        """Second Ctrl-C: no more courtesy. Children are reaped by the normal shutdown path."""
        self.killed_all = True
        for h in list(self.handles.values()):
            _signal(h.proc.pid, signal.SIGKILL)
        if self.service is not None:
            _signal(self.service.pid, signal.SIGKILL)

    # -- processes -----------------------------------------------------------------------------------
    def _start_service(self) -> None:
        if self.listener is None:
            self.listener = listen()
            self.port = self.listener.getsockname()[1]
        spec = ServiceSpec(str(self.run_dir / LEDGER_FILE), self.cfg.remedy, os.getpid())
        self.service = self.ctx.Process(target=service_main, args=(spec, self.listener), name="takeover-service")
        self.service.daemon = True
        _start_shielded(self.service)

    def _spawn(self, slot: int) -> None:
        from takeover.workloads.worker import WorkerSpec, worker_main

        process = self.next_process
        self.next_process += 1
        spec = WorkerSpec(
            config=self.cfg,
            slot=slot,
            process=process,
            queue_path=str(self.run_dir / QUEUE_FILE),
            history_path=str(self.run_dir / HISTORY_FILE),
            service_port=self.port,
            parent_pid=os.getpid(),
        )
        self.board.set_owner(slot, process, 0)
        proc = self.ctx.Process(target=worker_main, args=(spec, self.board), name=f"takeover-w{slot}")
        proc.daemon = True
        _start_shielded(proc)
        self.board.set_owner(slot, process, proc.pid)
        self.handles[slot] = Handle(slot, process, proc, time.time())
        self.result.spawned += 1
        self.hist.write("ok", "spawn", target=process, worker=f"w{slot}", pid=proc.pid)

    def _record_exit(self, h: Handle, detail: str | None = None) -> None:
        extra = {"detail": detail} if detail else {}
        self.hist.write("ok", "exit", target=h.process, worker=f"w{h.slot}", pid=h.proc.pid,
                        value=str(h.proc.exitcode), **extra)  # fmt: skip
        if h.proc.exitcode is not None:
            # Faults the worker recorded itself (slow, lose_reply) and could not close: their end is
            # unknown, as an operation's whose process died. Written under the worker's process
            # number so the checker pairs them with their invoke (docs/history.md).
            for kind in self.board.open_faults(h.slot):
                self.hist.write("info", kind, process=h.process, target=h.process, worker=f"w{h.slot}",
                                error="process died")  # fmt: skip

    def _live_slots(self) -> list[int]:
        return [s for s, h in self.handles.items() if h.proc.exitcode is None]

    def _reap(self, now: float, respawn: bool) -> None:
        """Workers that left without being killed (a crash in a user's queue, say) come back."""
        for slot, h in list(self.handles.items()):
            if h.proc.exitcode is not None:
                h.proc.join(0)
                self._record_exit(h, "unexpected")
                del self.handles[slot]
                self.result.crashes += 1
                if respawn:
                    self.respawn_at[slot] = now + RESPAWN_BACKOFF
        for slot, at in list(self.respawn_at.items()):
            if respawn and now >= at:
                due = self.nemesis.next_resume()
                if due is not None and due - time.time() < SPAWN_QUIET and now - at < RESPAWN_DEFER_MAX:
                    continue  # after the resume: the loop comes back within milliseconds
                del self.respawn_at[slot]
                self._spawn(slot)
        if self.service is not None and self.service.exitcode is not None and respawn:
            self.service.join(0)
            old_pid, code = self.service.pid, self.service.exitcode
            self.result.service_restarts += 1
            self._start_service()
            # In the history too: actions that failed meanwhile ("connection refused") are explained
            self.hist.write("info", "service", value="restart", pid=self.service.pid,
                            error=f"the service (pid {old_pid}) exited with {code}")  # fmt: skip

    def _kill(self, slot: int, aim: str, view: SlotView) -> str:
        """SIGKILL, reap, and read the phase the dead process left on the board: the truth."""
        h = self.handles[slot]
        fields = _held(view)
        self.hist.write("invoke", "kill", target=h.process, worker=f"w{slot}", pid=h.proc.pid, value=aim,
                        phase=view.phase, **fields)  # fmt: skip
        _signal(h.proc.pid, signal.SIGKILL)
        h.proc.join(5.0)
        after = self.board.read(slot)
        self._record_exit(h, "nemesis")
        fields = _held(after)
        self.hist.write("ok", "kill", target=h.process, worker=f"w{slot}", value=aim, phase=after.phase, **fields)
        del self.handles[slot]
        if self.signals == 0:
            self.respawn_at[slot] = time.time()  # by the loop, not here: a paused worker may be due first
        return after.phase

    def _probe(self, slot: int) -> SlotView | None:
        """Freeze a worker and read where it really is; None if it is gone."""
        h = self.handles.get(slot)
        if h is None or h.proc.exitcode is not None:
            return None
        _signal(h.proc.pid, signal.SIGSTOP)
        if not _wait_stopped(h.proc.pid):
            _signal(h.proc.pid, signal.SIGCONT)
            return None
        return self.board.read(slot)

    def _release(self, slot: int) -> None:
        h = self.handles.get(slot)
        if h is not None:
            _signal(h.proc.pid, signal.SIGCONT)

    def _pause(self, slot: int, pause: Pause) -> None:
        """The worker is already stopped by the probe; the invoke marks the pause's start."""
        h = self.handles[slot]
        v = pause.view
        self.hist.write("invoke", "pause", target=h.process, worker=f"w{slot}", pid=h.proc.pid,
                        value=f"{pause.planned:.4f}", phase=v.phase, lease_until=v.lease_until,
                        detail=pause.klass, **_held(v))  # fmt: skip

    def _resume(self, pause: Pause) -> None:
        h = self.handles.get(pause.slot)
        alive = h is not None and h.process == pause.process and h.proc.exitcode is None and not self.killed_all
        if not alive:  # killed while frozen (a second Ctrl-C, someone else's SIGKILL): no end to report
            self.hist.write("info", "pause", target=pause.process, worker=f"w{pause.slot}", detail=pause.klass,
                            error="the paused worker died before it could be resumed",
                            lease_until=pause.view.lease_until, **_held(pause.view))  # fmt: skip
            return
        _signal(h.proc.pid, signal.SIGCONT)
        actual = time.time() - pause.started
        self.hist.write("ok", "pause", target=pause.process, worker=f"w{pause.slot}",
                        value=f"{actual:.4f}", detail=pause.klass, late=round(actual - pause.planned, 4),
                        lease_until=pause.view.lease_until, **_held(pause.view))  # fmt: skip

    # -- stages ------------------------------------------------------------------------------------
    def _faulted_phase(self, start: float) -> None:
        cfg = self.cfg
        end = start + cfg.duration
        arrival_registered = 0
        while not self.signals:
            now = time.time()
            if now >= end:
                break
            self._reap(now, respawn=True)
            if cfg.arrival_rate > 0:
                due = int(cfg.arrival_rate * (now - start)) - arrival_registered
                if due > 0:
                    first = cfg.tasks + arrival_registered
                    ids = [task_id(i) for i in range(first, first + due)]
                    self.result.registered += register_tasks(self.queue, self.hist, ids, now, self._queue_call)
                    arrival_registered += due
            wait = self.nemesis.tick(time.time())
            self._report_progress("faults", elapsed=now - start)
            time.sleep(max(0.0, min(wait, end - time.time(), 0.05)))

    def _stop_faults(self) -> bool:
        self.board.set_faults_enabled(False)
        self.nemesis.stop()
        self.hist.write("info", "run", value="faults_stop")
        return True

    def _drain(self) -> None:
        self.result.drain_started = True
        start = last_progress = time.time()
        timeout = self.cfg.effective_drain_timeout
        best = -1
        next_look = 0.0
        while not self.signals:
            now = time.time()
            self._reap(now, respawn=True)
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
                if now - last_progress > timeout:
                    self.result.drain_timed_out = True
                    break
            self._report_progress("drain", elapsed=now - start)
            time.sleep(0.02)
        self.result.drain_seconds = time.time() - start

    def _count_terminal(self) -> int | None:
        try:
            rows = self._queue_call("snapshot", self.queue.snapshot)
        except QueueHung:
            self.result.drain_timed_out = True  # a queue that cannot answer will not drain either
            raise
        except Exception:  # noqa: BLE001 - a locked or broken queue: look again later
            return None
        return sum(1 for r in rows if r[1] in TERMINAL_STATES)

    def _stop_workers(self) -> None:
        """Ask, then SIGTERM, then SIGKILL: every worker is gone and reaped before this returns."""
        self.respawn_at.clear()
        self.board.request_stop()
        deadline = time.time() + STOP_GRACE
        for sig, wait in ((None, STOP_GRACE), (signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            live = [h for h in self.handles.values() if h.proc.exitcode is None]
            if not live:
                break
            if sig is not None:
                for h in live:
                    _signal(h.proc.pid, signal.SIGCONT)
                    _signal(h.proc.pid, sig)
            deadline = time.time() + wait
            while time.time() < deadline and any(h.proc.exitcode is None for h in live):
                time.sleep(0.01)
        for h in list(self.handles.values()):
            h.proc.join(1.0)
            # -9 alone means the nemesis (docs/history.md): say when the harness itself killed it
            self._record_exit(h, "second_signal" if self.killed_all else "stopped")
        self.handles.clear()

    def _stop_service(self) -> None:
        # pid is None when start() itself failed: there is nothing to stop, and joining an
        # unstarted process would raise over the error that explains the failure.
        if self.service is not None and self.service.pid is not None:
            _signal(self.service.pid, signal.SIGTERM)
            self.service.join(3.0)
            if self.service.exitcode is None:
                _signal(self.service.pid, signal.SIGKILL)
                self.service.join(5.0)
        if self.listener is not None:
            self.listener.close()

    def _final_snapshot(self) -> None:
        rows, error = None, None
        if self.queue is None:
            error = "the queue was never opened"
        else:
            try:  # after a first Ctrl-C the snapshot is still wanted; a second one gives up on it
                rows = self._queue_call("snapshot", self.queue.snapshot, interruptible_from=2)
            except Exception as exc:  # noqa: BLE001
                error = _one_line(exc)
        write_snapshot(self.run_dir, rows, error)
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
        p, t, b = self.progress, self.nemesis.tally, self.board
        p.stage = stage
        if elapsed is not None:
            p.elapsed = elapsed
        p.registered = self.result.registered
        p.done = b.total(COUNTERS["done"])
        p.actions = b.total(COUNTERS["actions"])
        p.lost_replies = b.total(COUNTERS["lose_reply"])
        p.slow = b.total(COUNTERS["slow"])
        p.kills = sum(t.kills.values())
        p.kill_hits = sum(t.kill_hits.values())
        p.pauses = sum(t.pauses.values())
        p.alive = len(self._live_slots())
        self.on_progress(p)


def _held(view: SlotView) -> dict[str, Any]:
    if view.task < 0:
        return {}
    return {"task": task_id(view.task), "gen": view.gen}


def _signal(pid: int | None, sig: int) -> None:
    if pid:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _start_shielded(proc: Any) -> None:
    """Start a child with SIGINT and SIGHUP blocked: the mask is inherited across fork and exec, so a
    Ctrl-C (or a hangup) that reaches the whole process group while the child is still importing
    cannot kill it with a KeyboardInterrupt traceback; the child keeps them blocked or ignored for
    good (stopping is the coordinator's to handle). A signal for the coordinator is only held back
    until start returns."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
    try:
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _wait_stopped(pid: int, timeout: float = 0.05) -> bool:
    """SIGSTOP is asynchronous: wait until the kernel shows the process stopped (Linux /proc)."""
    path = f"/proc/{pid}/stat"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as fh:
                stat = fh.read()
        except OSError:
            if not os.path.exists("/proc/self/stat"):
                time.sleep(0.002)  # no /proc: give the signal a moment
                return True
            return False  # gone
        state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
        if state in (b"T", b"t"):
            return True
        if state in (b"Z", b"X") or time.monotonic() > deadline:
            return False
        time.sleep(0)


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
