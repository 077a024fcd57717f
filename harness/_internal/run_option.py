"""What one run option is (:class:`RunOption`): its flag, where its value lives, how the command line reads
it and the API takes it, how a profile's value is read, how the reproduce line writes it; and the checks
of one value that the options name.

Why apart from :mod:`takeover._internal.options`: that module is the table (every run option, and the parsers and
mappings derived from it); this is the kind of its rows, which the table, the config and the API read.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from takeover.errors import UsageError

# How a sweep grid treats an option (``RunOption.grid``).
GridRole = Literal["fixed", "axis", "own"]
GRID_FIXED: GridRole = "fixed"  # the grid file's [fixed] table may set it: one value for every cell
GRID_AXIS: GridRole = "axis"  # a dimension of the grid: its lease list, its modes, its distributions, its fault rates
GRID_OWN: GridRole = "own"  # the sweep decides it: the base profile, each run's seed and folder


# -- the checks of one value: each names the option as its flag does, without the dashes ---------------------
def is_number(value: Any) -> bool:
    """A real, finite number: True, ``"0.5"`` and NaN are not (a profile could hold any of them)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def positive(name: str, value: Any) -> None:
    if not is_number(value) or value <= 0:
        raise UsageError(f"{name} must be a positive number, got {value!r}")


def nonneg(name: str, value: Any) -> None:
    if not is_number(value) or value < 0:
        raise UsageError(f"{name} must be a number >= 0, got {value!r}")


def probability(name: str, value: Any) -> None:
    nonneg(name, value)
    if value > 1:
        raise UsageError(f"{name} is a probability and must be <= 1, got {value}")


def integer(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"{name} must be an integer, got {value!r}")


def positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")


def nonneg_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"{name} must be an integer >= 0, got {value!r}")


# -- counts that cost processes or memory: bounded by what this machine can hold -------------------------------
WORKERS_PER_CORE = 32  # a run's worker processes (and, with exec:, as many adapters) per core, at least MIN_MAX_WORKERS
MIN_MAX_WORKERS = 64
MAX_TASKS = 10_000_000  # tasks a run registers (before and during it): the checker reads 1M-event runs in seconds


