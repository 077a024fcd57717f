"""Rounds of long steps (whole multi-process runs) whose figures leave out the rounds something else disturbed.

Why: the ``workers4`` figures compare steps that are each a whole run of four or more processes on the
2 cores (a real stress run, the queue alone in 4 processes, with a service, with an echo peer), several
seconds long, so a round takes about 17 s and alternating short turns (:class:`takeover.benchmarks.timing.Turns`)
is not possible. Another process that competes for the cores during one step and not during the other of a
ratio lands in that round's ratio, and not evenly: four workers, a service and a coordinator lose more to a
competitor than the queue alone in 4 processes does (under others' load of 1.2-1.6 cores the stress run's
rate fell to half in two of five rounds while the queue's with the service held). That is a real effect,
and a figure measured so is honestly another figure: it says nothing about takeover's own cost.

So every step's share of the machine that other processes used is measured
(:class:`takeover.benchmarks.others_cpu.OthersCpu`, per step); a round in which others used more than
:data:`DISTURBED_SHARE` of the CPUs during any of its steps is *disturbed*: it is kept in the record
(``round_steps``, with every step's rate and others' cores) but left out of the ratios, and a round is
measured again in its place, at most ``extra`` times. Only the steps of the judged figures (``key``) decide
whether a round is disturbed; every ratio is of the rounds in which both its steps were quiet. The figures
are the medians over the quiet rounds, and say how many were left out (``excluded_rounds``). With fewer
than half the planned rounds quiet the
figures are the medians over all rounds and the measurement is not quiet (``too_few_quiet``): the benchmarks
page then shows it as not judged, never as a pass.

The order of the steps is flipped every round (``order``, then reversed), so each step sits on either side
of its neighbours in turn; ``workers4`` puts the stress run between the two figures it is compared with.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from takeover.benchmarks.others_cpu import OthersCpu
from takeover.benchmarks.timing import Load, Spread

# A step during which other processes used more than this share of the machine's CPUs (0.1 of 2 cores)
# disturbs its round. Half the whole measurement's quiet share (others_cpu.QUIET_SHARE): a step is a few
# seconds, and a competitor of 0.1 cores already takes a few percent from 4 processes that fill 2 cores.
DISTURBED_SHARE = 0.05


class Probe(Protocol):
    def cores(self) -> tuple[float, float, float]: ...


@dataclass(frozen=True)
class Step:
    """One step of a round: its rate, and the cores other processes used meanwhile."""

    rate: float
    others_cores: float
    seconds: float


@dataclass
class Rounds:
    """Named steps (each returns its rate), run round after round in ``order`` and then reversed."""

    steps: dict[str, Callable[[], float]]
    order: Sequence[str]
    key: Sequence[str] = ()  # the steps of the judged figures, whose quiet decides a round's (empty: all of them)
    probe: Callable[[], Probe] = OthersCpu
    cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    done: list[dict[str, Step]] = field(default_factory=list)
    load: Load = field(default_factory=Load)
    planned: int = 0

    def run(self, planned: int, extra: int = 0) -> Rounds:
        """``planned`` rounds, then one more for each disturbed round while fewer than ``planned`` are quiet,
        at most ``extra`` more; none when even quiet ones could not make enough (a machine busy throughout:
        the figures are not judged either way, and the bench is not made longer for them)."""
        self.planned = planned
        while len(self.done) < planned or (
            len(self.quiet) < planned
            and len(self.done) < planned + extra
            and len(self.quiet) + planned + extra - len(self.done) >= self.least
        ):
            names = list(self.order) if len(self.done) % 2 == 0 else list(reversed(self.order))
            steps = {}
            for name in names:
                probe = self.probe()
                rate = self.steps[name]()
                others, _ours, seconds = probe.cores()
                steps[name] = Step(rate, others, seconds)
            self.done.append(steps)
            self.load.sample()
        return self

    def step_quiet(self, step: Step) -> bool:
        return step.others_cores <= DISTURBED_SHARE * self.cpus

    def disturbed(self, steps: dict[str, Step]) -> bool:
        """Whether others disturbed one of the round's ``key`` steps."""
        return not all(self.step_quiet(s) for name, s in steps.items() if not self.key or name in self.key)

    @property
    def quiet(self) -> list[dict[str, Step]]:
        return [r for r in self.done if not self.disturbed(r)]

    @property
    def least(self) -> int:
        """The quiet rounds a judged figure needs: half the planned ones (and one)."""
        return max(1, (self.planned + 1) // 2)

    @property
    def enough_quiet(self) -> bool:
        return len(self.quiet) >= self.least

    @property
    def counted(self) -> list[dict[str, Step]]:
        """The rounds the figures are of: the quiet ones, or every round when too few were quiet."""
        return self.quiet if self.enough_quiet else self.done

    def _of(self, *names: str) -> list[dict[str, Step]]:
        """The rounds in which the steps ``names`` were all quiet, or every round when fewer than ``least``."""
        quiet = [r for r in self.done if all(self.step_quiet(r[n]) for n in names)]
        return quiet if len(quiet) >= self.least else self.done

    def rates(self, name: str) -> tuple[float, ...]:
        """The step's rates, over the rounds it was quiet in."""
        return tuple(r[name].rate for r in self._of(name))

    def ratio(self, num: str, den: str) -> Spread:
        """``num`` over ``den``, round by round over the rounds in which both were quiet (for the ``key``
        steps' ratios, the counted rounds and perhaps more; a step outside ``key`` disturbed only its own
        ratios)."""
        return Spread(tuple(r[num].rate / r[den].rate for r in self._of(num, den) if r[den].rate > 0))

    def figures(self) -> dict[str, Any]:
        """``round_steps`` (every round: each step's rate, others' cores and seconds, and whether it was
        ``counted``), ``when``, ``load_avg`` and ``cpu``, whose ``quiet`` is of the counted rounds:
        ``excluded_rounds`` were left out, ``too_few_quiet`` when the figures are of all rounds."""
        counted = {id(r) for r in self.counted}
        record = [{**{name: {"rate": round(s.rate, 1), "others_cores": round(s.others_cores, 2),
                             "seconds": round(s.seconds, 1)} for name, s in r.items()},
                   "counted": id(r) in counted} for r in self.done]  # fmt: skip
        figures = self.load.figures()
        cpu = figures.get("cpu")
        if isinstance(cpu, dict):
            excluded = len(self.done) - len(counted)
            cpu["excluded_rounds"] = excluded
            cpu["quiet"] = self.enough_quiet
            if not self.enough_quiet:
                cpu["too_few_quiet"] = True
        return {"round_steps": record, **figures}
