"""Every run option, declared once: its flag, where its value lives, its check, its help, and who takes it.

Why one table: a run option shows up in many places. The ``stress`` parser has it; ``soak`` takes the
same run options and ``sweep`` a few of them; a profile (``workloads/*.toml``) may set it and the
command line overrides the profile; it is checked before anything starts; and the reproduce line
turns a resolved config back into the command that runs it again. Written out by hand, each of those
places is one more edit per new option and one more chance to forget one, and a reproduce line that
silently drops an option no longer reproduces the run. Here every option is one :class:`RunOption`
in :data:`RUN_OPTIONS`, and all of those places are derived from it:

- the parsers: :func:`add_run_options` (``stress`` and ``soak`` take them all; ``sweep`` those with a
  ``sweep_help``, as one value for every run of the grid),
- the profile keys and the overrides on top of a profile: ``takeover._internal.config`` reads the table,
- the per-value checks: :func:`takeover._internal.config.check_values` (``RunConfig.validate`` adds the checks that
  relate two values, such as a heartbeat shorter than the lease),
- the reproduce line: :func:`takeover._internal.config.command_line`,
- the Python API's keywords (``takeover.stress(workers=4)``): :func:`from_keywords` reads each value
  with the option's own :meth:`RunOption.parse`, the parser's ``type``, so the API and the command line
  share defaults, readings and error messages with no parser in between (:data:`STRESS_OPTIONS` is every
  option of ``takeover stress``, the run options and the command's own).

The kind of the table's rows, :class:`RunOption` (how one option is read, taken, checked and written
back), and the checks of one value live in :mod:`takeover._internal.run_option`; the table and all that is derived
from it live here. Adding an option is therefore one entry here plus the code that uses its value (a ``RunConfig``
field, and whatever reads it); tests/unit/test_options.py checks that every derived place has every
option. The vocabulary those options are made of, the fault kinds and the task-time distributions,
is defined here too.

Units: times in seconds. A fault rate is a rate per second of the faulted phase (kills and pauses,
injected by the nemesis) or a probability per task (``slow``) or per action (``lose_reply``), drawn
by the worker itself. 0 means "not requested".
"""

from __future__ import annotations

import argparse
import difflib
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from takeover._internal import db

# What one option is, and the checks of one value (takeover._internal.run_option); named here too, where the table is
# read.
from takeover._internal.run_option import (
    GRID_AXIS,
    GRID_FIXED,
    GRID_OWN,
    MAX_TASKS,
    MIN_MAX_WORKERS,
    WORKERS_PER_CORE,
    RunOption,
    boolean,
    integer,
    max_workers,
    nonneg,
    nonneg_int,
    positive,
    probability,
    task_count,
    worker_count,
)
from takeover._internal.run_option import GridRole as GridRole
from takeover._internal.run_option import is_number as is_number
from takeover.errors import UsageError

DEFAULT_PROFILE = "stress"

# What every --queue takes, in its help: a Python queue, or a program in any language behind the
# JSON-lines protocol (takeover._internal.bridge, docs/reference/protocol.md), quoted since COMMAND has spaces.
QUEUE_FORMS = 'MODULE:ATTR or "exec:COMMAND"'

# Fault kinds, in the order reports list them. Per-second rates for the nemesis' faults,
# probabilities for the faults a worker draws itself.
# The aimed faults (takeover._internal.run.aimed) steer workers into one of the spec's narrow windows each.
AIMED_FAULTS = ("expire_and_return", "stale_return", "claim_stampede", "duplicate_register", "freeze_in_call",
                "stale_heartbeat", "lease_edge", "aim_unreached")
NEMESIS_FAULTS = ("kill", "kill_before_action", "kill_after_action", "kill_during_finish", "pause", *AIMED_FAULTS)
WORKER_FAULTS = ("lose_reply", "slow")
FAULT_KINDS = NEMESIS_FAULTS + WORKER_FAULTS

# How the external service treats a repeated action (takeover._internal.run.ledger): the choices of --remedy.
REMEDIES = ("none", "idempotency-key", "fencing")
REDIS_PERSISTENCE = db.REDIS_PERSISTENCE  # --redis-persistence (takeover._internal.db.redis_server)
DEFAULT_REDIS_PERSISTENCE = db.DEFAULT_REDIS_PERSISTENCE

TASK_DISTS = ("fixed", "uniform", "exponential", "lognormal", "pareto", "empirical")

