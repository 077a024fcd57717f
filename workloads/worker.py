"""The worker: claim -> local work -> one action on the external service -> short local step -> finish.

Each incarnation is one OS process with its own ``process`` number, history writer and queue
connection. Everything it does to the queue and the service is recorded as an ``invoke`` before
the call and a completion after it, so a SIGKILL at any instant leaves an honest record: an
invoke without completion is "may have happened". The worker publishes its phase on the shared
board before each step so the nemesis can aim kills and pauses, and so that a dead worker's slot
says where it died.

Every ``now`` the worker passes to the queue is read from its own clock (:mod:`takeover._internal.run.clock`):
the real clock, unless ``--clock-skew-max`` or ``--clock-jump-rate`` put it off. Its sleeps and the
history's record times stay on the real clock.

Errors never end the worker: an exception from the queue (``database is locked``, a bug in a
user's queue) is an ``info`` record and the loop goes on after a short back-off.
"""

from __future__ import annotations

import math
import os
import random
import signal
import time
from typing import cast

from takeover._internal import answers, bridge
from takeover._internal.config import TaskTime
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.lifeline import die_with_parent, parent_alive
from takeover._internal.run.board_layout import ACTIONS, DONE, EXTEND_CALLS, FINISH_CALLS, LOST, SLOWED
from takeover._internal.run.clock import WorkerClock, record_jump, record_skew, skew_of
from takeover._internal.run.freeze_in_call import watched
from takeover._internal.run.phases import PhaseBoard, task_id, task_index
from takeover._internal.run.registration import register_tasks
from takeover._internal.run.service import ServiceClient
from takeover._internal.run.supervision import WorkerSpec
from takeover._internal.run.wake import Boost
from takeover.contract import ExtendingQueue, LeaseQueue, has_extension, open_queue


def worker_seed(seed: int, process: int) -> int:
    """Each incarnation draws from its own stream, derived from --seed and its process number."""
    return (seed * 1_000_003 + process * 7919) & 0xFFFFFFFF


def draw_task_time(rng: random.Random, tt: TaskTime) -> float:
    mean = tt.mean
    if tt.dist == "empirical":  # observed durations, resampled: the longest one stays in the draw
        value = rng.choice(tt.samples) if tt.samples else 0.0
    elif mean <= 0:
        value = 0.0
    elif tt.dist == "fixed":
        value = mean
    elif tt.dist == "uniform":
        value = rng.uniform(mean * (1 - tt.spread), mean * (1 + tt.spread))
    elif tt.dist == "exponential":
        value = rng.expovariate(1.0 / mean)
    elif tt.dist == "lognormal":
        sigma = tt.spread
        value = rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    else:  # pareto, heavy-tailed: alpha = spread > 1, scaled to the mean
        alpha = tt.spread
        value = mean * (alpha - 1) / alpha * rng.paretovariate(alpha)
    return min(value, tt.max) if tt.max > 0 else value


