"""Supervision: every child process of a run — started, watched, signalled, reaped and restarted.

Why one owner for the processes: the run loop, the fault effectors and a Ctrl-C all act on the same
workers and the same service. Keeping the handles, the respawn plan and the coordinator's own signal
handlers in one object means a process is started, killed or reaped in one place only, and every
such event is written to the history (process 0) in the order it happened.

Processes are started with the ``spawn`` method: nothing (no SQLite connection, no lock, no thread)
is inherited from the coordinator, so a child can never corrupt the coordinator's connection and
vice versa. Children die with the coordinator (:mod:`takeover._internal.lifeline`) and carry
``TAKEOVER_RUN_DIR`` in their environment, so stragglers of a run can be found.

What a worker process runs is not decided here: the caller hands in the worker's entry point (a
module-level function, so that ``spawn`` can name it in the child), which receives a
:class:`WorkerSpec` and the phase board. This package therefore never imports the workload.

Signals: the first SIGINT, SIGTERM or SIGHUP only counts (the run loop sees ``signals`` and stops
cleanly); the second SIGKILLs every child at once, and the normal shutdown path then reaps them.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.config import RunConfig
from takeover._internal.history import HistoryWriter
from takeover._internal.lifeline import RUN_ENV, die_with_parent, parent_alive, quiet_spawn
from takeover._internal.run.phases import PhaseBoard
from takeover._internal.run.service import (
    ServiceAddress,
    ServiceSpec,
    address_of,
    listen_local,
    listen_path,
    service_main,
)

STOP_GRACE = 2.0  # seconds a worker gets to leave on its own before SIGTERM, then SIGKILL
RESPAWN_BACKOFF = 0.2  # a worker that exits by itself (a crash) is restarted after this
# Starting a process takes milliseconds (more on a loaded machine): no respawn begins when a paused
# worker is due to be resumed within this window, so the pause ends when planned; but no respawn
# waits longer than RESPAWN_DEFER_MAX for that.
SPAWN_QUIET = 0.05
RESPAWN_DEFER_MAX = 1.0


# A worker process's entry point: called in the child with its spec and the shared phase board.
WorkerEntry = Callable[["WorkerSpec", PhaseBoard], None]


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker incarnation is told when it starts (pickled into the spawned process)."""

    config: RunConfig
    slot: int
    process: int
    queue_path: str  # the run's database: a SQLite path or a postgresql:// URL (takeover._internal.db)
    history_path: str
    service_address: ServiceAddress
    parent_pid: int
    host: str = ""  # the host it runs on (``h2``) in a run with --hosts (takeover._internal.net); "" on this machine
    netns: str = ""  # that host's network namespace (``/proc/PID/ns/net``), entered first thing


def on_host(entry: WorkerEntry, spec: WorkerSpec, board: PhaseBoard) -> None:
    """A worker's entry point on its host: into the host's network namespace, then the worker itself."""
    from takeover._internal.net.namespaces import enter

    die_with_parent(spec.parent_pid)  # a coordinator SIGKILLed while this one started: leave, quietly
    try:
        enter(spec.netns)
    except OSError:  # the host's namespace went with a coordinator that died meanwhile (/proc/N/ns/net)
        if not parent_alive(spec.parent_pid):
            os._exit(70)
        raise
    entry(spec, board)




@dataclass
class Handle:
    slot: int
    process: int
    proc: Any  # multiprocessing.Process
    started: float