Command = Literal["stress", "soak", "sweep"]


_FAULT_HELP = {
    "kill": "random SIGKILLs of a worker, per second",
    "kill_before_action": "SIGKILLs aimed at a worker before its action (working), per second",
    "kill_after_action": "SIGKILLs aimed after the action, before finish (the S5 window), per second",
    "kill_during_finish": "SIGKILLs aimed at a worker inside finish, per second",
    "pause": "SIGSTOP/SIGCONT of a lease holder (before, just after, long after its lease), per second",
    "expire_and_return": "aimed: a holder frozen past its lease, then resumed alone to finish before any "
                         "takeover (S2), per second",
    "stale_return": "aimed: a holder frozen past its lease until another took the task over, then resumed to "
                    "finish while the new holder holds it (S3), per second",
    "claim_stampede": "aimed: idle workers held back, then let go at the same instant to race for a claim, "
                      "per second",
    "duplicate_register": "aimed: a pending, running, done or uncertain task registered again (the state dealt "
                          "from a seeded deck), by the coordinator and by several workers at once (producer "
                          "retries), per second",
    "freeze_in_call": "aimed: a worker frozen inside a queue call (finish, claim, extend), before one of its "
                      "statements, until another worker took the task over (or claimed), then resumed, per second",
    "stale_heartbeat": "aimed: a holder frozen past its lease until another took the task over, then resumed "
                       "to heartbeat (extend) before it finishes, while the new holder holds it; only for a "
                       "queue with extend(), whatever --heartbeat is, per second",
    "lease_edge": "aimed: a holder frozen before its finish and resumed alone, so that its finish comes just "
                  "before its lease's end, just after it or up to 0.3 s past it (a side per window, from a "
                  "seeded deck), before any takeover, per second",
    "aim_unreached": "aimed, steered: each window aimed at a model-coverage cell the run has not reached yet "
                     "(a lost reply then a stale return, a stale or never-claimed generation's finish, heartbeat or "
                     "resolve, a holder frozen to its lease's edge), per second",
    "lose_reply": "probability that the service performs an action and never answers",
    "slow": "probability that a task's work outlives its lease",
}

