"""One frozen :class:`RunConfig` per run: profile file + command-line overrides, validated up front.

Why one object: the coordinator, the workers, the nemesis and the service all read the same
resolved values, ``config.json`` stores exactly them, and :meth:`RunConfig.command` turns them
back into a command line, so a run can always be reproduced from its folder. Validation happens
here, before a folder is created or a process started, so bad input never costs a partial run.

Units: times in seconds. ``faults`` holds, per fault kind, either a rate per second of the
faulted phase (kills and pauses, injected by the nemesis) or a probability per task (``slow``)
or per action (``lose_reply``), drawn by the worker itself. 0 means "not requested".
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from takeover.contract import REFERENCE_QUEUE
from takeover.errors import UsageError
from takeover.run.ledger import REMEDIES

CONFIG_FILE = "config.json"
DEFAULT_PROFILE = "stress"
# The profiles travel with the package (takeover.workloads), found the way the import system found it.
PROFILE_DIR = Path(str(resources.files("takeover.workloads")))

# Fault kinds, in the order reports list them. Per-second rates for the nemesis' faults,
# probabilities for the faults a worker draws itself.
NEMESIS_FAULTS = ("kill", "kill_before_action", "kill_after_action", "kill_during_finish", "pause")
WORKER_FAULTS = ("lose_reply", "slow")
FAULT_KINDS = NEMESIS_FAULTS + WORKER_FAULTS
# Aimed kills and the worker phase each must hit (docs/history.md).
KILL_AIMS = {
    "kill": "random",
    "kill_before_action": "before_action",
    "kill_after_action": "after_action",
    "kill_during_finish": "during_finish",
}
AIM_PHASES = {"before_action": ("working",), "after_action": ("acted",), "during_finish": ("finishing",)}

TASK_DISTS = ("fixed", "uniform", "exponential", "lognormal", "pareto")


@dataclass(frozen=True)
class TaskTime:
    """How long a worker's local work takes.

    ``mean`` is the mean for every distribution; ``spread`` is the half-width as a fraction of
    the mean (uniform), sigma (lognormal) or the tail index alpha > 1 (pareto: heavy-tailed);
    ``max`` caps a draw (0 = no cap).
    """

    dist: str = "lognormal"
    mean: float = 0.1
    spread: float = 0.8
    max: float = 0.0


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs, resolved. Saved as ``config.json``; see docs/history.md for the keys."""

    profile: str = DEFAULT_PROFILE
    queue: str = REFERENCE_QUEUE
    workers: int = 4
    tasks: int = 400
    duration: float = 20.0
    lease: float = 1.0
    seed: int = 1
    out: str | None = None
    remedy: str = "none"
    heartbeat: float = 0.0
    arrival_rate: float = 0.0  # extra tasks per second during the faulted phase (0 = all up front)
    task_time: TaskTime = field(default_factory=TaskTime)
    local_step: float = 0.03  # the short local step between the action and finish (the S5 window)
    poll: float = 0.02  # base poll interval when nothing is claimable (jittered 0.5x-1.5x)
    client_timeout: float = 0.4  # the worker's timeout on the external service
    drain_timeout: float = 0.0  # 0 = derived: a few leases plus the longest task
    faults: Mapping[str, float] = field(default_factory=lambda: {k: 0.0 for k in FAULT_KINDS})

    # -- derived values -------------------------------------------------------------------------
    @property
    def slow_max(self) -> float:
        """The longest a slowed task works: it must outlive its lease, by up to one more lease."""
        return 2.0 * self.lease

    @property
    def longest_task(self) -> float:
        longest = self.task_time.max if self.task_time.max > 0 else 10.0 * self.task_time.mean
        if self.faults.get("slow", 0) > 0:
            longest = max(longest, self.slow_max)
        return longest + self.local_step + self.client_timeout

    @property
    def effective_drain_timeout(self) -> float:
        """How long the drain waits without progress before calling the remaining tasks stuck."""
        if self.drain_timeout > 0:
            return self.drain_timeout
        return 3.0 * self.lease + self.longest_task + 2.0

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["faults"] = {k: float(self.faults.get(k, 0.0)) for k in FAULT_KINDS}
        data["drain_timeout_effective"] = self.effective_drain_timeout
        data["command"] = self.command()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if isinstance(values.get("task_time"), Mapping):
            values["task_time"] = TaskTime(**values["task_time"])
        if "faults" in values:
            values["faults"] = {k: float(values["faults"].get(k, 0.0)) for k in FAULT_KINDS}
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))

    def command(self) -> str:
        """A shell line that reproduces this run: every value explicit, so profile edits cannot drift it."""
        tt = self.task_time
        parts = [
            "takeover", "stress",
            "--profile", self.profile,
            "--queue", self.queue,
            "--workers", str(self.workers),
            "--tasks", str(self.tasks),
            "--duration", _num(self.duration),
            "--lease", _num(self.lease),
            "--seed", str(self.seed),
            "--remedy", self.remedy,
            "--heartbeat", _num(self.heartbeat),
            "--arrival-rate", _num(self.arrival_rate),
            "--task-time-dist", tt.dist,
            "--task-time-mean", _num(tt.mean),
            "--task-time-spread", _num(tt.spread),
            "--task-time-max", _num(tt.max),
            "--local-step", _num(self.local_step),
            "--poll", _num(self.poll),
            "--client-timeout", _num(self.client_timeout),
            "--drain-timeout", _num(self.drain_timeout),
        ]  # fmt: skip
        for kind in FAULT_KINDS:
            parts += [f"--{kind.replace('_', '-')}-rate", _num(self.faults.get(kind, 0.0))]
        return " ".join(shlex.quote(p) for p in parts)

    # -- validation -----------------------------------------------------------------------------
    def validate(self) -> RunConfig:
        """Raise :class:`UsageError` naming the first bad value; return self for chaining."""
        _positive_int("workers", self.workers)
        _nonneg_int("tasks", self.tasks)
        _positive("duration", self.duration)
        _positive("lease", self.lease)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise UsageError(f"seed must be an integer, got {self.seed!r}")
        if self.remedy not in REMEDIES:
            raise UsageError(f"remedy must be one of {', '.join(REMEDIES)}, got {self.remedy!r}")
        for name in ("heartbeat", "arrival_rate", "drain_timeout"):
            _nonneg(name.replace("_", "-"), getattr(self, name))
        if self.heartbeat and self.heartbeat >= self.lease:
            raise UsageError(f"heartbeat ({self.heartbeat}) must be shorter than the lease ({self.lease})")
        if self.tasks == 0 and self.arrival_rate == 0:
            raise UsageError("nothing to do: tasks is 0 and arrival-rate is 0")
        tt = self.task_time
        if tt.dist not in TASK_DISTS:
            raise UsageError(f"task-time-dist must be one of {', '.join(TASK_DISTS)}, got {tt.dist!r}")
        _nonneg("task-time-mean", tt.mean)
        _nonneg("task-time-spread", tt.spread)
        _nonneg("task-time-max", tt.max)
        if tt.dist == "pareto" and tt.spread <= 1:
            raise UsageError(f"task-time-spread is the pareto tail index and must be > 1, got {tt.spread}")
        if tt.dist == "uniform" and tt.spread > 1:
            raise UsageError(f"task-time-spread for uniform must be <= 1 (a fraction of the mean), got {tt.spread}")
        _nonneg("local-step", self.local_step)
        _positive("poll", self.poll)
        _positive("client-timeout", self.client_timeout)
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown:
            raise UsageError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        for kind in FAULT_KINDS:
            rate = self.faults.get(kind, 0.0)
            _nonneg(f"{kind.replace('_', '-')}-rate", rate)
            if kind in WORKER_FAULTS and rate > 1:
                raise UsageError(f"{kind.replace('_', '-')}-rate is a probability and must be <= 1, got {rate}")
        return self


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _positive(name: str, value: Any) -> None:
    if not _is_number(value) or value <= 0:
        raise UsageError(f"{name} must be a positive number, got {value!r}")


