"""One frozen :class:`RunConfig` per run: profile file + command-line overrides, validated up front.

Why one object: the coordinator, the workers, the nemesis and the service all read the same
resolved values, ``config.json`` stores exactly them, and :meth:`RunConfig.command` turns them
back into a command line, so a run can always be reproduced from its folder. Validation happens
here, before a folder is created or a process started, so bad input never costs a partial run.

Which options a run takes, and how each is named, checked and written back, is declared once in
:mod:`takeover._internal.options`; this module reads that table for the profile keys, the overrides and the
checks. Units: times in seconds; ``faults`` holds a rate or probability per fault kind (see there).
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

from takeover._internal import db, options
from takeover._internal.options import (
    BY_DEST,
    BY_FIELD,
    DB_OPTION,
    DEFAULT_PROFILE,
    DEFAULT_REDIS_PERSISTENCE,
    FAULT_KINDS,
    NET_FIELDS,
    REDIS_LOCAL_FAULTS,
    RUN_OPTIONS,
)
from takeover._internal.run_option import MAX_TASKS
from takeover.contract import REFERENCE_QUEUE, reference_queue
from takeover.errors import UsageError

# The profiles travel with the package (takeover.workloads), found the way the import system found it.
PROFILE_DIR = Path(str(resources.files("takeover.workloads")))

# Aimed kills and the worker phase each must hit (docs/history.md).
KILL_AIMS = {
    "kill": "random",
    "kill_before_action": "before_action",
    "kill_after_action": "after_action",
    "kill_during_finish": "during_finish",
}
AIM_PHASES = {"before_action": ("working",), "after_action": ("acted",), "during_finish": ("finishing",)}


# RunConfig fields of the clock faults (takeover._internal.run.clock): in config.json only when not at their defaults.
CLOCK_FIELDS = ("clock_skew_max", "clock_jump_rate", "clock_jump_max")
PAUSE_FIELDS = ("pause_time_file", "pause_time_scale", "pause_time_samples")
# RunConfig fields no option sets: read from a file the config names (pause_time_file), kept in config.json.
DERIVED_FIELDS = ("pause_time_samples",)

# RunConfig fields that say where the run was started rather than what it does (see there).
LOCATION_FIELDS = ("workdir", "pythonpath")
# The run's database (takeover._internal.db): set by --db, which every command that runs a queue takes and which
# takeover._internal.options therefore declares beside the run options (DB_OPTION) rather than among them. A SQLite
# run's config.json leaves it out, so it stays byte for byte what it was before PostgreSQL.
DB_FIELDS = ("db",)


@dataclass(frozen=True)
class TaskTime:
    """How long a worker's local work takes.

    ``mean`` is the mean for every distribution; ``spread`` is the half-width as a fraction of
    the mean (uniform), sigma (lognormal) or the tail index alpha > 1 (pareto: heavy-tailed);
    ``max`` caps a draw (0 = no cap).

    ``empirical`` resamples observed durations: ``file`` names them (a CSV column, a JSON list or a
    percentile summary: :mod:`takeover._internal.task_times`), ``scale`` divides each (``takeover tune``'s time
    scale: hours of production become minutes of a run), and ``samples`` holds the scaled durations
    the workers draw from, read from the file once when the config is validated and kept in
    ``config.json``, so a run folder says exactly what its workers drew from. ``mean`` and ``max``
    then hold the samples' mean and longest, for everything that sizes a run by them (the drain).
    """

    dist: str = "lognormal"
    mean: float = 0.1
    spread: float = 0.8
    max: float = 0.0
    file: str = ""
    scale: float = 1.0
    samples: tuple[float, ...] = ()

    def resolved(self) -> TaskTime:
        """With ``empirical``, the file's durations read and scaled into ``samples`` (once); else self."""
        if self.dist != "empirical":  # the file is ignored then, as the spread is by a fixed distribution
            return self
        if self.samples:
            return self
        if not self.file:
            raise UsageError("task-time-dist empirical needs --task-time-file FILE (observed durations)")
        from takeover._internal.task_times import load_task_times, split_spec

        scaled = load_task_times(self.file).scaled(self.scale)
        mean = round(math.fsum(scaled) / len(scaled), 6)
        path, column = split_spec(self.file)  # absolute, so the reproduce line reads it from any folder
        where = str(path.absolute()) + (f":{column}" if column else "")
        return dataclasses.replace(self, file=where, samples=scaled, mean=mean, max=max(scaled))