# The order is the order of the parsers' help and of the reproduce line.
RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("--profile", "profile", str,
              f"workload profile in workloads/ ({{profiles}}) or a .toml path (default {DEFAULT_PROFILE})",
              default=DEFAULT_PROFILE, profile=False, grid=GRID_OWN),
    RunOption("--queue", "queue", str, f"the queue under test, {QUEUE_FORMS} (default: the reference queue)",
              sweep_help=f"the queue under test, {QUEUE_FORMS}"),
    RunOption("--workers", "workers", int,
              f"worker processes (at most {WORKERS_PER_CORE} per core, and never less than {MIN_MAX_WORKERS} allowed, "
              "within a quarter of the process limit: a run above it is refused naming this machine's bound)",
              worker_count,
              sweep_help="workers per run"),
    RunOption("--tasks", "tasks", int, f"tasks registered before the run (at most {MAX_TASKS:,})", task_count,
              sweep_help="tasks per run"),
    RunOption("--duration", "duration", float, "seconds of the faulted phase (the drain follows)", positive,
              soak="a soak's segments last --checkpoint seconds, for --minutes in all",
              sweep_help="seconds of each run's faulted phase"),
    RunOption("--lease", "lease", float, "lease length in seconds", positive, grid=GRID_AXIS),
    RunOption("--seed", "seed", int, "seed of every random choice", integer, grid=GRID_OWN),
    RunOption("--swarm", "swarm", bool,
              "swarm testing: draw from --seed which fault kinds are on (each with probability 1/2, at least one) "
              "and a rate for each (log-uniform, 0.25x to 4x the profile's); a rate given explicitly is kept",
              boolean, profile=False,
              sweep_help="each run draws its own fault mix from its seed; the fault-scale axis multiplies it"),
    RunOption("--out", "out", str, "run folder (default runs/<timestamp>, with runs/latest)",
              profile=False, reproduce=False, grid=GRID_OWN),
    RunOption("--remedy", "remedy", str, "how the external service treats repeats", choices=REMEDIES,
              grid=GRID_AXIS),
    RunOption("--heartbeat", "heartbeat", float, "seconds between lease extensions (0 = none)", nonneg,
              grid=GRID_AXIS),
    RunOption("--arrival-rate", "arrival_rate", float, "more tasks per second during the faulted phase", nonneg),
    RunOption("--task-time-dist", "task_time.dist", str, "distribution of a task's local work", choices=TASK_DISTS,
              grid=GRID_AXIS),
    RunOption("--task-time-mean", "task_time.mean", float, "mean local work in seconds", nonneg, grid=GRID_AXIS),
    RunOption("--task-time-spread", "task_time.spread", float,
              "uniform: half-width / mean; lognormal: sigma; pareto: tail index > 1", nonneg, grid=GRID_AXIS),
    RunOption("--task-time-max", "task_time.max", float, "cap on local work in seconds (0 = none)", nonneg,
              grid=GRID_AXIS),
    RunOption("--task-time-file", "task_time.file", str,
              "empirical: observed durations in seconds, resampled (a CSV column as FILE or FILE:COLUMN, a JSON "
              "list, or JSON percentiles p50/p90/p99/max)", metavar="FILE", grid=GRID_AXIS, omit=""),
    RunOption("--task-time-scale", "task_time.scale", float,
              "empirical: divide every duration of --task-time-file by this (a time scale)", positive,
              grid=GRID_AXIS, omit=1.0),
    RunOption("--local-step", "local_step", float, "seconds between the action and finish", nonneg),
    RunOption("--poll", "poll", float, "base poll interval when nothing is claimable", positive),
    RunOption("--client-timeout", "client_timeout", float, "worker's timeout on the external service", positive),
    RunOption("--drain-timeout", "drain_timeout", float,
              "end the drain when no task became terminal for this long (0 = derived); while every worker is "
              "still starting (none has opened the queue yet) the clock stands still, up to 60 s", nonneg),
    *(RunOption(f"--{kind.replace('_', '-')}-rate", f"faults.{kind}", float, _FAULT_HELP[kind],
                nonneg if kind in NEMESIS_FAULTS else probability,
                metavar="PER_S" if kind in NEMESIS_FAULTS else "P", grid=GRID_AXIS)
      for kind in FAULT_KINDS),
    # Clock faults (takeover._internal.run.clock): not fault kinds of the ``faults`` mapping, because a skew is a size
    # rather than a rate; at their defaults (no clock faults) they are left out of the reproduce line and config.json.
    RunOption("--pause-time-file", "pause_time_file", str,
              "pause lengths (GC or VM stalls) in seconds, drawn at random instead of the lease-relative ones: a "
              "CSV column, a JSON list or JSON percentiles, as --task-time-file", metavar="FILE", omit=""),
    RunOption("--pause-time-scale", "pause_time_scale", float, "divide every pause of --pause-time-file by this",
              positive, omit=1.0),
    RunOption("--clock-skew-max", "clock_skew_max", float,
              "each worker incarnation's clock is off by an offset drawn from --seed, uniform in [-max, +max] "
              "seconds (0 = none)", nonneg, sweep_help="clock skew of every worker incarnation, in seconds either way",
              omit=0.0),
    RunOption("--clock-jump-rate", "clock_jump_rate", float,
              "a running worker's clock steps forward or back by up to --clock-jump-max seconds, per second",
              nonneg, sweep_help="clock jumps of a running worker, per second", omit=0.0),
    RunOption("--clock-jump-max", "clock_jump_max", float,
              "largest clock jump in seconds (each drawn uniform in [-max, +max]; default 1)", nonneg,
              sweep_help="largest clock jump in seconds", omit=1.0),
    RunOption("--power-loss-rate", "power_loss_rate", float,
              "power losses per second: the queue's files (SQLite) live on a FUSE layer that drops every write not "
              "yet synced, every process with the queue open is killed, then restarted (needs FUSE)",
              nonneg, profile=False, omit=0.0, sweep_help="power losses per second of every run (needs FUSE)"),
    RunOption("--probe-rate", "probe_rate", float,
              "mid-run snapshot probes per second: a process of its own reads the queue's table (snapshot()) at "
              "seeded instants, and the checker judges each read against what the history had acknowledged before "
              "it (0 = none)", nonneg,
              sweep_help="mid-run snapshot probes per second of every run"),
    # The run's hosts and the network faults (takeover._internal.net): each needs --hosts (the server faults on Redis do
    # not), and --hosts --db postgres or redis, and root.
    RunOption("--hosts", "hosts", int,
              "run the workers on N hosts (network namespaces, placed round-robin) that reach the database over a "
              "network of the run's own; needs --db postgres or --db redis, and root (0 = all on this machine)",
              nonneg_int, profile=False, omit=0,
              sweep_help="hosts of every run (needs --db postgres or --db redis, and root)"),
    RunOption("--partition-rate", "partition_rate", float,
              "partitions per second: one host, a minority or a majority of them (or one host one way: requests "
              "arrive, replies are lost) cut from the database for a drawn time, then healed (needs --hosts)",
              nonneg, profile=False, omit=0.0, sweep_help="partitions per second (needs --hosts)"),
    RunOption("--conn-kill-rate", "conn_kill_rate", float,
              "a drawn worker's database session terminated by the server (pg_terminate_backend, as a pooler or "
              "a failover does; Redis: CLIENT KILL of its connections), per second (needs --hosts, or --db redis)",
              nonneg, profile=False, omit=0.0, sweep_help="connection kills per second (needs --hosts or --db redis)"),
    RunOption("--db-restart-rate", "db_restart_rate", float,
              "database crashes (an immediate stop, no checkpoint; Redis: SIGKILL, then a start that replays its "
              "append-only file) and restarts, per second; every session drops and what was committed must survive "
              "(needs --hosts, or --db redis)", nonneg, profile=False, omit=0.0,
              sweep_help="database restarts per second (needs --hosts or --db redis)"),
    RunOption("--db-pause-rate", "db_pause_rate", float,
              "database freezes per second: the server is stopped (SIGSTOP; PostgreSQL: its whole process group) "
              "for a drawn time, then continued; every client waits at once while leases run out on the workers' "
              "clocks (needs --hosts, or --db redis)", nonneg, profile=False, omit=0.0,
              sweep_help="database freezes per second (needs --hosts or --db redis)"),
    RunOption("--db-lost-reply-rate", "db_lost_reply_rate", float,
              "replies lost from the database per second (--db redis): a drawn worker's connection loses the "
              "server's next answer and is closed, so the command ran and its client (redis-py retries) sends it "
              "again on a new connection", nonneg, profile=False, omit=0.0,
              sweep_help="replies lost from the database per second (--db redis)"),
    RunOption("--redis-persistence", "redis_persistence", str,
              "with --db redis, how the run's server keeps its data: always (an append-only file synced before "
              "every reply), everysec (synced once a second: a power loss can lose the last second of acknowledged "
              "writes) or none (no file: a restart loses every task)", choices=REDIS_PERSISTENCE, profile=False,
              metavar="|".join(REDIS_PERSISTENCE),
              omit=DEFAULT_REDIS_PERSISTENCE, sweep_help="how every run's Redis server keeps its data (--db redis)"),
    RunOption("--net-delay", "net_delay", float,
              "seconds added each way on every host's path to the database, by a proxy (needs --hosts)",
              nonneg, profile=False, omit=0.0, metavar="SECONDS",
              sweep_help="seconds added each way on every host's path (needs --hosts)"),
    RunOption("--net-loss", "net_loss", float,
              "share of packets lost each way on every host's path to the database (needs --hosts)",
              probability, profile=False, omit=0.0, metavar="P",
              sweep_help="share of packets lost each way on every host's path (needs --hosts)"),
)  # fmt: skip