def _nonneg(name: str, value: Any) -> None:
    if not _is_number(value) or value < 0:
        raise UsageError(f"{name} must be a number >= 0, got {value!r}")


def _positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise UsageError(f"{name} must be a positive integer, got {value!r}")


def _nonneg_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UsageError(f"{name} must be an integer >= 0, got {value!r}")


# -- profiles ---------------------------------------------------------------------------------------
GRID_PREFIX = "sweep-"  # workloads/sweep-*.toml are grids for `takeover sweep`, not run profiles


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml") if not p.stem.startswith(GRID_PREFIX))


def profile_path(name: str) -> Path:
    """A bare name is a file in workloads/; anything with a slash or .toml is a path."""
    if name.endswith(".toml") or "/" in name:
        path = Path(name)
    else:
        path = PROFILE_DIR / f"{name}.toml"
    if not path.is_file():
        known = ", ".join(profile_names()) or "none"
        raise UsageError(f"unknown profile {name!r} (known: {known})")
    return path


_TOP_KEYS = {
    "description", "queue", "workers", "tasks", "duration", "lease", "seed", "remedy", "heartbeat",
    "arrival_rate", "local_step", "poll", "client_timeout", "drain_timeout", "task_time", "faults",
}  # fmt: skip


def read_toml(path: Path, what: str, known: set[str]) -> dict[str, Any]:
    """A profile or grid file as a dict; unreadable, malformed or unknown keys are one-line errors."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{what} {str(path)!r} is not valid TOML: {exc}") from None
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"{what} {str(path)!r}: unknown key(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    return data


def load_profile(name: str) -> RunConfig:
    """Read ``workloads/<name>.toml`` into a RunConfig (not yet validated: overrides come next)."""
    path = profile_path(name)
    data = read_toml(path, "profile", _TOP_KEYS)
    data.pop("description", None)
    task_time = data.pop("task_time", {})
    faults = data.pop("faults", {})
    if not isinstance(task_time, dict) or set(task_time) - {f.name for f in dataclasses.fields(TaskTime)}:
        raise UsageError(f"profile {str(path)!r}: [task_time] takes dist, mean, spread, max")
    if not isinstance(faults, dict) or set(faults) - set(FAULT_KINDS):
        raise UsageError(f"profile {str(path)!r}: [faults] takes {', '.join(FAULT_KINDS)}")
    for kind, rate in faults.items():  # float() would take True and "0.5", and crash on "a" or [1]
        if not _is_number(rate):
            raise UsageError(f"profile {str(path)!r}: [faults] {kind} must be a number, got {rate!r}")
    task_time = {k: (float(v) if k != "dist" and _is_number(v) else v) for k, v in task_time.items()}
    floats = {"duration", "lease", "heartbeat", "arrival_rate", "local_step", "poll", "client_timeout",
              "drain_timeout"}  # fmt: skip
    data = {k: (float(v) if k in floats and _is_number(v) else v) for k, v in data.items()}
    return RunConfig(
        profile=name,
        task_time=TaskTime(**task_time),
        faults={k: float(faults.get(k, 0.0)) for k in FAULT_KINDS},
        **data,
    )


def profile_description(name: str) -> str:
    try:
        return str(tomllib.loads(profile_path(name).read_text()).get("description", ""))
    except (OSError, tomllib.TOMLDecodeError, UsageError):
        return ""


def with_overrides(base: RunConfig, overrides: Mapping[str, Any]) -> RunConfig:
    """Apply command-line values (None = not given). Task-time and fault keys are prefixed."""
    top: dict[str, Any] = {}
    tt: dict[str, Any] = {}
    faults = dict(base.faults)
    for key, value in overrides.items():
        if value is None:
            continue
        if key.startswith("task_time_"):
            tt[key.removeprefix("task_time_")] = value
        elif key.endswith("_rate") and key.removesuffix("_rate") in FAULT_KINDS:
            faults[key.removesuffix("_rate")] = value
        else:
            top[key] = value
    return dataclasses.replace(
        base, task_time=dataclasses.replace(base.task_time, **tt), faults=faults, **top
    )


def load_run_config(run_dir: str | Path) -> RunConfig:
    return RunConfig.from_json((Path(run_dir) / CONFIG_FILE).read_text())