# TaskTime fields only an empirical distribution has: other runs' config.json stays without them.
EMPIRICAL_FIELDS = ("file", "scale", "samples")
_TASK_TIME_DEFAULTS = TaskTime()


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
    # the fault rates were drawn from the seed (takeover._internal.swarm); ``faults`` holds the draw
    swarm: bool = False
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
    # each worker incarnation's clock offset, uniform in [-max, +max] (takeover._internal.run.clock)
    clock_skew_max: float = 0.0
    clock_jump_rate: float = 0.0  # steps of a running worker's clock, per second of the faulted phase
    clock_jump_max: float = 1.0  # the largest step, either way
    # Power losses per second of the faulted phase (takeover._internal.run.power): not a kind of ``faults``, because
    # it needs FUSE on the machine, so a swarm draw or a profile's rates must never turn it on unasked.
    power_loss_rate: float = 0.0
    # Mid-run snapshot probes per second (takeover._internal.run.probes): the queue's table read by a process of its
    # own while the run goes on, judged by the checker against what was acknowledged before each probe.
    probe_rate: float = 0.0
    # Pause lengths (GC or VM stalls) drawn from observed durations instead of the lease-relative classes
    # (takeover._internal.run.nemesis): the file in takeover._internal.task_times' formats, divided by the scale; the
    # samples are read once at validation and kept in config.json, as an empirical task time's are.
    pause_time_file: str = ""
    pause_time_scale: float = 1.0
    pause_time_samples: tuple[float, ...] = ()
    # Where the run was started, as far as a rerun needs it (takeover._internal.locate): found out, not chosen, so
    # no option sets them; the reproduce line writes them as ``cd WORKDIR &&`` and ``PYTHONPATH=...``.
    workdir: str | None = None
    pythonpath: tuple[str, ...] = ()
    db: str = db.DEFAULT  # sqlite, postgres or a postgresql:// URL without its password (takeover._internal.db.redact)
    # The run's hosts and network faults (takeover._internal.net): not kinds of ``faults``, because they need a database
    # reached over a network and root, so a swarm draw or a profile's rates must never turn them on unasked.
    hosts: int = 0  # workers on this many hosts (network namespaces) reaching the database over a bridge; 0 = none
    partition_rate: float = 0.0  # partitions per second: a drawn set of hosts cut from the database, then healed
    conn_kill_rate: float = 0.0  # a drawn worker's database session terminated by the server, per second
    db_restart_rate: float = 0.0  # database crashes (immediate stop) and restarts, per second
    db_pause_rate: float = 0.0  # database freezes (SIGSTOP, then SIGCONT after a drawn time), per second
    db_lost_reply_rate: float = 0.0  # answers of the run's Redis server lost on a worker's connection, per second
    # How the run's private Redis server keeps its data (--db redis only; takeover._internal.db.redis_server).
    redis_persistence: str = DEFAULT_REDIS_PERSISTENCE
    net_delay: float = 0.0  # seconds added each way on every host's path (a proxy)
    net_loss: float = 0.0  # share of packets dropped each way on every host's path

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
    def clock_error(self) -> float:
        """About the most two workers' clocks disagree by: twice the largest skew, plus a worker's share of
        the jumps, each at its largest. A task whose holder died is taken over only once a live worker's
        clock passes the dead holder's lease, up to this much later than on the real clock."""
        if self.clock_jump_rate <= 0 or self.clock_jump_max <= 0:
            return 2.0 * self.clock_skew_max
        return 2.0 * self.clock_skew_max + self.clock_jump_max * max(1.0, self.clock_jump_rate * self.duration
                                                                     / self.workers)

    @property
    def effective_drain_timeout(self) -> float:
        """How long the drain waits without progress before calling the remaining tasks stuck."""
        if self.drain_timeout > 0:
            return self.drain_timeout
        return 3.0 * self.lease + self.longest_task + 2.0 + self.clock_error

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for name in LOCATION_FIELDS:  # only when a rerun needs them: other runs' config.json stays as it was
            if not data[name]:
                del data[name]
            elif name == "pythonpath":
                data[name] = list(data[name])
        if data["db"] == db.DEFAULT:
            del data["db"]
        data["faults"] = {k: float(self.faults.get(k, 0.0)) for k in FAULT_KINDS}
        for name in EMPIRICAL_FIELDS:  # at their defaults (every non-empirical run): left out
            if getattr(self.task_time, name) == getattr(_TASK_TIME_DEFAULTS, name):
                del data["task_time"][name]
        if self.task_time.samples:
            data["task_time"]["samples"] = list(self.task_time.samples)
        # At their defaults (no clock faults, no power losses, the lease-relative pauses): left out, so other
        # runs' config.json stays as it was.
        for name in (*CLOCK_FIELDS, "power_loss_rate", "probe_rate", *PAUSE_FIELDS, *NET_FIELDS):
            if data[name] == getattr(_RUN_DEFAULTS, name):
                del data[name]
            elif name == "pause_time_samples":
                data[name] = list(data[name])
        if db.kind(self.db) == db.REDIS:  # a Redis run says how its server kept its data, default or not
            data["redis_persistence"] = self.redis_persistence
        else:
            del data["redis_persistence"]
        if self.hosts > 0:  # where each worker ran (every incarnation of a slot on the same host)
            from takeover._internal.net.hosts import placement

            data["placement"] = placement(self.workers, self.hosts)
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
            tt = dict(values["task_time"])
            if isinstance(tt.get("samples"), list):
                tt["samples"] = tuple(float(x) for x in tt["samples"])
            values["task_time"] = TaskTime(**tt)
        for name in ("pythonpath", "pause_time_samples"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        if "faults" in values:
            values["faults"] = {k: float(values["faults"].get(k, 0.0)) for k in FAULT_KINDS}
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))

    def command(self) -> str:
        """A shell line that reproduces this run: every value explicit, so profile edits cannot drift it."""
        return command_line(self)

    # -- validation -----------------------------------------------------------------------------
    def validate(self) -> RunConfig:
        """Raise :class:`UsageError` naming the first bad value; return self for chaining.

        Each value's own check comes from its option (:func:`check_values`); the
        checks here relate two values, so they run once each value is known to be sound.
        """
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown:
            raise UsageError(f"unknown fault kind(s) {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        check_values(self)
        db.check(self.db)
        if self.redis_persistence != db.DEFAULT_REDIS_PERSISTENCE and self.db != db.REDIS:
            raise UsageError("redis-persistence: sets how the run's private Redis server keeps its data, so it "
                             "needs --db redis (a server given by URL keeps its own settings)")
        if self.power_loss_rate > 0:
            _check_power_loss(self)
        _check_hosts(self)
        resolved = self.task_time.resolved()
        if resolved is not self.task_time:
            return dataclasses.replace(self, task_time=resolved).validate()
        if self.pause_time_file and not self.pause_time_samples:
            from takeover._internal.task_times import load_task_times, split_spec

            path, column = split_spec(self.pause_time_file)
            where = str(path.absolute()) + (f":{column}" if column else "")
            samples = load_task_times(self.pause_time_file, "pause times").scaled(self.pause_time_scale)
            return dataclasses.replace(self, pause_time_file=where, pause_time_samples=samples).validate()
        if self.clock_jump_rate > 0 and self.clock_jump_max <= 0:
            raise UsageError("clock-jump-rate needs clock-jump-max > 0 (how far a clock may jump, in seconds)")
        if self.heartbeat and self.heartbeat >= self.lease:
            raise UsageError(f"heartbeat ({self.heartbeat}) must be shorter than the lease ({self.lease})")
        if self.tasks == 0 and self.arrival_rate == 0:
            raise UsageError("nothing to do: tasks is 0 and arrival-rate is 0")
        if self.tasks + self.arrival_rate * self.duration > MAX_TASKS:
            raise UsageError(f"tasks + arrival-rate x duration must be at most {MAX_TASKS:,} tasks, got "
                             f"{self.tasks + self.arrival_rate * self.duration:,.0f}")
        tt = self.task_time
        if tt.dist == "pareto" and tt.spread <= 1:
            raise UsageError(f"task-time-spread is the pareto tail index and must be > 1, got {tt.spread}")
        if tt.dist == "uniform" and tt.spread > 1:
            raise UsageError(f"task-time-spread for uniform must be <= 1 (a fraction of the mean), got {tt.spread}")
        return self


_RUN_DEFAULTS = RunConfig()


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


# A profile sets the options a profile may set, spelled as their fields: top-level ones by name, the
# task time and the fault rates in their own tables ([task_time], [faults]).
PROFILE_KEYS = {o.field.partition(".")[0] for o in RUN_OPTIONS if o.profile} | {"description"}


def read_toml(path: Path, what: str, known: set[str]) -> dict[str, Any]:
    """A profile or grid file as a dict; unreadable, malformed or unknown keys are one-line errors."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{what} {str(path)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"{what} {str(path)!r} is not valid TOML: nested too deeply to read") from None
    unknown = set(data) - known
    if unknown:
        raise UsageError(f"{what} {str(path)!r}: unknown key(s) {sorted(unknown)}; known: {', '.join(sorted(known))}")
    return data


def load_profile(name: str) -> RunConfig:
    """Read ``workloads/<name>.toml`` into a RunConfig (not yet validated: overrides come next)."""
    path = profile_path(name)
    data = read_toml(path, "profile", PROFILE_KEYS)
    data.pop("description", None)
    task_time = data.pop("task_time", {})
    faults = data.pop("faults", {})
    settable = {f.name for f in dataclasses.fields(TaskTime)} - {"samples"}  # samples are read from the file
    if not isinstance(task_time, dict) or set(task_time) - settable:
        raise UsageError(f"profile {str(path)!r}: [task_time] takes dist, mean, spread, max, file, scale")
    if not isinstance(faults, dict) or set(faults) - set(FAULT_KINDS):
        raise UsageError(f"profile {str(path)!r}: [faults] takes {', '.join(FAULT_KINDS)}")
    for kind, rate in faults.items():  # float() would take True and "0.5", and crash on "a" or [1]
        if not options.is_number(rate):
            raise UsageError(f"profile {str(path)!r}: [faults] {kind} must be a number, got {rate!r}")
    task_time = {k: BY_FIELD[f"task_time.{k}"].read(v) for k, v in task_time.items()}
    data = {k: BY_FIELD[k].read(v) for k, v in data.items()}
    return RunConfig(
        profile=name,
        task_time=TaskTime(**task_time),
        faults={k: float(faults.get(k, 0.0)) for k in FAULT_KINDS},
        **data,
    )


def profile_defaults() -> dict[str, Any]:
    """Every run option's value in the default profile, by dest: the defaults ``--help`` names."""
    cfg = load_profile(DEFAULT_PROFILE)
    return {o.dest: o.value_in(cfg) for o in RUN_OPTIONS}


def profile_description(name: str) -> str:
    try:
        return str(tomllib.loads(profile_path(name).read_text()).get("description", ""))
    except (OSError, tomllib.TOMLDecodeError, UsageError):
        return ""


def with_overrides(base: RunConfig, overrides: Mapping[str, Any]) -> RunConfig:
    """Apply values keyed by their option's dest (``workers``, ``task_time_mean``, ``kill_rate``); None = not given.

    The option's field says where each value goes: a top-level field, the task time or a fault rate.
    """
    top: dict[str, Any] = {}
    tt: dict[str, Any] = {}
    faults = dict(base.faults)
    for dest, value in overrides.items():
        if value is None:
            continue
        head, _, key = BY_DEST[dest].field.partition(".")
        if head == "task_time":
            tt[key] = value
        elif head == "faults":
            faults[key] = value
        else:
            top[head] = value
    return dataclasses.replace(
        base, task_time=dataclasses.replace(base.task_time, **tt), faults=faults, **top
    )


def _check_power_loss(cfg: RunConfig) -> None:
    """A power loss needs the queue on SQLite files (or a run's own Redis server) and FUSE on this machine;
    say which is missing."""
    if cfg.db not in (db.DEFAULT, db.REDIS) or (cfg.db == db.REDIS and cfg.hosts > 0):
        raise UsageError("power-loss-rate: power losses are for SQLite and --db redis only (the queue's files, or "
                         "the run's own server's, on a FUSE layer)")
    from takeover._internal.powerloss.layer import check_available

    check_available()


def _check_hosts(cfg: RunConfig) -> None:
    check_network(cfg.db, {name: getattr(cfg, name) for name in NET_FIELDS})


def check_network(database: str, values: Mapping[str, Any]) -> None:
    """Network faults need hosts, hosts need a private PostgreSQL server and this machine's means.
    ``database``: the --db value (redacted or not); ``values``: the NET_FIELDS, a missing one at its default."""
    hosts = values.get("hosts") or 0
    if (values.get("db_lost_reply_rate") or 0) > 0 and (database != db.REDIS or hosts > 0):
        raise UsageError("db-lost-reply-rate: a reply lost from the server needs --db redis without --hosts (a relay "
                         "between the workers and the run's own server)")
    if hosts <= 0:
        for name in NET_FIELDS[1:]:
            if database == db.REDIS and name in REDIS_LOCAL_FAULTS:
                continue  # the run's own redis-server, on this machine: crashed, frozen and its clients killed here
            if (values.get(name) or 0) > 0 and db.is_redis_url(database) and name in REDIS_LOCAL_FAULTS:
                raise UsageError(f"{name.replace('_', '-')}: faults of the server need --db redis (a server takeover "
                                 "starts); it never crashes, freezes or ends the connections of a server given by URL")
            if (values.get(name) or 0) > 0:
                raise UsageError(f"{name.replace('_', '-')}: network faults need --hosts N (workers on hosts of "
                                 "their own, reaching the database over the run's network)")
        return
    if database not in (db.POSTGRES, db.REDIS):
        what = "SQLite's WAL needs one machine" if database == db.SQLITE else \
            "the run starts its own server on its network, not on a server given by URL"
        raise UsageError(f"--hosts needs --db postgres or --db redis ({what})")
    from takeover._internal.net.hosts import check_available

    check_available(hosts)


def with_database(cfg: RunConfig, value: str, queue_given: bool) -> RunConfig:
    """``cfg`` on the database ``value`` (--db), recorded without a password; a queue left at the
    profile's default becomes the reference queue of that kind of database."""
    queue = cfg.queue if queue_given or cfg.queue != REFERENCE_QUEUE else reference_queue(value)
    return dataclasses.replace(cfg, db=db.redact(value), queue=queue)


def check_values(cfg: RunConfig) -> None:
    """Each option's own check, in table order; raise :class:`UsageError` naming the first bad value."""
    for o in RUN_OPTIONS:
        value = o.value_in(cfg)
        if o.choices and value not in o.choices:
            raise UsageError(f"{o.name} must be one of {', '.join(o.choices)}, got {value!r}")
        if o.check is not None:
            o.check(o.name, value)


def command_line(cfg: RunConfig) -> str:
    """A shell line that reproduces ``cfg``: every value explicit, so profile edits cannot drift it."""
    return location_prefix(cfg) + options.shell_line(["takeover", *command_argv(cfg)])


def command_argv(cfg: RunConfig) -> list[str]:
    """The reproduce line's arguments after ``takeover`` (``stress ...``), as a list: what a dask worker
    runs for this config (takeover._internal.fanout), the very line a user would."""
    parts = ["stress"]
    for o in RUN_OPTIONS:
        value = o.value_in(cfg)
        if o.reproduce and (o.omit is None or value != o.omit):
            parts += o.argv(value)
    if cfg.db != db.DEFAULT:  # a SQLite run's line stays as it always was
        parts += DB_OPTION.argv(cfg.db)
    return parts


def location_prefix(cfg: RunConfig) -> str:
    """``cd DIR && PYTHONPATH=DIR `` when a fresh shell needs them to import the queue (takeover._internal.locate);
    empty for an installed queue, so those lines stay exactly as they were."""
    prefix = f"cd {shlex.quote(cfg.workdir)} && " if cfg.workdir else ""
    if cfg.pythonpath:
        prefix += f"PYTHONPATH={shlex.quote(':'.join(cfg.pythonpath))} "
    return prefix
