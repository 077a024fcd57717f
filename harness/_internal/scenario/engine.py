"""The scenario engine: one queue on a fresh database, driven a step at a time through the contract.

Why an engine apart from the scenarios' order (:mod:`takeover._internal.scenario.replay`): the spec's scenarios, a
scenario file, ``takeover explore``'s random sequences and ``takeover replay``'s shrunk ones all make
their calls here, so a departure found by one reads the same in the others. The engine drives the queue
only through the contract (:mod:`takeover.contract`), on a real database (a fresh temporary SQLite file
per scenario, or a fresh PostgreSQL database under ``--db``: takeover._internal.db), and reads every observed state
from the queue's own ``snapshot()`` — never from our bookkeeping.

A queue that raises inside a step does not stop the replay: the step is a mismatch that carries
the exception in one line, and the next steps still run, so one run shows every departure.

A queue that *hangs* inside a step (a deadlock, a lock never released, an infinite loop) must not
hang the replay: in CI that is a job killed at its global timeout with no verdict at all. So every
call into the queue — the opening included — is made by a :class:`~takeover._internal.run.queue_caller.QueueCaller`
(the same deadlined helper thread the stress coordinator uses; one per scenario, because a queue may
only work on the thread that opened it) and given ``step_timeout`` seconds. A call that does not
return fails its step ("claim() did not return within 10 s") and ends that scenario: the call may
still be running, so the queue's state is unknown and the remaining steps are reported as not run
rather than judged. The other scenarios still run, each on its own fresh queue, file and thread.
The stuck thread is a daemon: it cannot keep the process from exiting with its verdict.

What a replay concludes (each step's result, the scenario's) is :mod:`takeover._internal.scenario.results`.
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from takeover._internal import answers, db, scratch
from takeover._internal.run.ledger import Ledger
from takeover._internal.run.queue_caller import QueueCaller, QueueHung
from takeover._internal.scenario.results import OBSERVED_KEYS as OBSERVED_KEYS
from takeover._internal.scenario.results import StepResult
from takeover._internal.scenario.results import same as same
from takeover._internal.store import LEDGER_FILE
from takeover.contract import (
    LeaseQueue,
    QueueFactory,
    has_extension,
    open_queue,
    validate_claim_result,
    validate_finish_result,
    validate_snapshot,
)
from takeover.errors import ContractError, UsageError

TASK_ID = "task"
LANGS = ("en", "zh")
# What a step can do: the spec's five, plus the optional heartbeat and reconciliation calls, and the resume
# that ends two calls at once (a call with ``pause_before_statement``, the call in its gap:
# takeover._internal.scenario.overlap).
STEP_KINDS = ("register", "claim", "finish", "extend", "resolve", "exit_and_reopen", "external_action", "resume")
RESOLUTIONS = ("done", "pending")
# The calls that can be paused inside themselves (the ones that change the queue: takeover._internal.scenario.overlap).
PAUSABLE = ("register", "claim", "finish", "extend", "resolve")
# Generous: a healthy queue answers one call on a tiny file in milliseconds, even on a loaded CI box.
DEFAULT_STEP_TIMEOUT = 10.0
OPEN = "open"  # the name under which building the queue (ATTR(db_path)) is deadlined and reported


def one_line(exc: BaseException) -> str:
    """An exception as one line: the transcript and --json must never carry a traceback."""
    return answers.exception_text(exc)


class StepHung(Exception):
    """A queue call that did not return within the step timeout. Its outcome is unknown and it may
    still be running, so nothing after it in the scenario can be judged."""

    def __init__(self, call: str, timeout: float, queue_spec: str) -> None:
        self.call, self.timeout = call, timeout
        what = f"opening the queue ({queue_spec})" if call == OPEN else f"{call}()"
        super().__init__(f"{what} did not return within {timeout:g} s")


def check_step_timeout(value: float) -> float:
    """The library entry point's check: a deadline must be a real one. (The option parser checks the
    text itself, so that argparse names the option in its one-line error.)"""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise UsageError(f"--step-timeout must be a positive number of seconds, got {value!r}")
    return float(value)


class Replay:
    """The state of one scenario's replay: its files, the open queue, what each actor holds.

    A scenario acts on one task; ``takeover explore`` drives several through the same engine (a
    step's own ``task`` key names the one it acts on, ``tasks`` every task the queue may hold), so
    what explore finds is what a scenario file reruns."""

    def __init__(
        self,
        queue_spec: str,
        factory: QueueFactory,
        workdir: Path,
        database: str,
        lease: float,
        caller: QueueCaller,
        step_timeout: float,
        task: str = TASK_ID,
        tasks: tuple[str, ...] = (),
    ) -> None:
        self.queue_spec = queue_spec
        self.factory = factory
        self.workdir = workdir
        self.db_path = database
        self.lease = lease
        self.caller = caller
        self.step_timeout = step_timeout
        self.task = task
        self.tasks = frozenset((task, *tasks))
        self.queue: LeaseQueue | None = None
        self._ledger: Ledger | None = None
        self.held: dict[str, int] = {}  # actor -> generation of its latest claim
        # a second queue object on this database (takeover._internal.scenario.overlap.Peer), once needed
        self.peer: Any = None

    @property
    def ledger(self) -> Ledger:
        """Opened on first use: most scenarios (every replayed one) never act on the service, and
        a second SQLite file per run is a third of a short scenario's cost."""
        if self._ledger is None:
            self._ledger = Ledger(str(self.workdir / LEDGER_FILE), remedy="none")
        return self._ledger

    def performed_count(self) -> int:
        return 0 if self._ledger is None else self._ledger.performed_count(self.task)

    def open(self) -> None:
        """The first open is outside any step: a queue that cannot even be built is bad input
        (ContractError, exit 2), not a departure from the spec; one that hangs raises StepHung."""
        self.queue = self._call(OPEN, open_queue, self.queue_spec, self.db_path, self.factory)

    def _call(self, name: str, fn: Any, *args: Any) -> Any:
        """Every call into the user's queue goes through here: on the caller's thread, deadlined."""
        try:
            return self.caller.call(name, fn, *args, timeout=self.step_timeout)
        except QueueHung:
            raise StepHung(name, self.step_timeout, self.queue_spec) from None

    def close(self) -> None:
        """Best effort, never blocking: after a hang the caller refuses at once (the stuck call
        still owns the thread), and a close() that itself hangs is given up at the deadline."""
        queue, self.queue = self.queue, None
        if queue is not None:
            try:
                self._call("close", queue.close)
            except Exception:  # noqa: BLE001 - cleanup of a possibly broken user queue
                pass
        peer, self.peer = self.peer, None
        if peer is not None:
            peer.close()
        try:
            if self._ledger is not None:
                self._ledger.close()
        except Exception:  # noqa: BLE001
            pass

    def _queue(self) -> LeaseQueue:
        if self.queue is None:
            raise RuntimeError("queue is not open (an earlier reopen failed)")
        return self.queue

    def run_step(self, result: StepResult, *, act: bool = True, observe: bool = True) -> StepHung | None:
        """Perform one step, then observe; any exception becomes a one-line error on the step.

        A call that hangs (in the action or in the observing snapshot) fails the step and is
        returned: nothing more can be asked of this queue, so the caller stops the scenario.
        Two calls at once (:mod:`takeover._internal.scenario.overlap`) act first and observe once both are done."""
        st = result.spec
        try:
            if act:
                try:
                    result.observed["returns"] = self._act(st, result)
                except StepHung:
                    raise
                except Exception as exc:  # noqa: BLE001 - a raising queue is a finding, not a crash
                    result.errors.append(one_line(exc))
                    result.observed["returns"] = None
                    result.observed["raised"] = one_line(exc)
            if observe:
                self._observe(result)
        except StepHung as hung:
            result.hung = True
            result.errors.append(str(hung))
            for key in ("returns", "state", "generation", "lease_until"):  # what came back, if anything
                result.observed.setdefault(key, None)
            return hung
        if observe:
            result.compare()
        return None

    def _act(self, st: dict[str, Any], result: StepResult) -> Any:
        kind, t, actor = st["step"], st["t"], st["actor"]
        task = st.get("task", self.task)
        if kind == "register":
            q = self._queue()
            if st.get("batch"):  # through the optional register_many, a batch of this one task
                if not has_extension(q, "register_many"):
                    raise ContractError(f"queue {self.queue_spec!r} has no register_many() (an optional method "
                                        "this step needs)")
                self._call("register_many", q.register_many, [task], t)  # type: ignore[attr-defined]
            else:
                self._call("register", q.register, task, t)
            return None
        if kind == "claim":
            lease = st.get("lease", self.lease)
            got = validate_claim_result(self._call("claim", self._queue().claim, actor, t, lease), self.queue_spec)
            result.observed["claimed"] = got
            if got is None:
                return None
            task_id, generation, lease_until = got
            result.observed["task"] = task_id
            self.held[actor] = generation
            if task_id not in self.tasks:
                known = " or ".join(repr(k) for k in sorted(self.tasks))
                result.errors.append(f"claim returned task {task_id!r}, only {known} exists")
            departed = answers.lease_departure("claim", lease_until, t, lease, tolerance=0.0, context=False)
            if departed:
                result.errors.append(departed)
            return generation
        if kind == "finish":
            accepted = self._call("finish", self._queue().finish, task, st["with_generation"], st["outcome"], t)
            return validate_finish_result(accepted, self.queue_spec)
        if kind == "extend":
            q = self._queue()
            if not has_extension(q, "extend"):
                raise ContractError(f"queue {self.queue_spec!r} has no extend() (an optional method this step needs)")
            lease = st.get("lease", self.lease)
            got = self._call("extend", q.extend, task, st["with_generation"], t, lease)  # type: ignore[attr-defined]
            return answers.extend(got, self.queue_spec)
        if kind == "resolve":
            q = self._queue()
            if not has_extension(q, "resolve"):
                raise ContractError(f"queue {self.queue_spec!r} has no resolve() (an optional method this step needs)")
            got = self._call("resolve", q.resolve, task, st["with_generation"], st["outcome"], t)  # type: ignore[attr-defined]
            return answers.resolve(got, self.queue_spec)
        if kind == "exit_and_reopen":
            queue, self.queue = self.queue, None
            if queue is not None:
                try:
                    self._call("close", queue.close)
                except StepHung:
                    raise  # the thread is stuck in close(): no reopen can run on it
                except Exception as exc:  # noqa: BLE001 - report it, and still reopen
                    result.errors.append(f"close() raised {one_line(exc)}")
            self.queue = self._call(OPEN, open_queue, self.queue_spec, self.db_path, self.factory)
            return None
        if kind == "resume":  # a resume with no call paused before it (scenario.overlap runs those) does nothing
            return None
        if kind == "external_action":
            generation = self.held.get(actor, st.get("generation", 0))
            action = self.ledger.act(task, generation, worker=actor, lose_reply=bool(st.get("response_lost")), t=t)
            return "timeout" if action.reply == "lost" else action.performed_count
        raise ValueError(f"unknown step {kind!r} in the scenario data")

    def _observe(self, result: StepResult) -> None:
        obs = result.observed
        obs.update(state=None, generation=None, lease_until=None)
        if "ledger_actions" in result.spec:
            obs["ledger_actions"] = self.performed_count()
        try:
            rows = validate_snapshot(self._call("snapshot", self._queue().snapshot), self.queue_spec)
        except StepHung:
            raise
        except Exception as exc:  # noqa: BLE001
            result.errors.append(f"snapshot: {one_line(exc)}")
            return
        obs["rows"] = rows
        if "snapshot" in result.spec:
            obs["snapshot"] = {str(r[0]): [r[1], r[2], r[3]] for r in rows}
        task = result.spec.get("task", self.task)
        mine = [r for r in rows if r[0] == task]
        others = [r[0] for r in rows if r[0] not in self.tasks]
        if others:
            result.errors.append(f"snapshot() lists unknown tasks {others[:3]!r}")
        if len(mine) != 1 and (len(self.tasks) == 1 or mine):
            result.errors.append(f"snapshot() lists task {task!r} {len(mine)} times, expected once")
        if not mine:
            return
        _task, obs["state"], obs["generation"], obs["lease_until"] = mine[0]


@contextlib.contextmanager
def live_queue(label: str, queue_spec: str, factory: QueueFactory, lease: float,
               step_timeout: float = DEFAULT_STEP_TIMEOUT, task: str = TASK_ID,
               tasks: tuple[str, ...] = ()) -> Iterator[Replay]:
    """A replay's queue on a fresh database in its own temporary folder (not opened yet: its first
    open is the caller's ``open()``), closed and removed afterwards whatever happens."""
    # The label in the folder's name says which scenario a file belongs to; a file's own ids may hold
    # anything, so only a safe part of them goes into a path.
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:40]
    workdir = Path(scratch.mkdtemp(f"takeover-{safe}-"))
    caller = QueueCaller()  # a fresh thread: the previous scenario's may still be stuck in a call
    try:
        with db.current().database(workdir, f"scenario_{safe}") as database:
            replay = Replay(queue_spec, factory, workdir, database, lease, caller, step_timeout, task, tasks)
            try:
                yield replay
            finally:
                replay.close()
    finally:
        caller.stop()  # a stuck thread is a daemon, left to die with the process
        shutil.rmtree(workdir, ignore_errors=True)