# -- the run's database (takeover._internal.db): taken by every command that runs a queue, not only by the run commands
# ----
def database(name: str, value: Any) -> None:
    db.check(value)


DB_OPTION = RunOption(
    "--db", "db", str,
    "the run's database: sqlite (default: a file in the run folder), postgres (a private PostgreSQL server "
    "started for the command and removed afterwards), redis (a private redis-server likewise, and one per run), "
    "a postgresql:// URL of your own server (a fresh database per run, dropped afterwards) or a "
    "redis://HOST:PORT/N URL (database N of your own server, which must be empty; emptied afterwards); with "
    "postgres or redis the default queue is that database's reference queue",
    database, metavar="sqlite|postgres|redis|URL", profile=False, grid=GRID_FIXED)  # fmt: skip
KEEP_DB_OPTION = RunOption(
    "--keep-db", "keep_db", bool,
    "with a postgresql:// or redis:// URL: keep each run's database instead of dropping (emptying) it (its "
    "name is printed)",
    boolean, default=False, profile=False, reproduce=False)  # fmt: skip
DB_OPTIONS = (DB_OPTION, KEEP_DB_OPTION)


def add_db_options(parser: argparse.ArgumentParser) -> None:
    """``--db`` and ``--keep-db``, as every command that runs a queue takes them (default: sqlite)."""
    for o in DB_OPTIONS:
        add_option(parser, o)


