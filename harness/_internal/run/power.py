"""Power losses during a run (``--power-loss-rate``): the queue's disk loses what it had not synced.

Why the run's queue lives on a layer of its own: SIGKILL never loses a committed SQLite transaction
(the kernel still writes back what a dead process handed it), so only a lost disk cache shows what
``synchronous=NORMAL`` costs. With a power-loss rate the queue's files live in a folder of the run
shown through the FUSE layer of :mod:`takeover._internal.powerloss`, and a power loss is, in this order:

1. the invoke of ``power_loss`` in the history (process 0);
2. every worker frozen (SIGSTOP), so none of them acts between the cut and its death, and so is the
   probe process (takeover._internal.run.probes) if the run has one;
3. the cut: from here on nothing reaches the disk (every request on the mount fails);
4. every worker SIGKILLed and reaped (``exit`` records with ``detail`` ``power_loss``), the probe
   process SIGKILLed too (the coordinator starts it again after the reboot);
5. the coordinator's own connection dropped: its ``close()`` can no longer write anything;
6. the reboot: every file back to its content at its last sync, the folder mounted again;
7. the coordinator's connection opened again, the ``ok`` of ``power_loss`` with what was dropped;
   the workers come back as new incarnations at the loop's next turn, as after any kill.

The external service and the history are not on the layer: they stand for other machines and for
the observer, which the power cut does not reach.

Power losses arrive on the stratified plan the nemesis uses for its kinds (one at a uniform instant
in each 1/rate-second slot of the faulted phase), from their own stream of ``--seed``. A power loss that
is due waits until a finish was accepted since the previous one (or since the faulted phase began):
restarted workers can take a second or more to claim again on a loaded machine, and a power loss that
strikes before they have done anything has nothing to lose and tests nothing. The slots that pass
while it waits are skipped, so a run has at most rate x duration of them; the invoke's ``late`` says
how long it waited.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.config import RunConfig
from takeover._internal.history import HistoryWriter
from takeover._internal.powerloss.layer import PowerLossLayer
from takeover._internal.run.board_layout import DONE
from takeover._internal.run.supervision import Supervisor, send, wait_stopped
from takeover._internal.seeds import stream_seed

FREEZE_WAIT = 1.0  # seconds a worker may take to show as stopped (it may be inside a request on the mount)


class PowerLoss:
    """The layer under the run's queue, and the power losses of the faulted phase."""

    def __init__(self, cfg: RunConfig, run_dir: Path, supervisor: Supervisor, hist: HistoryWriter) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.sup = supervisor
        self.hist = hist
        self.layer = PowerLossLayer(run_dir / store.POWERLOSS_DISK, run_dir / store.POWERLOSS_MOUNT,
                                    run_dir / store.POWERLOSS_LOG)  # fmt: skip
        self.rng = random.Random(stream_seed(cfg.seed, "power_loss"))
        self.slot_no = 0
        self.t0 = 0.0
        self.next_at = float("inf")
        self.count = 0
        self.done_before = 0  # finishes accepted (the phase board's count) when the last power loss came
        # The processes besides the workers that have the queue open (the probe process, takeover._internal.run.probes):
        # frozen and killed with the workers; their owner starts them again after the reboot.
        self.others: Callable[[], list[Any]] = list

    @property
    def queue_path(self) -> Path:
        """Where the queue's file is while the layer is mounted."""
        return self.layer.mountpoint / store.QUEUE_FILE

    started = False

    def start(self) -> None:
        if not self.started:
            self.layer.start()
            self.started = True

    @property
    def server_dir(self) -> Path:
        """Where a run's own database server keeps its files while the layer is mounted (``--db redis``)."""
        return self.layer.mountpoint / "redis"

    def begin(self, now: float) -> None:
        """The faulted phase starts: what the set-up wrote (the schema, the tasks registered up front)
        is synced first, as if the tasks had been registered long before and the kernel had written
        them back, so a power loss takes back what the run did, not the whole table; then the first
        power loss is planned."""
        self.layer.sync()
        self.t0 = now
        self.done_before = self.sup.board.total(DONE)
        self.next_at = self._plan()

    def stop(self) -> None:
        """The faulted phase ends: no more power losses."""
        self.next_at = float("inf")

    def _plan(self) -> float:
        i, self.slot_no = self.slot_no, self.slot_no + 1
        return self.t0 + (i + self.rng.random()) / self.cfg.power_loss_rate

    def due(self, now: float) -> bool:
        """A power loss is planned for now or before, and a finish was accepted since the last one."""
        if now < self.next_at or self.sup.board.total(DONE) <= self.done_before:
            return False
        self.late = now - self.next_at
        while self.next_at <= now:  # the slots that passed while it waited are skipped
            self.next_at = self._plan()
        return True

    late = 0.0  # how long the power loss under way waited for a finish to be accepted

    def cut(self, drop_connection: Callable[[], None], reconnect: Callable[[], None]) -> None:
        """One power loss (the steps of the module docstring). ``drop_connection`` and ``reconnect``
        are the coordinator's: its queue object closed after the cut and opened again after the reboot."""
        started = time.time()
        self.count += 1
        victims = [h for h in self.sup.handles.values() if h.proc.exitcode is None]
        self.hist.write("invoke", "power_loss", value=str(self.count), workers=len(victims), late=round(self.late, 4))
        procs = [h.proc for h in victims] + self.others()
        for proc in procs:
            send(proc.pid, signal.SIGSTOP)
        for proc in procs:
            wait_stopped(proc.pid, FREEZE_WAIT)
        self.layer.cut()
        for proc in procs:
            send(proc.pid, signal.SIGKILL)
        for h in victims:
            h.proc.join(5.0)
            self.sup.record_exit(h, "power_loss")
            self.sup.dismiss(h.slot)
        drop_connection()
        stats = self.layer.reboot()
        reconnect()
        self.done_before = self.sup.board.total(DONE)
        self.hist.write("ok", "power_loss", value=str(self.count), workers=len(victims),
                        seconds=round(time.time() - started, 4), dropped_bytes=stats.get("dropped_bytes", 0),
                        files=stats.get("files", 0))  # fmt: skip

    def cut_server(self, server: Any) -> None:
        """One power loss of the machine of the run's own database server (``--db redis``: its files are on
        the layer): the server frozen (SIGSTOP: it acts no more), the cut, the server killed, the reboot
        (every file back to its last sync), the server started again on what is left. The workers stand
        for other machines: they live on, and their connections drop with the server, as a client's do."""
        started = time.time()
        self.count += 1
        self.hist.write("invoke", "power_loss", value=str(self.count), workers=0, late=round(self.late, 4),
                        detail="server")  # fmt: skip
        server.pause()
        self.layer.cut()
        server.crash()
        stats = self.layer.reboot()
        error: dict[str, str] = {}
        try:
            server.restart()
        except Exception as exc:  # noqa: BLE001 - recorded: the run goes on, every call fails until the end
            error = {"error": f"{type(exc).__name__}: {exc}"}
        self.done_before = self.sup.board.total(DONE)
        self.hist.write("ok", "power_loss", value=str(self.count), workers=0, seconds=round(time.time() - started, 4),
                        dropped_bytes=stats.get("dropped_bytes", 0), files=stats.get("files", 0), detail="server",
                        **error)  # fmt: skip

    def close(self) -> None:
        """Unmount, then move the queue's files where every run keeps them (``queue.sqlite`` in the run
        folder), so ``takeover reconcile`` and people find them as after any run."""
        self.layer.close()
        disk = self.layer.backing
        if not disk.is_dir() or os.path.ismount(self.layer.mountpoint):
            return
        for path in disk.iterdir():
            target = self.run_dir / path.name
            if not target.exists():
                path.rename(target)
        shutil.rmtree(disk, ignore_errors=True)
