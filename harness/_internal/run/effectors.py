"""The fault effectors: carry out on real processes what the nemesis decides, and record it.

Why apart from the nemesis: the nemesis only chooses (which fault, when, at whom) from seeded
streams and the phase board, so it can be driven and tested without processes. The effectors do the
dangerous part — SIGSTOP, SIGKILL, SIGCONT on a live worker — and write the history records that
tell the checker what really happened: a kill's invoke and its completion with the phase the dead
process left on the board, a pause's start and its actual length. They hand these callables to
the nemesis (``probe``, ``release``, ``kill``, ``pause``, ``resume``).
"""

from __future__ import annotations

import signal
import time
from typing import Any

from takeover._internal.history import HistoryWriter
from takeover._internal.run.nemesis import Pause
from takeover._internal.run.phases import SlotView, task_id
from takeover._internal.run.supervision import Supervisor, send, wait_stopped


class Effectors:
    def __init__(self, supervisor: Supervisor, hist: HistoryWriter) -> None:
        self.sup = supervisor
        self.board = supervisor.board
        self.hist = hist

    def kill(self, slot: int, aim: str, view: SlotView) -> str:
        """SIGKILL, reap, and read the phase the dead process left on the board: the truth."""
        h = self.sup.handles[slot]
        fields = _held(view)
        self.hist.write("invoke", "kill", target=h.process, worker=f"w{slot}", pid=h.proc.pid, value=aim,
                        phase=view.phase, **fields)  # fmt: skip
        send(h.proc.pid, signal.SIGKILL)
        h.proc.join(5.0)
        after = self.board.read(slot)
        self.sup.record_exit(h, "nemesis")
        fields = _held(after)
        self.hist.write("ok", "kill", target=h.process, worker=f"w{slot}", value=aim, phase=after.phase, **fields)
        self.sup.dismiss(slot)
        return after.phase

    def probe(self, slot: int) -> SlotView | None:
        """Freeze a worker and read where it really is; None if it is gone."""
        h = self.sup.handles.get(slot)
        if h is None or h.proc.exitcode is not None:
            return None
        send(h.proc.pid, signal.SIGSTOP)
        if not wait_stopped(h.proc.pid):
            send(h.proc.pid, signal.SIGCONT)
            return None
        return self.board.read(slot)

    def release(self, slot: int) -> None:
        h = self.sup.handles.get(slot)
        if h is not None:
            send(h.proc.pid, signal.SIGCONT)

    def pause(self, slot: int, pause: Pause) -> None:
        """The worker is already stopped by the probe; the invoke marks the pause's start."""
        h = self.sup.handles[slot]
        v = pause.view
        self.hist.write("invoke", "pause", target=h.process, worker=f"w{slot}", pid=h.proc.pid,
                        value=f"{pause.planned:.4f}", phase=v.phase, lease_until=v.lease_until,
                        detail=pause.klass, **_held(v))  # fmt: skip

    def resume(self, pause: Pause) -> None:
        h = self.sup.handles.get(pause.slot)
        if h is None or h.process != pause.process or h.proc.exitcode is not None or self.sup.killed_all:
            # killed while frozen (a second Ctrl-C, someone else's SIGKILL): no end to report
            self.hist.write("info", "pause", target=pause.process, worker=f"w{pause.slot}", detail=pause.klass,
                            error="the paused worker died before it could be resumed",
                            lease_until=pause.view.lease_until, **_held(pause.view))  # fmt: skip
            return
        send(h.proc.pid, signal.SIGCONT)
        actual = time.time() - pause.started
        self.hist.write("ok", "pause", target=pause.process, worker=f"w{pause.slot}",
                        value=f"{actual:.4f}", detail=pause.klass, late=round(actual - pause.planned, 4),
                        lease_until=pause.view.lease_until, **_held(pause.view))  # fmt: skip


def _held(view: SlotView) -> dict[str, Any]:
    """The task a worker held when the fault reached it, as history fields (none when it held none)."""
    if view.task < 0:
        return {}
    return {"task": task_id(view.task), "gen": view.gen}
