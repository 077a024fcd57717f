"""Runs on a dask cluster: each job a dask task (:func:`takeover._internal.fanout.remote.run_remote`) on some worker.

What the command sees is the local launcher's contract (:mod:`takeover._internal.fanout.launch`) with more slots, and
three faults the local launcher never has:

- **a worker lost mid-run** (killed, its machine gone): dask runs the task again elsewhere. The command
  counts a run's starts from the workers' events (:data:`takeover._internal.fanout.remote.TOPIC`): the second start
  is that rerun, noted on the run (``fanout.json``: attempts 2 and the lost worker); a run lost a second
  time is not started a third time but reported lost (never counted twice, never silently dropped). With
  ``local:N`` the scheduler is told so too (``allowed-failures`` 1); a scheduler of the user's own may
  allow more, and the command cancels the third start itself.
- **the scheduler gone**: :meth:`ClusterLauncher.next_done` raises :class:`ClusterLost` once the client has
  been cut off for :data:`LOST_AFTER` seconds; the command ends with the runs it gathered (exit 3).
- **Ctrl-C**: :meth:`ClusterLauncher.cancel` cancels every task and waits until each running one has ended
  (each stops and reaps its own run, :mod:`takeover._internal.fanout.remote`), so no process is left on any worker.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from takeover._internal.fanout import remote
from takeover._internal.fanout.jobs import ClusterLost, Done, Job
from takeover.errors import UsageError

LOST_AFTER = 5.0  # seconds without the scheduler before the command gives up on it
CONNECT_TIMEOUT = 10.0
CANCEL_WAIT = 20.0  # seconds Ctrl-C waits for the running tasks to stop their runs
MAX_STARTS = 2  # a run is started at most twice: once, and once more after its worker was lost


class ClusterLauncher:
    remote = True

    def __init__(self, address: str) -> None:
        import dask
        from distributed import Client, LocalCluster

        self.address = address
        self._cluster: Any = None
        self._prefix = f"takeover-{uuid.uuid4().hex[:8]}-"  # this command's task keys
        # One rerun after a lost worker (the scheduler of local:N does it; see the module docstring).
        # The processes of local:N look at themselves less often than dask's defaults (stacks every 10 ms, the
        # event loop every 20 ms, memory every 100 ms, the system every 500 ms): a task here is a subprocess
        # that runs for seconds, and on a machine the runs keep busy that polling is CPU taken from them.
        self._config = dask.config.set({"distributed.scheduler.allowed-failures": MAX_STARTS - 1,
                                        "distributed.worker.profile.enabled": False,
                                        "distributed.admin.tick.interval": "500ms",
                                        "distributed.admin.system-monitor.interval": "5s",
                                        "distributed.admin.system-monitor.gil.enabled": False,
                                        "distributed.worker.memory.monitor-interval": "1s"})
        try:
            if address.startswith("local:"):
                self._cluster = LocalCluster(n_workers=int(address.removeprefix("local:")), threads_per_worker=1,
                                             processes=True, dashboard_address=":0", silence_logs=logging.ERROR)
                self.client = Client(self._cluster, timeout=CONNECT_TIMEOUT)
            else:
                self.client = Client(address, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            raise UsageError(f"--cluster {address}: no dask scheduler answers there ({exc})") from None
        self.slots = max(1, sum(self.client.nthreads().values()))
        self.dashboard: str | None = getattr(self.client, "dashboard_link", None)
        self._lock = threading.Lock()
        self._futures: dict[Any, tuple[Job, float]] = {}  # future -> (job, submitted at)
        self._starts: Counter[str] = Counter()  # task key -> starts seen
        self._where: dict[str, str] = {}  # task key -> the worker it runs on now
        self._lost_on: dict[str, list[str]] = {}  # task key -> the workers it was lost with
        self._running: dict[str, str] = {}  # task key -> worker, between its start and end events
        self.done_by: Counter[str] = Counter()
        self.failures = 0
        self.on_wait: Callable[[], None] | None = None
        self.client.subscribe_topic(remote.TOPIC, self._on_event)
        # Ctrl-C, SIGTERM and SIGHUP end the command as Ctrl-C does, even where the shell that started it
        # ignores SIGINT (a background job): the remote runs must be cancelled, not left to run out.
        self._signals = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    # -- the workers' events (called on the client's thread) ------------------------------------------------
    def _on_event(self, event: Any) -> None:
        _, msg = event
        key, worker = msg.get("key", ""), msg.get("worker", "")
        with self._lock:
            if msg.get("event") == "start":
                self._starts[key] += 1
                if self._starts[key] > 1:  # started again: the worker it ran on was lost
                    self._lost_on.setdefault(key, []).append(self._where.get(key, "?"))
                self._where[key] = worker
                self._running[key] = worker
            elif msg.get("event") == "end" and self._running.get(key) == worker:
                del self._running[key]

    # -- the launcher -------------------------------------------------------------------------------------
    def free(self) -> bool:
        return len(self._futures) < self.slots

    def busy(self) -> int:
        return len(self._futures)

    def submit(self, job: Job) -> None:
        from takeover._internal.fanout.remote import run_remote

        key = f"{self._prefix}{job.index}-{job.key}"
        fut = self.client.submit(run_remote, job.argv, list(job.pythonpath), key=key, pure=False, retries=0)
        self._futures[fut] = (job, time.monotonic())

    def next_done(self) -> Done:
        """The next run to finish, its folder stored; raises ClusterLost when the scheduler is gone."""
        from distributed import wait

        cut_off: float | None = None
        while True:
            if self.client.status != "running":
                cut_off = cut_off or time.monotonic()
                if time.monotonic() - cut_off > LOST_AFTER:
                    raise ClusterLost(f"the dask scheduler at {self.address} went away ({self.client.status})")
                time.sleep(0.2)
                continue
            cut_off = None
            self._cancel_third_starts()
            try:
                finished = wait(list(self._futures), timeout=0.5, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                if self.on_wait is not None:
                    self.on_wait()
                continue
            except Exception as exc:  # noqa: BLE001 - the futures cancelled with the connection, or the socket
                if type(exc).__name__ == "FuturesCancelledError" or isinstance(exc, OSError):
                    raise ClusterLost(f"the dask scheduler at {self.address} went away (the connection to it was "
                                      "lost)") from None  # fmt: skip
                raise
            if finished:
                fut = min(finished, key=lambda f: self._futures[f][0].index)
                return self._gather(fut)

    def _cancel_third_starts(self) -> None:
        with self._lock:
            over = {k for k, n in self._starts.items() if n > MAX_STARTS}
        for fut in [f for f in self._futures if f.key in over and f.status == "pending"]:
            fut.cancel()

    def _gather(self, fut: Any) -> Done:
        job, _ = self._futures.pop(fut)
        key = str(fut.key)
        with self._lock:
            self._running.pop(key, None)
            starts, lost_on, worker = self._starts.get(key, 0), list(self._lost_on.get(key, [])), self._where.get(key)
        done = Done(job, attempts=max(starts, 1), worker=worker or "?")
        if lost_on:
            done.note = f"rerun once: its worker {lost_on[0]} was lost mid-run"
        if fut.status == "finished":
            out = fut.result()
            done.worker, done.exit_code, done.wall_s = out["worker"], out["exit_code"], out["wall_s"]
            done.interrupted = bool(out["cancelled"]) or out["exit_code"] == 130
            if "archive" in out:
                remote.unpack(out["archive"], job.run_dir)
                remote.relocate(job.run_dir)
            else:
                done.lost = True
                done.note = f"no run folder (exit {out['exit_code']}): {_last_line(out['stderr'])}"
        else:
            exc = fut.exception() if fut.status == "error" else None
            done.lost = True
            workers = ", ".join(lost_on) or "?"
            done.note = (f"lost with its worker twice ({workers}): not run again"
                         if exc is None or type(exc).__name__ == "KilledWorker" else f"failed: {exc}")  # fmt: skip
        self.done_by[done.worker] += 1
        if done.lost or done.note:
            self.failures += 1
        return done

    def status(self) -> str:
        """done / running / queued, per worker, and the failures so far: the live line's cluster part."""
        with self._lock:
            running = Counter(self._running.values())
        queued = max(0, len(self._futures) - sum(running.values()))
        done = sum(self.done_by.values())
        workers = sorted(set(running) | set(self.done_by))
        per = ", ".join(f"{_short(w)} {self.done_by[w]}/{running[w]}" for w in workers)
        return (f"{done} done, {sum(running.values())} running, {queued} queued"
                + (f" | done/running per worker: {per}" if per else "") + f" | failures {self.failures}")

    def cancel(self) -> None:
        """Cancel every task and wait (at most :data:`CANCEL_WAIT`) until the running ones have ended."""
        futures = list(self._futures)
        self._futures.clear()
        if not futures or self.client.status != "running":  # a scheduler gone cannot be told; the runs end
            return  # on their own, the workers having lost their scheduler
        try:
            self.client.cancel(futures, force=True)
        except Exception:  # noqa: BLE001 - a scheduler already gone cannot be told; its workers stop the runs
            return
        end = time.monotonic() + CANCEL_WAIT
        while time.monotonic() < end:
            try:  # each worker says, from its own event loop, whether a run of ours is still under way there
                if not any(self.client.run(remote.active, self._prefix).values()):
                    return
            except Exception:  # noqa: BLE001 - a worker going away as we ask: ask again
                pass
            time.sleep(0.2)

    def close(self) -> None:
        for s, handler in self._signals.items():
            signal.signal(s, handler)
        try:
            self.client.close(timeout=5)
        except Exception:  # noqa: BLE001 - closing a client whose scheduler is gone
            pass
        if self._cluster is not None:
            try:
                self._cluster.close(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        self._config.__exit__(None, None, None)


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _short(worker: str) -> str:
    return worker.removeprefix("tcp://")


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "nothing on stderr"
