"""The coordinator's calls into the queue under test, each with a deadline.

Why a thread: the queue is the user's code, and a queue that blocks in ``snapshot()`` or
``register()`` (a lock never released, a sleep, a network filesystem) must not hang the run for
good, nor make Ctrl-C useless. Python cannot interrupt a call stuck in C or in someone else's
sleep, so the coordinator never makes such a call on its own thread: one helper thread (daemon, so
a wedged call cannot keep the process alive) makes every call, in order, and the coordinator waits
for the answer in short steps, giving up at the deadline or as soon as ``abandon()`` says so (a
signal). One thread for all calls, the opening included, because a queue may hold a connection
that only works on the thread that created it (``sqlite3`` with ``check_same_thread``).

A call that was given up on may still be running; until it returns, further calls fail at once
with :class:`QueueHung` rather than queueing up behind it.
"""

from __future__ import annotations

import queue as _queue
import threading
import time
from collections.abc import Callable
from typing import Any

from takeover._internal import answers

STEP = 0.05  # how often a waiting coordinator looks at its signals


class QueueHung(Exception):
    """The call did not return in time (or was abandoned); its outcome is unknown."""


class QueueCaller:
    def __init__(self) -> None:
        self._jobs: _queue.SimpleQueue = _queue.SimpleQueue()
        self._busy: str | None = None  # the name of a call still running after we stopped waiting
        self._busy_since = 0.0
        self._thread = threading.Thread(target=self._serve, name="takeover-queue-calls", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            name, fn, args, box, done = job
            try:
                box.append((True, fn(*args)))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coordinator
                # sys.exit() or a KeyboardInterrupt raised by the queue on this thread is the queue's
                # failure, an ordinary exception for the caller (takeover._internal.answers), never its end.
                box.append((False, answers.escaped(name, exc)))
            done.set()

    def call(
        self,
        name: str,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float,
        abandon: Callable[[], bool] = lambda: False,
    ) -> Any:
        """``fn(*args)`` on the helper thread; its result, its exception, or :class:`QueueHung`."""
        return self.start(name, fn, *args).wait(timeout, abandon)

    def start(self, name: str, fn: Callable[..., Any], *args: Any) -> Pending:
        """``fn(*args)`` handed to the helper thread, not waited for: ``takeover explore`` starts a call
        that it parks inside itself, and makes another actor's call meanwhile. Wait with
        :meth:`Pending.wait`, which deadlines it as :meth:`call` does."""
        if self._busy is not None:
            raise QueueHung(f"{self._busy}() has not returned for {time.time() - self._busy_since:.1f}s")
        pending = Pending(self, name)
        self._jobs.put((name, fn, args, pending.box, pending.done))
        return pending

    def _mark_busy(self, name: str, started: float, done: threading.Event) -> None:
        """Remember the stuck call; once it returns, the caller is usable again."""
        self._busy, self._busy_since = name, started

        def clear() -> None:
            done.wait()
            self._busy = None

        threading.Thread(target=clear, name="takeover-queue-watch", daemon=True).start()

    def stop(self) -> None:
        """Let the helper thread end once it is free; a wedged one is left to die with the process."""
        self._jobs.put(None)


class Pending:
    """A call handed to a :class:`QueueCaller`'s thread: done (``done``) or not yet, and its answer."""

    def __init__(self, caller: QueueCaller, name: str) -> None:
        self.caller = caller
        self.name = name
        self.box: list[tuple[bool, Any]] = []
        self.done = threading.Event()
        self.started = time.time()

    def wait(self, timeout: float, abandon: Callable[[], bool] = lambda: False) -> Any:
        """Its result or its exception; :class:`QueueHung` when it does not return within ``timeout``."""
        name, started, done = self.name, self.started, self.done
        deadline = time.monotonic() + timeout
        try:
            while not done.wait(STEP):
                if abandon():
                    raise QueueHung(f"{name}() abandoned after {time.time() - started:.1f}s: the run was interrupted")
                if time.monotonic() >= deadline:
                    raise QueueHung(f"{name}() did not return within {timeout:g}s")
        except BaseException:
            # Also a KeyboardInterrupt raised while we waited: the call is still running, so a
            # clean-up call (close) must fail at once instead of queueing behind it until the deadline.
            if not done.is_set():
                self.caller._mark_busy(name, started, done)
            raise
        ok, value = self.box[0]
        if ok:
            return value
        raise value
