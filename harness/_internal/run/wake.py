"""One wake-up for every worker held at the claim gate: a futex on a word of shared memory.

Why: a claim race (two workers picking the same claimable row) exists only if their claims overlap,
and a claim lasts a fraction of a millisecond. Held workers that poll the gate, or are let go one
SIGCONT after another, start their claims one after another on a loaded machine: each wake-up can
preempt the process that sends the next one, so the first claim is over before the second begins.
A futex wakes every waiter in one system call, so all held workers become runnable at the same
instant; :meth:`takeover._internal.run.phases.PhaseBoard.line_up` then pairs the ones that run at once.

The word lives in its own shared ``RawArray('i')`` (a futex needs an aligned 32-bit word the
processes share; the board's doubles are not one). Where there is no futex (not Linux, or an
architecture whose system call number we do not know) the waiters poll, as they did before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any

# The futex system call's number per architecture (asm/unistd.h).
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "i686": 240, "i386": 240}
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1  # shared (not FUTEX_PRIVATE_FLAG): the word is in another process' mapping too
_WAKE_ALL = 0x7FFFFFFF
POLL = 0.001  # how often a waiter looks without a futex
RT_PRIORITY = 1  # a racer's real-time priority until its claim returned (the lowest: above every ordinary process)
BOOST = -10  # a racer's nice instead, where real-time is not allowed but a lower nice is


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _syscall() -> tuple[Any, int] | None:
    number = _SYS_FUTEX.get(platform.machine().lower())
    if not sys.platform.startswith("linux") or number is None:
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    call = libc.syscall
    call.restype = ctypes.c_long
    return call, number


_FUTEX = _syscall()


class WakeWord:
    """A 32-bit counter in shared memory that waiters sleep on until it changes."""

    def __init__(self, array: Any) -> None:
        self.array = array  # RawArray('i', 1), shared with the worker processes
        self._address = ctypes.addressof(array)

    @classmethod
    def create(cls, ctx: Any) -> WakeWord:
        return cls(ctx.RawArray("i", 1))

    def __getstate__(self) -> dict[str, Any]:
        return {"array": self.array}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["array"])  # type: ignore[misc]

    def value(self) -> int:
        return int(self.array[0])

    def wait(self, seen: int, timeout: float) -> None:
        """Sleep until the word is no longer ``seen``, or ``timeout`` passed (or a signal came).

        Read ``seen`` before checking the condition you wait for: a wake-up that comes in between
        changes the word first, so this returns at once instead of sleeping through it.
        """
        if _FUTEX is None:
            time.sleep(min(POLL, timeout))
            return
        call, number = _FUTEX
        whole = int(timeout)
        ts = _Timespec(whole, int((timeout - whole) * 1e9))
        call(number, ctypes.c_void_p(self._address), _FUTEX_WAIT, seen, ctypes.byref(ts), None, 0)

    def wake_all(self) -> None:
        """Change the word and wake every process sleeping on it, in one system call.

        One writer only (the nemesis' process), so the increment loses nothing.
        """
        self.array[0] = (self.array[0] + 1) & _WAKE_ALL
        if _FUTEX is not None:
            call, number = _FUTEX
            call(number, ctypes.c_void_p(self._address), _FUTEX_WAKE, _WAKE_ALL, None, None, 0)


@dataclass
class Boost:
    """What lining up for a race changed in this process: undone (:meth:`undo`) once its call returned."""

    core: int  # the core it was moved to
    allowed: set[int]  # the cores it may use otherwise
    policy: tuple[int, int] | None = None  # the scheduling policy and priority it had, if changed
    nice: int | None = None  # the nice it had, if changed instead

    @property
    def realtime(self) -> bool:
        return self.policy is not None

    def move(self, index: int) -> int:
        """Move on to the ``index``-th allowed core (modulo their number); the core it is on."""
        core = sorted(self.allowed)[index % len(self.allowed)]
        if core != self.core:
            try:
                os.sched_setaffinity(0, {core})
                self.core = core
            except OSError:
                pass
        return self.core

    def undo(self) -> None:
        try:
            if self.policy is not None:
                os.sched_setscheduler(0, self.policy[0], os.sched_param(self.policy[1]))
            elif self.nice is not None:
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)
            os.sched_setaffinity(0, self.allowed)
        except OSError:
            pass


def boost(slot: int) -> Boost | None:
    """Move this process to core ``slot`` modulo its allowed cores and let it run there ahead of others,
    until :meth:`Boost.undo`; None where affinity cannot be set (then nothing changed).

    Why: every held worker is woken at once, but the scheduler tends to queue them on one core (the
    waker's, or the one each last ran on), where they take turns and never run at the same instant;
    spread over the cores by slot, neighbours in slot order run on different cores and can meet. On
    a loaded machine each core also runs other processes, and two racers seldom hold both cores at
    the same moment: a real-time priority (SCHED_FIFO, where allowed: root or CAP_SYS_NICE) lets each
    run on its core at once, ahead of every ordinary process, until its claim returned. Where that is
    not allowed, a lower nice (BOOST) helps a little; where neither is, the racers wait their turn.
    """
    try:
        allowed = os.sched_getaffinity(0)
        core = sorted(allowed)[slot % len(allowed)]
        os.sched_setaffinity(0, {core})
    except (AttributeError, OSError):
        return None
    saved = Boost(core, allowed)
    try:
        saved.policy = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
        return saved
    except (AttributeError, OSError):
        saved.policy = None
    try:
        saved.nice = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, BOOST)
    except OSError:
        saved.nice = None
    return saved
