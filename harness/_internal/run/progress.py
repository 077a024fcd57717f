"""Live progress for long runs: what a run has done so far, and how it is shown.

:class:`Progress` is the model: the coordinator's loop fills it from the phase board's counters and
the nemesis' tally and hands it to an ``on_progress`` callback. The display shows it as a rich panel
on a terminal, plain periodic lines otherwise (CI logs). Why both: a person watching a terminal
wants one updating status; a CI log wants a line every few seconds that still reads well when
captured, and no escape codes.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Self, TextIO

from takeover._internal.run.phases import COUNTERS, PhaseBoard
from takeover._internal.run.tally import Tally

PLAIN_EVERY = 2.0


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
    aimed_hits: int = 0  # aimed faults whose window was reached
    aimed: int = 0  # aimed faults that ended, hit or missed
    probes: int | None = None  # mid-run snapshot probes answered (None: the run has none)

    def observe(self, board: PhaseBoard, tally: Tally, *, registered: int, alive: int) -> None:
        """Take the counts: what the workers did (their counters on the board, summed over every
        incarnation) and what the nemesis injected (its tally)."""
        self.registered = registered
        self.done = board.total(COUNTERS["done"])
        self.actions = board.total(COUNTERS["actions"])
        self.lost_replies = board.total(COUNTERS["lose_reply"])
        self.slow = board.total(COUNTERS["slow"])
        self.kills = sum(tally.kills.values())
        self.kill_hits = sum(tally.kill_hits.values())
        self.pauses = sum(tally.pauses.values())
        self.aimed_hits = sum(tally.aimed.hits.values())
        self.aimed = self.aimed_hits + sum(tally.aimed.missed.values())
        self.alive = alive


def _tasks(p: Progress) -> str:
    """Tasks as the queue counts them, and the finishes it accepted, which are not the same thing.

    A task ends with one accepted finish in a correct queue, but the workers count every finish the
    queue *accepted*: a queue that accepts a stale or repeated finish counts a task twice. Shown as
    "done 361/349" that read as a broken counter; said in words it is an early sign of a queue bug.
    """
    text = f"{p.registered} registered"
    if p.terminal is not None:
        text += f", {p.terminal} terminal"
    return f"{text}; {accepted_finishes(p.done, p.registered)}"


def accepted_finishes(accepted: int, tasks: int) -> str:
    """``finishes accepted N``, and in words when N exceeds the tasks (see :func:`_tasks`)."""
    text = f"finishes accepted {accepted}"
    if accepted > tasks:
        text += " (more than the tasks: a task was finished twice)"
    return text


def _line(p: Progress) -> str:
    clock = f"{p.elapsed:5.1f}s" + (f"/{p.duration:g}s" if p.stage == "faults" else "")
    return (
        f"[{p.stage}] {clock} tasks: {_tasks(p)}, actions {p.actions} | "
        f"faults: kills {p.kills} (aims hit {p.kill_hits}), pauses {p.pauses}, lost replies "
        f"{p.lost_replies}, slow {p.slow}{_aimed(p)} | workers {p.alive}/{p.workers}{_probes(p)}"
    )


def _probes(p: Progress) -> str:
    return f" | probes {p.probes}" if p.probes is not None else ""


def _aimed(p: Progress) -> str:
    return f", aimed windows hit {p.aimed_hits}/{p.aimed}" if p.aimed else ""


class LiveDisplay:
    """A rich ``Live`` panel when writing to a terminal, nothing live otherwise.

    Subclasses decide what to show and when to print a plain line; this class owns the one thing
    they share: entering and leaving the live panel, and printing lines that must stay in the log.
    """

    refresh_per_second = 4

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live_mode = self.stream.isatty() if live is None else live
        self._live: Any = None

    def __enter__(self) -> Self:
        if self.live_mode:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                console=Console(file=self.stream), refresh_per_second=self.refresh_per_second, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def note(self, text: str) -> None:
        """A line that must stay in the log (a verdict), printed above the live panel if there is one."""
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.stream, flush=True)


class ProgressDisplay(LiveDisplay):
    """Use as a context manager; pass :meth:`update` as the coordinator's ``on_progress``."""

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        super().__init__(stream, live=live)
        self._last_plain = 0.0
        self._last_stage = ""

    def update(self, p: Progress) -> None:
        if self._live is not None:
            self._live.update(self._render(p))
            return
        now = time.monotonic()
        if p.stage != self._last_stage or now - self._last_plain >= PLAIN_EVERY:
            self._last_plain, self._last_stage = now, p.stage
            print(_line(p), file=self.stream, flush=True)

    def _render(self, p: Progress) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        stage = {"faults": "faulted phase", "drain": "drain (no faults)", "finished": "finished"}.get(p.stage, p.stage)
        clock = f"{p.elapsed:.1f}s" + (f" of {p.duration:g}s" if p.stage == "faults" else "")
        table.add_row("stage", f"{stage}  {clock}")
        table.add_row("tasks", _tasks(p))
        table.add_row("actions", str(p.actions))
        table.add_row("kills", f"{p.kills} (aimed kills that hit their phase + random: {p.kill_hits})")
        table.add_row("pauses", str(p.pauses))
        table.add_row("lost replies", str(p.lost_replies))
        table.add_row("slow tasks", str(p.slow))
        if p.aimed:
            table.add_row("aimed faults", f"{p.aimed} ({p.aimed_hits} reached their window)")
        table.add_row("workers", f"{p.alive}/{p.workers} alive")
        if p.probes is not None:
            table.add_row("probes", f"{p.probes} snapshots read mid-run")
        return table