def max_workers() -> int:
    """The most worker processes one run (or job count) may start here: WORKERS_PER_CORE per core (at least
    MIN_MAX_WORKERS), and at most a quarter of this user's process limit (RLIMIT_NPROC: each worker may have
    an adapter, and the run has its coordinator, service and probe besides). 100,000 workers spawned hundreds
    of processes before a Ctrl-C could stop them (issue 34)."""
    import resource

    limit = max(MIN_MAX_WORKERS, WORKERS_PER_CORE * (os.cpu_count() or 1))
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and soft > 0:
        limit = min(limit, max(1, soft // 4))
    return limit


def worker_count(name: str, value: Any) -> None:
    positive_int(name, value)
    if value > max_workers():
        raise UsageError(f"{name} must be at most {max_workers()} on this machine ({WORKERS_PER_CORE} per core, "
                         f"at least {MIN_MAX_WORKERS}, within a quarter of the process limit), got {value}")


def task_count(name: str, value: Any) -> None:
    nonneg_int(name, value)
    if value > MAX_TASKS:
        raise UsageError(f"{name} must be at most {MAX_TASKS:,}, got {value:,}")


def boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be true or false, got {value!r}")


def _num(value: float) -> str:
    """A number as the reproduce line writes it: ``2`` for 2.0, the shortest exact repr otherwise."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class RunOption:
    """One run option. Only ``flag``, ``field``, ``value_type`` and ``help`` are needed for a plain one.

    ``field`` is where the value lives in ``RunConfig``: a field name (``"workers"``), or a key of one
    of its two nested values, ``"task_time.mean"`` (a field of ``TaskTime``) or ``"faults.kill"`` (a
    key of the fault-rate mapping). A profile file spells it the same way: ``mean`` under
    ``[task_time]``, ``kill`` under ``[faults]``.

    ``default`` is what the command line holds when the option is not given. ``None`` (every option
    but ``--profile``) means "keep the profile's value": the option overrides the profile. ``--profile``
    has a default because it does not override anything; it picks what is overridden.
    """

    flag: str  # on the command line; its dest and the name in messages follow from it
    field: str
    value_type: type[int] | type[float] | type[str] | type[bool]  # parses the line, reads profiles, writes it back
    help: str  # ``{profiles}`` stands for the list of profiles (only ``--profile`` needs it)
    check: Callable[[str, Any], None] | None = None  # the value's own check; choices are checked anyway
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    default: Any = None
    profile: bool = True  # a profile (and so a banked config) may set it
    reproduce: bool = True  # written into the reproduce line
    soak: str = ""  # when set, takeover soak refuses the option, for this reason (it decides the value itself)
    grid: GridRole = GRID_FIXED
    sweep_help: str = ""  # when set, takeover sweep takes it too (one value for every run), with this help
    # The reproduce line leaves the option out at this value (its default, which a rerun gets anyway), so
    # an option most runs never use does not lengthen every line; None: always written.
    omit: Any = None
    # How the command line reads the value, when ``value_type`` alone does not (the duplicate gate's rate is
    # checked as it is read); it raises argparse.ArgumentTypeError with the one-line reason.
    text_type: Callable[[str], Any] | None = None

    @property
    def name(self) -> str:
        """The option in messages: ``task-time-mean``."""
        return self.flag.removeprefix("--")

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under, and its key in an overrides mapping: ``task_time_mean``."""
        return self.name.replace("-", "_")

    @property
    def is_flag(self) -> bool:
        """A flag (``--swarm``) takes no value: given, it is True; the reproduce line writes it only when True."""
        return self.value_type is bool

    def argv(self, value: Any) -> list[str]:
        """The arguments that give this option ``value`` on the command line (none for a flag that is False)."""
        if self.is_flag:
            return [self.flag] if value else []
        return [self.flag, self.render(value)]

    @property
    def overrides(self) -> bool:
        """Whether a value given on the command line replaces the profile's (see ``default``)."""
        return self.default is None

    def value_in(self, cfg: object) -> Any:
        """This option's value in a ``RunConfig`` (a fault kind it does not list is 0: not requested).
        Typed ``object``: the table sits below the config that reads it (takeover._internal.config)."""
        head, _, key = self.field.partition(".")
        part = getattr(cfg, head)
        if not key:
            return part
        return part.get(key, 0.0) if isinstance(part, Mapping) else getattr(part, key)

    def render(self, value: Any) -> str:
        """The value as the reproduce line writes it; ``value_type`` parses it back to the same value."""
        return _num(value) if self.value_type is float else str(value)

    def parse(self, text: str) -> Any:
        """The value of ``--flag TEXT``: the parser's ``type`` (add_option), and what :meth:`take` reads a
        Python value with, so the command line and the API read and refuse a value in the same words.
        argparse prefixes the reason with ``argument --flag: ``."""
        if self.text_type is not None:
            return self.text_type(text)
        try:
            value = self.value_type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {self.value_type.__name__} value: {text!r}") from None
        if self.choices and value not in self.choices:  # argparse's words, before argparse would check
            raise argparse.ArgumentTypeError(
                f"invalid choice: {value!r} (choose from {', '.join(map(repr, self.choices))})")
        return value

    def take(self, value: Any) -> Any:
        """A value given in Python (``takeover.stress(workers=4)``) as the command line would read it: text is
        parsed (:meth:`parse`), a number written out as the reproduce line writes it and parsed back, a path
        taken as its text; a flag must be True or False (a UsageError), False being "not given", as None is. A value the
        command line would refuse raises argparse.ArgumentTypeError with the command line's reason."""
        if value is None:
            return None
        if self.is_flag:
            if not isinstance(value, bool):
                raise UsageError(f"{self.dest} is a flag: True or False, got {value!r}")
            return value or None  # False is the flag not given, as on the command line: its default
        if isinstance(value, os.PathLike):
            text = os.fspath(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            text = self.render(value)
        else:
            text = str(value)
        return self.parse(text)

    def read(self, value: Any) -> Any:
        """A value from a TOML file: TOML writes 2 for 2.0, so a number becomes a float where one is due.

        Anything else is left as it is, for :func:`takeover._internal.config.check_values` to name (``float("a")`` would
        crash, ``float(True)`` would pass).
        """
        return float(value) if self.value_type is float and is_number(value) else value
