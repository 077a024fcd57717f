"""Mid-run snapshot probes (``--probe-rate``): the queue's table read while the run goes on.

Why: some bugs leave no wrong answer behind, only a wrong table. A finish that answers True and is
rolled back, a ``register`` that resets a running task: nothing any worker is told is wrong, so
until now only the final snapshot (after the drain) or a much later second hand-out showed them.
As Jepsen reads a register while it is written, a probe reads the whole table (the contract's
``snapshot()``) at seeded instants of the run; the checker judges each probe against what the
history had acknowledged before it (takeover._internal.checker.probes), so a lost commit is seen within a
fraction of a second.

Why a process of its own, not the coordinator: ``snapshot()`` of a large queue takes long enough
(tens of milliseconds for 100k tasks, plus the rows' Python objects under the GIL) to shift the
nemesis' millisecond-wide windows, and a user's queue may hang in it. The probe process opens the
queue on its own connection, as a worker does, and runs its own clock: it never makes the
coordinator wait. It is killed like a worker: at a power loss with the workers (it has the queue
open; takeover._internal.run.power), after the drain, and by the lifeline when the coordinator dies.

What it writes (docs/history.md): per probe, ``invoke probe`` (``value`` = the probe's number)
before the call, then the rows as one line of ``probes.jsonl`` (store.PROBES_FILE), then
``ok probe`` (``detail`` = how many rows the table had and how many were kept), or ``info probe``
with the error. The rows go to a file of their own so that history.jsonl stays a list of
operations, and they are capped: at most :data:`ROWS_MAX` rows per probe (a seeded sample of a
larger table) and :data:`FILE_MAX` bytes in all, after which the probe process stops probing and
says so in one ``info probe`` record. A long soak therefore keeps at most FILE_MAX of probes per
segment, whatever its table's size.

Schedule: one probe at a uniform instant of each 1/rate-second slot (the stratified plan the
nemesis uses), from the ``probe`` stream of ``--seed``; a slot that passes while a probe is under
way (a slow snapshot) is skipped, and so is every slot until the probes have spent at most
:data:`DUTY` of the time reading (a soak's table of 100k tasks is read far less often than the
rate). A probe's number is its slot's, so numbers stay unique when the process is restarted after a
power loss.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from takeover._internal import store
from takeover._internal.config import RunConfig
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.lifeline import die_with_parent, parent_alive

PROBE_PROCESS = -2  # the probe's ``process`` in the history (0 is the coordinator, -1 the service)
ROWS_MAX = 2000  # rows kept per probe: a larger table is sampled (seeded), the count says so
FILE_MAX = 64 * 1024 * 1024  # bytes of probes.jsonl a run may write; probing stops there
DUTY = 0.05  # the largest share of the time the probe process spends reading the table
STOP_WAIT = 1.0  # seconds the probe process gets to finish its probe before SIGKILL


@dataclass(frozen=True)
class ProbeSpec:
    """What the probe process is told (pickled into it)."""

    config: RunConfig
    queue_path: str
    history_path: str
    probes_path: str
    start: float  # the faulted phase's start: slot 0 begins here
    parent_pid: int


def slot_time(start: float, rate: float, slot: int, rng: random.Random) -> float:
    """When probe ``slot`` is due: a uniform instant of its 1/rate-second slot."""
    return start + (slot + rng.random()) / rate


def probe_main(spec: ProbeSpec, count: Any) -> None:
    """Entry point of the probe process (multiprocessing target); ``count`` is a shared integer, the
    probes answered so far (the progress line shows it)."""
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopping is the coordinator's to decide
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    from takeover._internal.seeds import stream_seed
    from takeover.contract import open_queue, validate_snapshot

    cfg = spec.config
    hist = HistoryWriter(spec.history_path, PROBE_PROCESS)
    rng = random.Random(stream_seed(cfg.seed, "probe"))
    sample_rng = random.Random(stream_seed(cfg.seed, "probe_sample"))
    queue: Any = None
    slot = 0
    due = slot_time(spec.start, cfg.probe_rate, slot, rng)
    fd = os.open(spec.probes_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while not stop and parent_alive(spec.parent_pid):
            now = time.time()
            while due < now - 1.0 / cfg.probe_rate:  # slots that passed (a restart, a slow probe): skipped
                slot += 1
                due = slot_time(spec.start, cfg.probe_rate, slot, rng)
            if now < due:
                time.sleep(min(due - now, 0.1))
                continue
            number, slot = slot, slot + 1
            due = slot_time(spec.start, cfg.probe_rate, slot, rng)
            if os.fstat(fd).st_size >= FILE_MAX:
                hist.write("info", "probe", value="stopped",
                           error=f"{store.PROBES_FILE} reached its cap of {FILE_MAX} bytes: no more probes")
                return
            hist.write("invoke", "probe", value=str(number))
            try:
                if queue is None:
                    queue = open_queue(cfg.queue, spec.queue_path)
                began = time.time()  # the read alone: opening (a PostgreSQL connection) is no part of its cost
                rows = validate_snapshot(queue.snapshot(), cfg.queue)
            except Exception as exc:  # noqa: BLE001 - a probe that fails proves nothing: recorded, not judged
                hist.write("info", "probe", value=str(number), error=error_text(exc))
                continue
            total = len(rows)
            if total > ROWS_MAX:
                rows = sample_rng.sample(rows, ROWS_MAX)
            os.write(fd, orjson.dumps({"probe": number, "total": total, "tasks": rows},
                                      option=orjson.OPT_APPEND_NEWLINE))
            hist.write("ok", "probe", value=str(number), detail=f"rows={total} kept={len(rows)}")
            # A large table's read costs the queue: at most DUTY of the time goes to probes, the slots
            # in between are skipped (a 100k-task table read in 0.1 s is probed every 2 s at most).
            quiet_until = began + (time.time() - began) / DUTY
            while due < quiet_until:
                slot += 1
                due = slot_time(spec.start, cfg.probe_rate, slot, rng)
            count.value += 1
    finally:
        os.close(fd)
        if queue is not None:
            try:
                queue.close()
            except Exception:  # noqa: BLE001 - the process ends anyway
                pass


class Prober:
    """The coordinator's handle on the probe process: started, stopped, killed at a power loss,
    restarted after it. Nothing here waits on the queue."""

    def __init__(self, cfg: RunConfig, run_dir: Path, ctx: Any, queue_path: Any) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.ctx = ctx
        self.queue_path = queue_path
        self.proc: Any = None
        self.start_at = 0.0
        # Probes answered, counted by the probe process alone (one writer): no lock, so no named semaphore
        # for multiprocessing's resource tracker to lose track of when a hangup kills it with the run.
        self.answered = ctx.RawValue("i", 0)

    @property
    def count(self) -> int:
        """Probes answered so far (every incarnation of the probe process)."""
        return int(self.answered.value)

    def start(self, start: float) -> None:
        """The first probe process, before the faulted phase (``start`` is when its slot 0 begins)."""
        self.start_at = start
        self._spawn()

    def _spawn(self) -> None:
        from takeover._internal.run.supervision import start_shielded

        spec = ProbeSpec(self.cfg, str(self.queue_path), str(self.run_dir / store.HISTORY_FILE),
                         str(self.run_dir / store.PROBES_FILE), self.start_at, os.getpid())
        self.proc = self.ctx.Process(target=probe_main, args=(spec, self.answered), name="takeover-probe")
        self.proc.daemon = True
        start_shielded(self.proc)

    def alive(self) -> Any:
        """The live process (for the power loss to freeze and kill with the workers), or None."""
        return self.proc if self.proc is not None and self.proc.exitcode is None else None

    def restart(self) -> None:
        """After a power loss (which SIGKILLed the old one with the workers): reaped, and a new probe
        process on the rebooted disk."""
        if self.proc is not None:
            self.proc.join(5.0)
        self._spawn()

    def stop(self, at_once: bool = False) -> None:
        """Ask it to finish the probe under way, then SIGKILL (``at_once``: SIGKILL first, as after a second
        Ctrl-C); reaped before this returns."""
        from takeover._internal.run.supervision import send

        proc, self.proc = self.proc, None
        if proc is None or proc.pid is None:
            return
        send(proc.pid, signal.SIGCONT)
        send(proc.pid, signal.SIGKILL if at_once else signal.SIGTERM)
        proc.join(STOP_WAIT)
        if proc.exitcode is None:
            send(proc.pid, signal.SIGKILL)
            proc.join(5.0)