def db_given(args: argparse.Namespace) -> str:
    """The ``--db`` a command was given (sqlite when none), checked: a bad value is one line, exit 2."""
    value = getattr(args, DB_OPTION.dest, None) or db.DEFAULT
    return db.check(value)


# -- the stress command's own options: what it does around the run, not what the run is ---------------------
def duplicate_rate(text: str) -> float:
    """``--max-duplicates-per-1000``'s value; argparse turns the ArgumentTypeError into one line naming the
    option (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


NO_FAULTS_OPTION = RunOption(
    "--no-faults", "no_faults", bool, "set every fault rate and the clock skew to 0", boolean, default=False,
    profile=False, reproduce=False)
RECONCILE_OPTION = RunOption(
    "--reconcile", "reconcile", bool,
    "after the run, resolve uncertain tasks against the service's ledger (see takeover reconcile), before the check",
    boolean, default=False, profile=False, reproduce=False)
# The duplicate gate (takeover._internal.checker.gate), taken by every command that checks a run.
GATE_OPTIONS = (
    RunOption("--fail-on-duplicates", "fail_on_duplicates", bool,
              "exit 1 when a side effect was repeated that the lease and the --remedy promise to prevent (with "
              "--remedy none: two holders at once; fencing: also a stale generation acting; idempotency-key: any "
              "repeat)", boolean, default=False, profile=False, reproduce=False),
    RunOption("--max-duplicates-per-1000", "max_duplicates_per_1000", float,
              "exit 1 when duplicate side effects of any cause exceed N per 1000 tasks", metavar="N",
              profile=False, reproduce=False, text_type=duplicate_rate),
)  # fmt: skip
# Every option of ``takeover stress``, in its parser's order (its queue too, which the API takes apart).
STRESS_OPTIONS = (*RUN_OPTIONS, *DB_OPTIONS, NO_FAULTS_OPTION, RECONCILE_OPTION, *GATE_OPTIONS)


def add_duplicate_gate(parser: argparse.ArgumentParser) -> None:
    """The two options of the duplicate gate, for every command that checks a run."""
    for o in GATE_OPTIONS:
        add_option(parser, o)


def from_keywords(values: Mapping[str, Any], taken: Sequence[RunOption], who: str) -> dict[str, Any]:
    """Options given as Python keywords (``task_time_mean=0.1``) -> every option of ``taken`` by its dest,
    as a parser built from the same options gives them: each value read as :meth:`RunOption.take` reads it
    (the command line's reading and words), the option's default where one is not given (or is None).
    Bad input is one line naming ``who``: an unknown name (with the closest known one), or a value the
    parser would refuse, in its words (``who: argument --workers: invalid int value: 'many'``)."""
    by_dest = {o.dest: o for o in taken}
    for name in values:
        if name not in by_dest:
            close = difflib.get_close_matches(name, by_dest, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f"; known: {', '.join(sorted(by_dest))}"
            raise UsageError(f"{who} got an unknown option {name!r}{hint}")
    out: dict[str, Any] = {}
    for o in taken:
        try:
            value = o.take(values.get(o.dest))
        except argparse.ArgumentTypeError as exc:  # as the parser words it, after the name of what was called
            raise UsageError(f"{who}: argument {o.flag}: {exc}") from None
        out[o.dest] = o.default if value is None else value
    return out


# -- where the runs of a multi-run command go (takeover._internal.fanout)
# ------------------------------------------------
CLUSTER_HELP = ("run the runs on a dask cluster: tcp://HOST:PORT of a dask scheduler you run (dask scheduler, "
                "dask worker ADDRESS), or local:N for N dask worker processes on this machine; each run is the "
                "same takeover stress line in a scratch folder on a worker, its run folder sent back and stored "
                "here (needs the extra: pip install 'takeover[cluster]')")
SHARD_HELP = ("run only shard I of N of the runs (run i goes to shard i mod N + 1), for a CI matrix; "
              "join the shards' folders with takeover merge")


def add_fanout_options(parser: argparse.ArgumentParser, shard: bool = True) -> None:
    """``--cluster ADDRESS`` (and ``--shard I/N``) of sweep, tune, hunt, soak, selftest and bench."""
    parser.add_argument("--cluster", metavar="tcp://HOST:PORT|local:N", type=cluster_address, help=CLUSTER_HELP)
    if shard:
        parser.add_argument("--shard", metavar="I/N", type=shard_spec, help=SHARD_HELP)


CLUSTER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # the addresses dask's schedulers listen on


def cluster_address(text: str) -> str:
    """``tcp://HOST:PORT`` (a port from 1 to 65535) or ``local:N`` (1 <= N <= the workers this machine holds),
    checked before anything starts: ``tcp://127.0.0.1:99999`` waited 10 s for a scheduler that cannot exist,
    and an empty address ran every run here, without a word (issue 34)."""
    from urllib.parse import urlsplit

    want = "tcp://HOST:PORT of a dask scheduler, or local:N"
    if text.startswith("local:"):
        count = text.removeprefix("local:")
        if not count.isdigit() or not 1 <= int(count) <= max_workers():
            raise argparse.ArgumentTypeError(f"local:N needs N from 1 to {max_workers()} (dask worker processes "
                                             f"here), got {text!r}")
        return text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # a port out of 0-65535 or not a number
        raise argparse.ArgumentTypeError(f"must be {want}; {text!r} has a bad port ({exc})") from None
    if parts.scheme not in CLUSTER_SCHEMES or not parts.hostname or port == 0 or parts.path not in ("", "/"):
        raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}")
    return text


def shard_spec(text: str) -> tuple[int, int]:
    """``I/N`` with 1 <= I <= N: argparse turns the ArgumentTypeError into one line naming the option (exit 2)."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"must be I/N with 1 <= I <= N (e.g. 1/4), got {text!r}")
    return i, n


# -- takeover replay's bug report (takeover._internal.replay.issue)
# -------------------------------------------------------
ISSUE_HELP = ("also write a bug report for the library's tracker (markdown: versions, database, the shrunk calls in "
              "the library's own API terms, expected and actual, the command that reproduces it) to FILE "
              "(default: issue.md beside the scenario file)")


def add_issue_option(parser: argparse.ArgumentParser) -> None:
    """``--issue [FILE]``: given alone, the report goes beside the scenario file (``args.issue == ""``)."""
    parser.add_argument("--issue", nargs="?", const="", default=None, metavar="FILE", help=ISSUE_HELP)


BY_DEST: dict[str, RunOption] = {o.dest: o for o in RUN_OPTIONS}

BY_FIELD: dict[str, RunOption] = {o.field: o for o in RUN_OPTIONS}
FAULT_RATES = tuple(o for o in RUN_OPTIONS if o.field.startswith("faults."))
# The run's hosts and the network faults (takeover._internal.net), as one group: tune takes them apart from the rest,
# and config.json has them only when not at their defaults.
NET_FIELDS = ("hosts", "partition_rate", "conn_kill_rate", "db_restart_rate", "db_pause_rate", "db_lost_reply_rate",
              "net_delay", "net_loss")
# The network faults a run on a private Redis server has without hosts (takeover._internal.run.redis_site): the server
# is the run's own on this machine, and its connections are the workers' own.
REDIS_LOCAL_FAULTS = ("conn_kill_rate", "db_restart_rate", "db_pause_rate", "db_lost_reply_rate")
NET_OPTIONS = tuple(BY_FIELD[f] for f in NET_FIELDS)


def taken_by(command: Command) -> tuple[RunOption, ...]:
    """The run options a command's parser has: stress and soak all of them, sweep those with a sweep help."""
    return tuple(o for o in RUN_OPTIONS if command != "sweep" or o.sweep_help)


def add_option(parser: argparse.ArgumentParser, o: RunOption, text: str | None = None) -> None:
    """``o`` on a parser, as the table declares it: a flag (store_true), or a value read by
    :meth:`RunOption.parse`; ``text`` replaces its help."""
    extra: dict[str, Any] = {"choices": o.choices} if o.choices else {}
    if o.is_flag:
        extra = {"action": "store_true"}
    else:
        extra["type"] = o.parse
    if o.metavar:
        extra["metavar"] = o.metavar
    parser.add_argument(o.flag, default=o.default, help=o.help if text is None else text, **extra)


def add_run_options(parser: argparse.ArgumentParser, command: Command, profiles: Sequence[str] = (),
                    profile_values: Mapping[str, Any] | None = None) -> None:
    """Add the run options ``command`` takes. Soak keeps the ones it refuses, hidden, to say why it refuses them.
    ``profile_values`` (by dest: the default profile's values) puts each option's default in its help."""
    for o in taken_by(command):
        if command == "sweep":
            text = o.sweep_help
        elif command == "soak" and o.soak:
            text = argparse.SUPPRESS
        else:
            text = o.help.replace("{profiles}", ", ".join(profiles))
            if profile_values is not None:
                text += default_words(o, profile_values.get(o.dest))
        add_option(parser, o, text)


def add_stress_options(parser: argparse.ArgumentParser, command: Command, profiles: Sequence[str] = (),
                       profile_values: Mapping[str, Any] | None = None) -> None:
    """Every option of ``takeover stress`` (:data:`STRESS_OPTIONS`, in its order): the run options, the
    database, then the flags of the stress command itself. ``takeover soak`` builds its parser with this
    too (``command="soak"``); it checks each segment as it ran, so ``--reconcile`` is kept there only to be
    refused with a reason."""
    add_run_options(parser, command, profiles, profile_values)
    add_db_options(parser)
    add_option(parser, NO_FAULTS_OPTION)
    add_option(parser, RECONCILE_OPTION, None if command == "stress" else argparse.SUPPRESS)
    add_duplicate_gate(parser)


def default_words(o: RunOption, profile_value: Any) -> str:
    """What ``--help`` says of an option's default: the profile's value, named as the profile's (an option
    overrides its profile: ``--profile smoke`` changes the default), or the option's own default. Empty
    where the help already says it, and for a flag (off unless given)."""
    if o.is_flag or "default" in o.help:
        return ""
    if o.overrides and o.profile:
        shown = "not set" if profile_value in (None, "") else o.render(profile_value)
        return f" (default: the profile's; {shown} in {DEFAULT_PROFILE})"
    if o.default is not None:
        return f" (default: {o.render(o.default)})"
    return " (default: none)" if profile_value is None else f" (default: {o.render(profile_value)})"


def given(args: argparse.Namespace, command: Command) -> dict[str, Any]:
    """The values of the overriding options ``command`` takes, by dest; ``None`` where one was not given."""
    return {o.dest: getattr(args, o.dest, None) for o in taken_by(command) if o.overrides}


# -- takeover explore: its budget and where a departure's files go ---------------------------------------------
def _whole(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be a whole number of {low} or more, got {text!r}")
        return value

    return parse


def positive_seconds(text: str) -> float:
    """argparse turns the ArgumentTypeError into one line naming the option (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_explore_options(parser: argparse.ArgumentParser, default_examples: int, default_steps: int,
                        default_timeout: float) -> None:
    """``takeover explore``'s options: the seed, the budget (examples or seconds), the steps per
    example, the per-call deadline, the output folder, an optional example database, --json, --db."""
    parser.add_argument("--queue", metavar="MODULE:ATTR",
                        help=f"the queue to explore, {QUEUE_FORMS} (default: the reference queue of --db)")
    parser.add_argument("--seed", type=_whole(0), default=1, metavar="N",
                        help="every random choice comes from it: the same seed and budget find the same "
                        "shrunk sequence (default 1)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=_whole(1), default=None, metavar="N",
                        help=f"how many random call sequences to try (default {default_examples})")
    budget.add_argument("--seconds", type=positive_seconds, default=None, metavar="SECONDS",
                        help="try sequences until this many seconds have passed (instead of --examples)")
    parser.add_argument("--steps", type=_whole(1), default=default_steps, metavar="N",
                        help=f"calls per sequence at most (default {default_steps})")
    parser.add_argument("--step-timeout", type=positive_seconds, default=default_timeout, metavar="SECONDS",
                        help=f"give each queue call this long (default {default_timeout:g})")
    parser.add_argument("--out", metavar="DIR",
                        help="where a departure's scenario file and pytest file go (default: a new folder "
                        "runs/explore-<time>, made only when the queue departs)")
    parser.add_argument("--example-db", action="store_true",
                        help="keep Hypothesis' example database in --out (hypothesis-db), so the next explore "
                        "tries the last departure first (default: none is kept)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_db_options(parser)


def shell_line(parts: Sequence[str]) -> str:
    """``parts`` as one line a POSIX shell splits back into them: every printed command that reproduces
    something goes through here, so a queue such as ``exec:node queue.js`` stays one word."""
    return " ".join(shlex.quote(p) for p in parts)