class Supervisor:
    """The run's worker processes (one per slot, a new incarnation after each death) and its service."""

    def __init__(self, cfg: RunConfig, run_dir: Path, hist: HistoryWriter, worker: WorkerEntry) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.hist = hist
        self.worker = worker
        quiet_spawn()  # a child whose coordinator is SIGKILLed while it starts leaves without a traceback
        self.ctx = multiprocessing.get_context("spawn")
        self.board = PhaseBoard.create(self.ctx, cfg.workers)
        self.handles: dict[int, Handle] = {}
        # The run's database, as every process opens the queue on it (takeover._internal.db), set by the coordinator:
        # the SQLite file (elsewhere when the power-loss layer holds it), or a PostgreSQL database's URL.
        self.queue_path: Path | str = run_dir / store.QUEUE_FILE
        self.respawn_at: dict[int, float] = {}
        self.next_process = 1
        self.service: Any = None
        self.listener: socket.socket | None = None
        self.address: ServiceAddress = 0
        self.signals = 0  # stop requests so far: SIGINT, SIGTERM, SIGHUP (or a caller's request)
        self.killed_all = False  # a second signal SIGKILLed every child
        self.spawned = 0
        self.crashes = 0
        self.service_restarts = 0
        self._old_handlers: dict[int, Any] = {}
        self._old_env: str | None = None
        # the run's hosts (takeover._internal.run.net_site.Site), set by the coordinator; None: here
        self.site: Any = None

    # -- around the run -----------------------------------------------------------------------------
    def open(self) -> None:
        """Before the first child: take the signals, and mark the environment children inherit."""
        self._old_handlers = self._install_signals()
        self._old_env = os.environ.get(RUN_ENV)
        # multiprocessing's shared resource tracker outlives one run in a long-lived caller (tests):
        # start it before the run's marker is set so that it is not mistaken for a straggler.
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        os.environ[RUN_ENV] = str(self.run_dir.absolute())

    def close(self) -> None:
        """After the last child is reaped: give the signals and the environment back."""
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        if self._old_env is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = self._old_env

    # -- signals ------------------------------------------------------------------------------------
    def _install_signals(self) -> dict[int, Any]:
        def handler(signum: int, _frame: Any) -> None:
            self.signals += 1
            if self.signals >= 2:
                self.kill_everything()

        old: dict[int, Any] = {}
        # SIGHUP (the terminal went away, an ssh session dropped) is a stop request like SIGTERM: by
        # default it would kill the coordinator outright, with no snapshot and no interrupted mark.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                old[sig] = signal.signal(sig, handler)
            except ValueError:
                pass  # not the main thread: the caller handles interruption
        return old

    def kill_everything(self) -> None:
        """Second Ctrl-C: no more courtesy. Children are reaped by the normal shutdown path."""
        self.killed_all = True
        for h in list(self.handles.values()):
            send(h.proc.pid, signal.SIGKILL)
        if self.service is not None:
            send(self.service.pid, signal.SIGKILL)

    # -- starting -----------------------------------------------------------------------------------
    def start_service(self) -> None:
        if self.listener is None:
            self.listener = listen_local() if self.site is None else listen_path(self.site.service_socket)
            self.address = address_of(self.listener)
        spec = ServiceSpec(str(self.run_dir / store.LEDGER_FILE), self.cfg.remedy, os.getpid())
        self.service = self.ctx.Process(target=service_main, args=(spec, self.listener), name="takeover-service")
        self.service.daemon = True
        start_shielded(self.service)

    def spawn(self, slot: int) -> None:
        process = self.next_process
        self.next_process += 1
        site = self.site
        spec = WorkerSpec(
            config=self.cfg,
            slot=slot,
            process=process,
            queue_path=str(self.queue_path) if site is None else site.worker_url(slot, process),
            history_path=str(self.run_dir / store.HISTORY_FILE),
            service_address=self.address,
            parent_pid=os.getpid(),
            host="" if site is None else site.host_name(slot),
            netns="" if site is None else site.netns_of(slot),
        )
        self.board.set_owner(slot, process, 0)
        target, args = (self.worker, (spec, self.board)) if site is None else (on_host, (self.worker, spec, self.board))
        proc = self.ctx.Process(target=target, args=args, name=f"takeover-w{slot}")
        proc.daemon = True
        start_shielded(proc)
        assert proc.pid is not None  # set by start()
        self.board.set_owner(slot, process, proc.pid)
        self.handles[slot] = Handle(slot, process, proc, time.time())
        self.spawned += 1
        self.hist.write("ok", "spawn", target=process, worker=f"w{slot}", pid=proc.pid,
                        **({"host": spec.host} if spec.host else {}))  # fmt: skip

    # -- watching and reaping -----------------------------------------------------------------------
    def live_slots(self) -> list[int]:
        return [s for s, h in self.handles.items() if h.proc.exitcode is None]

    def worker_pids(self) -> tuple[int, ...]:
        """The workers' pids (read from another thread by the soak's resource sampler)."""
        return tuple(h.proc.pid for h in list(self.handles.values()) if h.proc.pid)

    def service_pid(self) -> int | None:
        service = self.service
        return service.pid if service is not None else None

    def record_exit(self, h: Handle, detail: str | None = None) -> None:
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

    def dismiss(self, slot: int) -> None:
        """A worker killed on purpose and already reaped: forget it, and unless the run is stopping,
        start its next incarnation at the loop's next turn (not here: a paused worker may be due first)."""
        del self.handles[slot]
        if self.signals == 0:
            self.respawn_at[slot] = time.time()

    def reap(self, now: float, respawn: bool, next_resume: float | None) -> None:
        """Workers that left without being killed (a crash in a user's queue, say) come back, and so
        does a dead service. ``next_resume`` is when the nemesis means to resume a paused worker."""
        for slot, h in list(self.handles.items()):
            if h.proc.exitcode is not None:
                h.proc.join(0)
                self.record_exit(h, "unexpected")
                del self.handles[slot]
                self.crashes += 1
                if respawn:
                    self.respawn_at[slot] = now + RESPAWN_BACKOFF
        for slot, at in list(self.respawn_at.items()):
            if respawn and now >= at:
                if next_resume is not None and next_resume - time.time() < SPAWN_QUIET and now - at < RESPAWN_DEFER_MAX:
                    continue  # after the resume: the loop comes back within milliseconds
                del self.respawn_at[slot]
                self.spawn(slot)
        if self.service is not None and self.service.exitcode is not None and respawn:
            self.service.join(0)
            old_pid, code = self.service.pid, self.service.exitcode
            self.service_restarts += 1
            self.start_service()
            # In the history too: actions that failed meanwhile ("connection refused") are explained
            self.hist.write("info", "service", value="restart", pid=self.service.pid,
                            error=f"the service (pid {old_pid}) exited with {code}")  # fmt: skip

    # -- stopping -----------------------------------------------------------------------------------
    def stop_workers(self) -> None:
        """Ask, then SIGTERM, then SIGKILL: every worker is gone and reaped before this returns."""
        self.respawn_at.clear()
        self.board.request_stop()
        for sig, wait in ((None, STOP_GRACE), (signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            live = [h for h in self.handles.values() if h.proc.exitcode is None]
            if not live:
                break
            if sig is not None:
                for h in live:
                    send(h.proc.pid, signal.SIGCONT)
                    send(h.proc.pid, sig)
            deadline = time.time() + wait
            while time.time() < deadline and any(h.proc.exitcode is None for h in live):
                time.sleep(0.01)
        for h in list(self.handles.values()):
            h.proc.join(1.0)
            # -9 alone means the nemesis (docs/history.md): say when the harness itself killed it
            self.record_exit(h, "second_signal" if self.killed_all else "stopped")
        self.handles.clear()

    def stop_service(self) -> None:
        # pid is None when start() itself failed: there is nothing to stop, and joining an
        # unstarted process would raise over the error that explains the failure.
        if self.service is not None and self.service.pid is not None:
            send(self.service.pid, signal.SIGTERM)
            self.service.join(3.0)
            if self.service.exitcode is None:
                send(self.service.pid, signal.SIGKILL)
                self.service.join(5.0)
        if self.listener is not None:
            self.listener.close()


def send(pid: int | None, sig: int) -> None:
    """A signal to a child that may already be gone (then nothing happens). A child that leads a process
    group of its own (a worker of an ``exec:`` queue, with its adapter: takeover._internal.bridge) gets it with its
    whole group, so its adapter is frozen, resumed and killed with it."""
    if pid:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def start_shielded(proc: Any) -> None:
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


def wait_stopped(pid: int, timeout: float = 0.05) -> bool:
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