def worker_main(spec: WorkerSpec, board: PhaseBoard) -> None:
    """Entry point of a worker process (multiprocessing target).

    The run package does not import this module: whoever starts a run (``takeover stress``, the soak,
    the sweep, the benchmarks) hands this function to the coordinator as its ``worker``.
    """
    die_with_parent(spec.parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # so is a hangup of the terminal
    if bridge.is_exec(spec.config.queue):
        bridge.share_group()  # its adapter process is frozen and killed with it (takeover._internal.bridge)
        # An answer later than the drain timeout is a hung adapter: the coordinator gives up its own calls then.
        bridge.set_call_timeout(spec.config.effective_drain_timeout)
    Worker(spec, board).run()


class Worker:
    def __init__(self, spec: WorkerSpec, board: PhaseBoard) -> None:
        self.spec = spec
        self.cfg = spec.config
        self.board = board
        self.slot = spec.slot
        self.name = f"w{spec.slot}"
        self.rng = random.Random(worker_seed(self.cfg.seed, spec.process))
        self.hist = HistoryWriter(spec.history_path, spec.process)
        self.client = ServiceClient(spec.service_address, self.cfg.client_timeout)
        self.queue: LeaseQueue | None = None
        self.clock = WorkerClock(skew_of(self.cfg.seed, spec.process, self.cfg.clock_skew_max), board, spec.slot)
        self.boosted: Boost | None = None  # what lining up for a race changed, until the claim returned
        self._publish = board.publisher(spec.slot)
        self._published: str | None = None  # the task last published, and its index on the board (-1: none)
        self._published_index = -1
        bridge.on_broken = self.adapter_broke

    # -- helpers ----------------------------------------------------------------------------------
    def adapter_broke(self, op: str, line: str) -> None:
        """An ``exec:`` queue's adapter broke the protocol (takeover._internal.bridge): recorded, so the run is
        INCONCLUSIVE with this line rather than judged on what a broken adapter answered."""
        self.hist.write("info", "adapter", worker=self.name, value=op, detail=line)

    def failed(self, f: str, exc: BaseException, **fields: object) -> None:
        """A queue call that raised, or answered what the contract does not allow: its outcome is unknown
        (an ``info`` completion). A malformed answer, or an escape (``sys.exit()``, a ``BaseException``),
        is also recorded as such, an ``answer`` record that the check answers_well_formed reads."""
        if isinstance(exc, answers.MalformedAnswer):
            what = exc.what
        elif not isinstance(exc, Exception):
            what = answers.QueueEscaped(f, exc).what
        else:
            self.hist.write("info", f, error=error_text(exc), **fields)
            return
        self.hist.write("info", f, error=what[:300], **fields)
        fields.pop("worker", None)
        self.hist.write("info", answers.ANSWER_RECORD, worker=self.name, value=f, detail=what, **fields)

    def publish(self, phase: str, task: str | None = None, gen: int = 0, lease_until: float = 0.0) -> None:
        """The lease goes on the board on the real clock (when this worker's clock will reach it), so the
        nemesis times pauses against the holder's own view of its lease whatever its clock's offset.

        Seven of these per task: the task's index is worked out once per task (the last one published is
        kept), and the slot's own publish is the board's, made once (PhaseBoard.publisher)."""
        if task is not self._published:
            self._published, self._published_index = task, task_index(task) if task else -1
        self._publish(phase, time.time(), self._published_index, gen,
                      self.clock.real(lease_until) if lease_until else 0.0)  # fmt: skip

    def now(self) -> float:
        """The ``now`` for the next call: this worker's clock, after any jump the nemesis posted since the last
        call, which is recorded here, between the two calls it separates."""
        step = self.clock.pending()
        if step:
            record_jump(self.hist, self.spec.process, self.name, step, self.clock.offset)
        return self.clock.now()

    def should_stop(self) -> bool:
        return self.board.stop_requested() or not parent_alive(self.spec.parent_pid)

    def nap(self, seconds: float) -> None:
        """Sleep in small steps so a stop request or the coordinator's death is noticed quickly."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))
            if not parent_alive(self.spec.parent_pid):
                os._exit(71)

    def poll_pause(self) -> None:
        self.nap(self.cfg.poll * self.rng.uniform(0.5, 1.5))

    def faults_on(self, kind: str) -> bool:
        rate = self.cfg.faults.get(kind, 0.0)
        return rate > 0 and self.board.faults_enabled() and self.rng.random() < rate

    @property
    def opened(self) -> LeaseQueue:
        """The queue once :meth:`open` has built it: every step runs after that."""
        if self.queue is None:
            raise RuntimeError("the worker's queue is not open")
        return self.queue

    # -- the loop -------------------------------------------------------------------------------
    def open(self) -> None:
        backoff = 0.05
        while self.queue is None and not self.should_stop():
            try:
                # With freeze_in_call on, every connection the queue opens is watched
                # (takeover._internal.run.freeze_in_call).
                self.queue = watched(self.cfg, self.board, self.slot, self.hist, self.name,
                                     lambda: open_queue(self.cfg.queue, self.spec.queue_path))
            except BaseException as exc:  # noqa: BLE001 - recorded, retried: never a crash of the run
                self.hist.write("info", "open", worker=self.name, error=error_text(exc))
                self.nap(backoff)
                backoff = min(backoff * 2, 1.0)

    def reopen(self) -> None:
        """An ``exec:`` queue whose adapter broke the protocol is closed (which kills it) and opened again.
        On a run with hosts, a queue call that raised leaves the queue's connection in doubt (cut off,
        ended by the server, a server that crashed): close the queue and open it again, as a real worker's
        pool does, before the next call. The call itself stays ``info``. Other runs keep their queue: a
        SQLite queue's error (``database is locked``) says nothing about its connection."""
        broken = getattr(self.queue, "broken", None) is not None  # an exec: adapter that broke: start another
        if not (self.cfg.hosts or broken) or self.queue is None or self.should_stop():
            return
        queue, self.queue = self.queue, None
        try:
            queue.close()
        except BaseException:  # noqa: BLE001 - a dead connection may fail to close; it is dropped either way
            pass
        self.open()
        if self.queue is None:  # stopping while it opened: the old one stands in until the loop ends
            self.queue = queue

    def run(self) -> None:
        if self.cfg.clock_skew_max > 0:
            record_skew(self.hist, self.spec.process, self.name, self.clock.offset)
        self.open()
        self.publish("idle")  # ready: the coordinator starts the run once its workers are (PhaseBoard.ready)
        self.board.wait_start(self.should_stop)
        try:
            while not self.should_stop():
                self.step()
        finally:
            self.publish("stopped")
            self.client.close()
            if self.queue is not None:
                try:
                    self.queue.close()
                except BaseException:  # noqa: BLE001 - nothing left to protect at exit, sys.exit() included
                    pass
            self.hist.close()

    def step(self) -> None:
        cfg, hist, name = self.cfg, self.hist, self.name
        self.publish("claiming")  # before the gate is read: a hold that closes it sees this claim coming
        if self.board.gate():
            self.wait_at_gate()
            if self.should_stop():
                return
        now = self.now()
        hist.write("invoke", "claim", worker=name, now=now, lease=cfg.lease)
        try:
            claimed = answers.claim(self.opened.claim(name, now, cfg.lease), cfg.queue)
        except BaseException as exc:  # noqa: BLE001 - the queue's failure, sys.exit() included: never the worker's end
            self.failed("claim", exc, worker=name, now=now)
            self.reopen()
            self.publish("idle")
            self.poll_pause()
            return
        finally:
            if self.boosted is not None:  # a racer of a claim stampede: back to its ordinary scheduling
                self.boosted.undo()
                self.boosted = None
        if claimed is None:
            hist.write("fail", "claim", worker=name, now=now, error="empty")
            self.publish("idle")
            self.poll_pause()
            return
        task, gen, lease_until = claimed
        hist.write("ok", "claim", worker=name, task=task, gen=gen, lease_until=lease_until, now=now)
        self.publish("working", task, gen, lease_until)
        kept = self.work(task, gen, lease_until)
        if kept is None:
            self.publish("idle")
            return  # the heartbeat lost the lease: stop before acting
        kept = self.beat_if_asked(task, gen, kept)
        if kept is None:
            self.publish("idle")
            return  # the heartbeat the nemesis asked for lost the lease: stop before acting
        lease_until = kept
        outcome = self.act(task, gen, lease_until)
        if outcome is None:
            self.publish("idle")
            return  # the service refused (fencing): a newer generation owns the side effect
        self.publish("acted", task, gen, lease_until)
        self.nap(cfg.local_step)
        kept = self.beat_if_asked(task, gen, lease_until)
        if kept is None:
            self.publish("idle")
            return  # the lease is lost: a worker whose heartbeat says so stops, and does not finish
        self.finish(task, gen, outcome, kept)
        self.publish("idle")

    def beat_if_asked(self, task: str, gen: int, lease_until: float) -> float | None:
        """One heartbeat when the nemesis asked for it (the stale_heartbeat fault, which resumes a holder
        that lost its task while it was frozen), whatever ``--heartbeat`` is: the lease it returns, None
        when lost; the lease as it was when nothing was asked, or the queue has no extend()."""
        if not self.board.heartbeat_asked(self.slot) or not has_extension(self.opened, "extend"):
            return lease_until
        return self.extend(task, gen, lease_until)

    def wait_at_gate(self) -> None:
        """An aimed fault holds claims back: wait (``held``) until it lets them go, then claim at once.

        Held workers are released together, so their claims race (the claim-stampede fault). A
        hold may also ask them to register a task again first, all at the same instant, as
        producers that retry an enqueue do (the duplicate-register fault).
        """
        hold = self.board.gate()
        self.publish("held")
        if hold:
            # One wake-up lets every held worker go at once; then the racers pair up, each on a core
            # of its own and ahead of other processes until its claim returned (step).
            self.boosted = self.board.hold_back(self.slot, hold, self.should_stop)
        self.publish("claiming")
        task = self.board.register_request(hold)
        if task >= 0:
            register_tasks(self.opened, self.hist, [task_id(task)], self.now())

    def work(self, task: str, gen: int, lease_until: float) -> float | None:
        """Local work; a slowed task outlives its lease. Heartbeats extend the lease when configured."""
        cfg = self.cfg
        seconds = draw_task_time(self.rng, cfg.task_time)
        slow = self.faults_on("slow")
        if slow:
            remaining = max(0.0, lease_until - self.now())
            seconds = max(seconds, remaining + self.rng.uniform(0.2, 1.0) * cfg.lease)
            self.hist.write("invoke", "slow", task=task, gen=gen, target=self.spec.process,
                            value=f"{seconds:.3f}", lease_until=lease_until)  # fmt: skip
            self.board.open_fault(self.slot, "slow")
            self.board.count(self.slot, SLOWED)
        end = time.monotonic() + seconds
        beat = cfg.heartbeat if cfg.heartbeat > 0 and has_extension(self.opened, "extend") else 0.0
        held: float | None = lease_until  # None once a heartbeat has lost the lease
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            self.nap(min(left, beat) if beat else left)
            if beat and end - time.monotonic() > 0:
                held = self.extend(task, gen, lease_until)
                if held is None:
                    break
                lease_until = held
                self.publish("working", task, gen, lease_until)
        if slow:
            self.board.close_fault(self.slot, "slow")
            self.hist.write("ok", "slow", task=task, gen=gen, target=self.spec.process, value=f"{seconds:.3f}")
        return held

    def extend(self, task: str, gen: int, lease_until: float) -> float | None:
        """One heartbeat; its outcome is recorded, then counted on the board (EXTEND_CALLS), so a nemesis
        that asked for it knows the record is written once the count moved."""
        now = self.now()
        self.hist.write("invoke", "extend", task=task, gen=gen, now=now, lease=self.cfg.lease)
        kept: float | None
        try:
            # Called only once has_extension found the method, so the queue is an ExtendingQueue.
            new = answers.extend(cast(ExtendingQueue, self.opened).extend(task, gen, now, self.cfg.lease),
                                 self.cfg.queue)
        except BaseException as exc:  # noqa: BLE001 - the queue's failure, sys.exit() included
            self.failed("extend", exc, task=task, gen=gen)
            self.reopen()
            kept = lease_until  # unknown: keep working on what we believe
        else:
            if new is None:
                self.hist.write("fail", "extend", task=task, gen=gen, error="lost")
                kept = None
            else:
                self.hist.write("ok", "extend", task=task, gen=gen, lease_until=new)
                kept = new
        self.board.count(self.slot, EXTEND_CALLS)
        return kept

    def act(self, task: str, gen: int, lease_until: float) -> str | None:
        """One action on the external service; returns the finish outcome, None when refused."""
        self.publish("acting", task, gen, lease_until)
        # Drawn first, so the worker's stream stays the same whether a lost reply was asked or not.
        lose = self.faults_on("lose_reply")
        lose = self.board.lost_reply_asked(self.slot) or lose
        now = self.now()
        self.hist.write("invoke", "action", task=task, gen=gen, now=now)
        if lose:
            self.hist.write("invoke", "lose_reply", task=task, gen=gen, target=self.spec.process)
            self.board.open_fault(self.slot, "lose_reply")
            self.board.count(self.slot, LOST)
        request = {"task": task, "gen": gen, "worker": self.name, "process": self.spec.process,
                   "key": task, "lose": lose}  # fmt: skip
        self.board.count(self.slot, ACTIONS)
        try:
            reply = self.client.call(request)
        except TimeoutError:
            self.hist.write("info", "action", task=task, gen=gen, error="timeout")
            if lose:
                self.board.close_fault(self.slot, "lose_reply")
                self.hist.write("ok", "lose_reply", task=task, gen=gen, target=self.spec.process)
            return "uncertain"
        except Exception as exc:  # noqa: BLE001 - connection trouble: the outcome is unknown
            self.hist.write("info", "action", task=task, gen=gen, error=error_text(exc))
            if lose:
                self.board.close_fault(self.slot, "lose_reply")
                self.hist.write("info", "lose_reply", task=task, gen=gen, target=self.spec.process)
            return "uncertain"
        if lose:  # the service answered although asked not to: record it, never hide it
            self.board.close_fault(self.slot, "lose_reply")
            self.hist.write("info", "lose_reply", task=task, gen=gen, target=self.spec.process,
                            error="answered")  # fmt: skip
        if reply.get("reply") == "ok":
            value = "deduplicated" if reply.get("result") == "deduplicated" else "ok"
            self.hist.write("ok", "action", task=task, gen=gen, value=value)
            return "done"
        if reply.get("result") == "refused":
            self.hist.write("fail", "action", task=task, gen=gen, error="refused")
            return None
        self.hist.write("info", "action", task=task, gen=gen, error=str(reply.get("result", "error")))
        return "uncertain"

    def finish(self, task: str, gen: int, outcome: str, lease_until: float) -> None:
        """``finishing`` is published only around the call itself (after the invoke is written,
        before the completion is), so a kill that lands in ``finishing`` really hit the call."""
        now = self.now()
        self.hist.write("invoke", "finish", task=task, gen=gen, outcome=outcome, now=now)
        self.board.count(self.slot, FINISH_CALLS)
        self.publish("finishing", task, gen, lease_until)
        try:
            accepted = answers.finish(self.opened.finish(task, gen, outcome, now), self.cfg.queue)
        except BaseException as exc:  # noqa: BLE001 - the queue's failure, sys.exit() included
            self.publish("finished", task, gen, lease_until)
            self.failed("finish", exc, task=task, gen=gen, outcome=outcome)
            self.reopen()
            return
        self.publish("finished", task, gen, lease_until)
        if accepted:
            self.hist.write("ok", "finish", task=task, gen=gen, outcome=outcome, value="true")
            self.board.count(self.slot, DONE)
        else:
            self.hist.write("fail", "finish", task=task, gen=gen, outcome=outcome, error="rejected")
