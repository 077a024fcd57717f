"""Each run option is declared once (takeover._internal.options); every place that needs it is derived from it.

These tests walk the declaration, so an option added there is checked everywhere at once: the
stress, soak and sweep parsers, the profile keys, the overrides on top of a profile, the per-value
checks, the grid's [fixed] table and the reproduce line, which parsed back by the stress parser must
give the same config (a Hypothesis property over configs).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import shlex
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from takeover._internal import options
from takeover._internal.commands import soak, stress, sweep
from takeover._internal.config import (
    DB_FIELDS,
    DERIVED_FIELDS,
    LOCATION_FIELDS,
    PROFILE_KEYS,
    RunConfig,
    TaskTime,
    load_profile,
    profile_names,
    with_overrides,
)
from takeover._internal.options import FAULT_KINDS, GRID_AXIS, GRID_FIXED, GRID_OWN, RUN_OPTIONS, RunOption
from takeover._internal.sweep.grid import FIXED_KEYS
from takeover.cli import main
from takeover.errors import UsageError

BASE = load_profile("smoke").validate()


def parser_for(configure: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    configure(parser)
    return parser


def other_value(o: RunOption, cfg: RunConfig = BASE) -> Any:
    """A valid value for ``o`` that differs from the one ``cfg`` holds, of the option's type."""
    current = o.value_in(cfg)
    if o.is_flag:
        return not current
    if o.choices:
        return next(c for c in o.choices if c != current)
    if o.field == "pause_time_file":  # read when the config is resolved: a real file, by its absolute path
        return str(Path(__file__).resolve().parents[2] / "examples" / "task-times-heavy.json")
    if o.value_type is str:
        return f"{current or 'x'}-other"  # never a leading "-", which argparse would read as an option
    if o.check is options.probability:
        return 0.5 if current != 0.5 else 0.25
    if o.value_type is int:
        return current + 3
    return current + 0.125  # small: a heartbeat of 0 stays shorter than the lease


def test_every_config_value_has_exactly_one_option():
    """A RunConfig field, task-time field or fault kind without an option could not be set or reproduced.

    The location fields are the exception: where the run was started is found out, not chosen, and the
    reproduce line writes it as ``cd`` and ``PYTHONPATH=`` (tests/unit/test_config.py); so are an empirical
    distribution's samples, read from its --task-time-file. So is the run's database: its option is declared
    beside the run options, as every command that runs a queue takes it."""
    fields = {f.name for f in dataclasses.fields(RunConfig)} - {"task_time", "faults", *LOCATION_FIELDS,
                                                                 *DERIVED_FIELDS, *DB_FIELDS}
    assert [o.field for o in options.DB_OPTIONS if o.field in DB_FIELDS] == list(DB_FIELDS)
    fields |= {f"task_time.{f.name}" for f in dataclasses.fields(TaskTime) if f.name != "samples"}
    fields |= {f"faults.{kind}" for kind in FAULT_KINDS}
    declared = [o.field for o in RUN_OPTIONS]
    assert sorted(declared) == sorted(fields)
    assert len({o.flag for o in RUN_OPTIONS}) == len(RUN_OPTIONS)


@pytest.mark.parametrize("o", RUN_OPTIONS, ids=lambda o: o.flag)
def test_stress_and_soak_parsers_take_every_option(o: RunOption):
    value = other_value(o)
    for configure in (stress.configure, soak.configure):
        args = parser_for(configure).parse_args(o.argv(value))
        assert getattr(args, o.dest) == value
    assert _listed(o.flag, "stress")
    assert _listed(o.flag, "soak") == (not o.soak), "soak hides exactly the options it refuses"


def _help(command: str) -> str:
    """``takeover COMMAND --help`` as a user sees it, with argparse's line wrapping undone."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([command, "--help"])
    return " ".join(out.getvalue().split())


def _listed(flag: str, command: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", _help(command)) is not None


SOAK_REFUSED = [o for o in RUN_OPTIONS if o.soak]
OVERRIDING = [o for o in RUN_OPTIONS if o.overrides]
CHECKED = [o for o in RUN_OPTIONS if o.check or o.choices]
# An empty parameter list would turn the tests below into silent skips.
assert SOAK_REFUSED and OVERRIDING and CHECKED


@pytest.mark.parametrize("o", SOAK_REFUSED, ids=lambda o: o.flag)
def test_soak_refuses_the_options_it_decides_itself_with_the_reason(o: RunOption, capsys: pytest.CaptureFixture[str]):
    assert main(["soak", *o.argv(o.value_in(BASE))]) == 2
    assert capsys.readouterr().err.strip() == f"takeover: error: {o.flag} does not apply to takeover soak: {o.soak}"


def test_sweep_takes_its_options_as_one_value_for_every_cell():
    takes = [o for o in RUN_OPTIONS if o.sweep_help]
    assert takes, "sweep takes some run options"
    parser = parser_for(sweep.configure)
    argv = [arg for o in takes for arg in o.argv(other_value(o))]
    grid = sweep.build_grid(parser.parse_args(["--grid", "sweep-tiny", *argv]))
    for o in takes:
        assert grid.fixed[o.field] == other_value(o)
        metavar = "" if o.is_flag else f" {o.metavar or o.flag[2:].upper().replace('-', '_')}"
        assert f"{o.flag}{metavar} {o.sweep_help}" in _help("sweep")
    for o in RUN_OPTIONS:
        if not o.sweep_help and o.grid == GRID_FIXED:  # set in a grid file's [fixed] only
            assert not _listed(o.flag, "sweep")


def test_the_grid_fixed_table_takes_the_options_the_grid_neither_varies_nor_decides():
    fixed = {o.field for o in RUN_OPTIONS if o.grid == GRID_FIXED}
    assert FIXED_KEYS == fixed
    for o in RUN_OPTIONS:
        assert o.grid in (GRID_FIXED, GRID_AXIS, GRID_OWN), o.flag
        if o.grid == GRID_FIXED:
            assert o.dest == o.field, "a [fixed] key is handed to with_overrides as the option's dest"
        if o.sweep_help:
            assert o.grid == GRID_FIXED, "sweep's single values go into the grid's [fixed] values"


# stress.resolve checks that FUSE can mount when power losses are asked for, and that this machine can make
# hosts (root, iptables) when hosts or network faults are: those need --db postgres, and the faults --hosts.
NET_DESTS = ("hosts", "partition_rate", "conn_kill_rate", "db_restart_rate", "net_delay", "net_loss", "db_pause_rate")
# --redis-persistence is a Redis run's own: it needs --db redis (no server is started to resolve it).
REDIS_DESTS = ("redis_persistence", "db_lost_reply_rate")


def _marks(o: RunOption) -> Any:
    if o.dest == "power_loss_rate":
        return pytest.param(o, marks=pytest.mark.needs_package("fuse3"))
    if o.dest in NET_DESTS:
        return pytest.param(o, marks=[pytest.mark.needs_package("iptables", "iproute2"),
                                      pytest.mark.skipif(os.geteuid() != 0, reason="--hosts needs root")])
    return o


@pytest.mark.parametrize("o", [_marks(o) for o in OVERRIDING], ids=lambda o: o.flag)
def test_every_overriding_option_reaches_its_field(o: RunOption):
    value = other_value(o)
    cfg = with_overrides(BASE, {o.dest: value})
    assert o.value_in(cfg) == value
    assert {p.dest for p in RUN_OPTIONS if p.value_in(cfg) != p.value_in(BASE)} == {o.dest}
    assert with_overrides(BASE, {o.dest: None}) == BASE, "None means not given"
    needs = [] if o.dest not in NET_DESTS else ["--db", "postgres", *([] if o.dest == "hosts" else ["--hosts", "1"])]
    if o.dest in REDIS_DESTS:
        needs = ["--db", "redis"]
    resolved = stress.resolve(parser_for(stress.configure).parse_args(["--profile", "smoke", *o.argv(value), *needs]))
    assert o.value_in(resolved) == value


@pytest.mark.parametrize("o", RUN_OPTIONS, ids=lambda o: o.flag)
def test_a_profile_sets_what_it_may(o: RunOption, tmp_path: Path):
    head, _, key = o.field.partition(".")
    value = other_value(o)
    literal = f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else repr(value)
    text = f"[{head}]\n{key} = {literal}\n" if key else f"{head} = {literal}\n"
    path = tmp_path / "p.toml"
    path.write_text(text)
    assert tomllib.loads(text)
    if not o.profile:
        assert head not in PROFILE_KEYS
        with pytest.raises(UsageError, match="unknown key"):
            load_profile(str(path))
        return
    cfg = load_profile(str(path))
    assert o.value_in(cfg) == value and type(o.value_in(cfg)) is o.value_type


def test_a_profile_number_becomes_a_float_where_a_float_is_due(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text("duration = 2\nworkers = 2\n[task_time]\nmean = 1\n")
    cfg = load_profile(str(path))
    assert (type(cfg.duration), type(cfg.workers), type(cfg.task_time.mean)) == (float, int, float)


_BAD = {options.positive: 0, options.nonneg: -1, options.worker_count: 0, options.nonneg_int: -1,
        options.task_count: -1, options.integer: 1.5, options.probability: 2.0, options.boolean: "yes"}  # fmt: skip


@pytest.mark.parametrize("o", CHECKED, ids=lambda o: o.flag)
def test_every_checked_option_is_checked_and_named(o: RunOption):
    bad = "no-such-choice" if o.choices else _BAD[o.check]
    with pytest.raises(UsageError, match=f"^{o.name} "):
        with_overrides(BASE, {o.dest: bad}).validate()


@pytest.mark.parametrize("o", RUN_OPTIONS, ids=lambda o: o.flag)
def test_the_reproduce_line_has_every_option_it_should(o: RunOption):
    cfg = with_overrides(BASE, {o.dest: other_value(o)}) if o.overrides else BASE
    argv = shlex.split(cfg.command())
    assert argv[:2] == ["takeover", "stress"]
    if o.is_flag and o.reproduce:  # written only when set: other_value set it (or cleared it again)
        assert argv.count(o.flag) == int(bool(o.value_in(cfg)))
    elif o.reproduce:
        assert argv.count(o.flag) == 1
        assert argv[argv.index(o.flag) + 1] == o.render(o.value_in(cfg))
    else:
        assert o.flag not in argv


def test_only_the_run_folder_is_left_out_of_the_reproduce_line():
    """A rerun gets a folder of its own; any other value left out would make the line reproduce another run."""
    assert [o.flag for o in RUN_OPTIONS if not o.reproduce] == ["--out"]


@pytest.mark.parametrize(("argv", "words"), [
    (["--workers", "100000"], f"workers must be at most {options.max_workers()} on this machine"),
    (["--tasks", "100000000"], "tasks must be at most 10,000,000, got 100,000,000"),
    (["--tasks", "1000", "--arrival-rate", "1e9"], "tasks + arrival-rate x duration must be at most 10,000,000"),
])
def test_counts_above_what_the_machine_holds_are_one_line(argv: list[str], words: str,
                                                          capsys: pytest.CaptureFixture[str]):
    """issue 34: ``--workers 100000`` was accepted and spawned hundreds of processes before Ctrl-C could stop it."""
    assert main(["stress", *argv, "--out", os.devnull + "/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    with pytest.raises(SystemExit):
        main(["stress", "--help"])
    # The help says the rule; the refusal says this machine's bound (the help is the generated reference page
    # too, which must read the same on every machine).
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(at most {options.WORKERS_PER_CORE} per core" in help_text and "here:" not in help_text


def test_the_worker_bound_follows_the_cores_and_the_process_limit():
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    cores = max(options.MIN_MAX_WORKERS, options.WORKERS_PER_CORE * (os.cpu_count() or 1))
    assert options.max_workers() == (cores if soft == resource.RLIM_INFINITY else min(cores, max(1, soft // 4)))


# -- the round trip: reproduce line -> stress parser -> the same config -------------------------------------------
_VALUES = {
    options.positive: st.floats(min_value=0, exclude_min=True, allow_infinity=False),
    options.nonneg: st.floats(min_value=0, allow_infinity=False) | st.just(0.0),
    options.probability: st.floats(min_value=0, max_value=1),
    options.worker_count: st.integers(1, options.max_workers()),
    options.nonneg_int: st.integers(0, 10**9),
    options.task_count: st.integers(0, options.MAX_TASKS),
    options.integer: st.integers(-(2**63), 2**63),
    options.boolean: st.booleans(),
}
# A queue is MODULE:ATTR, but the line must carry any text a user typed; argparse reads a leading "-" as an option.
_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1).filter(lambda s: not s.startswith("-"))


def _strategy(o: RunOption) -> st.SearchStrategy[Any]:
    if o.field == "profile":
        return st.sampled_from(profile_names())
    if o.field == "pause_time_file":  # a pause file is read: its own test below
        return st.just("")
    if o.field == "task_time.dist":  # an empirical distribution reads a file: its own test below
        return st.sampled_from([c for c in o.choices if c != "empirical"])
    if o.choices:
        return st.sampled_from(o.choices)
    if o.check is None:
        return _TEXT
    return _VALUES[o.check]


@st.composite
def configs(draw: st.DrawFn) -> RunConfig:
    # Hosts and network faults need --db postgres and root, the Redis options --db redis: a drawn config keeps
    # them off (each is reproduced in test_every_overriding_option_reaches_its_field, where the machine allows).
    values = {o.dest: None if o.dest in NET_DESTS + REDIS_DESTS else draw(_strategy(o)) for o in RUN_OPTIONS}
    cfg = with_overrides(load_profile(values.pop("profile")), values)
    tt = cfg.task_time
    if tt.dist == "pareto" and tt.spread <= 1:
        cfg = dataclasses.replace(cfg, task_time=dataclasses.replace(tt, spread=1 + tt.spread + 1e-3))
    if tt.dist == "uniform" and tt.spread > 1:
        cfg = dataclasses.replace(cfg, task_time=dataclasses.replace(tt, spread=1 / tt.spread))
    if cfg.heartbeat >= cfg.lease:
        cfg = dataclasses.replace(cfg, heartbeat=cfg.lease * draw(st.sampled_from([0.0, 0.3])))
    if cfg.tasks == 0 and cfg.arrival_rate == 0:
        cfg = dataclasses.replace(cfg, tasks=1)
    try:
        return cfg.validate()
    except UsageError:
        assume(False)  # a corner the repairs above do not reach (e.g. a spread so large 1/spread is 0)
        raise


_STRESS = parser_for(stress.configure)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_the_reproduce_line_parsed_back_gives_the_same_config(cfg: RunConfig):
    # From an empty folder: --queue also looks in the current folder, so a drawn queue name that happens
    # to be a folder of the checkout (``examples``) would gain a workdir the drawn config does not have.
    argv = shlex.split(cfg.command())
    with tempfile.TemporaryDirectory() as empty, contextlib.chdir(empty):
        again = stress.resolve(_STRESS.parse_args(argv[2:]))
    assert again == dataclasses.replace(cfg, out=None)  # the one value a rerun chooses anew (see above)
    assert again.command() == cfg.command()
    assert RunConfig.from_json(cfg.to_json()) == cfg


def test_an_empirical_run_reads_its_file_once_and_its_reproduce_line_reads_it_again(tmp_path: Path):
    """The durations are read, scaled and kept in the config (config.json says what the workers drew
    from); the reproduce line names the file by its absolute path and the scale, and gives the same config."""
    (tmp_path / "times.csv").write_text("seconds\n2\n4\n30\n")
    args = _STRESS.parse_args(["--profile", "smoke", "--task-time-dist", "empirical", "--task-time-file",
                               "times.csv", "--task-time-scale", "4"])
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        cfg = stress.resolve(args)
    finally:
        os.chdir(cwd)
    tt = cfg.task_time
    assert (tt.samples, tt.mean, tt.max, tt.file) == ((0.5, 1.0, 7.5), 3.0, 7.5, str(tmp_path / "times.csv"))
    again = stress.resolve(_STRESS.parse_args(shlex.split(cfg.command())[2:]))
    assert again == dataclasses.replace(cfg, out=None) and again.command() == cfg.command()
    assert RunConfig.from_json(cfg.to_json()) == cfg
    assert "samples" not in json.loads(BASE.to_json())["task_time"], "other runs' config.json is unchanged"


def test_observed_pause_lengths_are_read_once_scaled_and_kept(tmp_path: Path):
    (tmp_path / "gc.json").write_text('{"p50": 0.2, "p99": 3, "max": 8}')
    args = _STRESS.parse_args(["--profile", "smoke", "--pause-time-file", str(tmp_path / "gc.json"),
                               "--pause-time-scale", "2"])
    cfg = stress.resolve(args)
    assert len(cfg.pause_time_samples) == 1000 and max(cfg.pause_time_samples) == 4.0
    again = stress.resolve(_STRESS.parse_args(shlex.split(cfg.command())[2:]))
    assert again == dataclasses.replace(cfg, out=None)
    assert RunConfig.from_json(cfg.to_json()) == cfg
    assert "pause_time_samples" not in json.loads(BASE.to_json()), "other runs' config.json is unchanged"


@pytest.mark.parametrize("value", ["postgres", "postgresql://me@db.example:5433/postgres"])
def test_the_database_is_written_into_the_reproduce_line_only_when_it_is_not_sqlite(value: str):
    assert "--db" not in shlex.split(BASE.command())
    cfg = dataclasses.replace(BASE, db=value)
    argv = shlex.split(cfg.command())
    assert argv[argv.index("--db") + 1] == value
    again = stress.resolve(parser_for(stress.configure).parse_args(argv[2:]))
    assert again == dataclasses.replace(cfg, queue=again.queue) and again.db == value
    assert again.queue == BASE.queue, "a queue written explicitly stays as written"


def test_every_option_that_takes_a_value_says_its_default_in_help():
    """Issue 36: a user learned the lease and the worker count from the reproduce line, since --help showed no
    defaults. Every command's every option that takes a value now says its default."""
    import argparse

    from takeover.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {a.option_strings[0]}" for name, cmd in sub.choices.items() for a in cmd._actions
               if a.option_strings and a.nargs != 0 and a.help not in (None, argparse.SUPPRESS)
               and "default" not in a.help]
    assert missing == []


def test_a_run_options_default_is_the_profiles_named_as_such():
    from takeover._internal.config import load_profile
    from takeover._internal.options import BY_DEST, DEFAULT_PROFILE

    cfg = load_profile(DEFAULT_PROFILE)
    for dest, command in (("lease", "stress"), ("workers", "stress"), ("workers", "hunt")):
        o = BY_DEST[dest]
        words = f"{o.flag} {o.flag.upper().lstrip('-').replace('-', '_')} {o.help} (default: the profile's; " \
                f"{o.render(o.value_in(cfg))} in {DEFAULT_PROFILE})"
        assert words in _help(command), (command, words)


def test_the_top_level_help_names_every_backend():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(out.getvalue().split())
    assert "SQLite, PostgreSQL, Redis" in text and "exec:COMMAND" in text
    assert "lease-based SQLite task queue" not in text


@pytest.mark.parametrize(("address", "words"), [
    ("tcp://127.0.0.1:99999", "has a bad port (Port out of range 0-65535)"),
    ("", "must be tcp://HOST:PORT of a dask scheduler, or local:N, got ''"),
    ("tcp://127.0.0.1:0", "got 'tcp://127.0.0.1:0'"),
    ("tcp://:8786", "got 'tcp://:8786'"),
    ("127.0.0.1:8786", "got '127.0.0.1:8786'"),
    ("local:0", "local:N needs N from 1 to"),
    (f"local:{options.max_workers() + 1}", "local:N needs N from 1 to"),
])
def test_a_cluster_address_that_cannot_be_is_refused_at_once(address: str, words: str,
                                                             capsys: pytest.CaptureFixture[str]):
    """issue 34: ``--cluster tcp://127.0.0.1:99999`` waited 10 s for a scheduler; ``--cluster ""`` ran locally."""
    started = time.monotonic()
    assert main(["sweep", "--cluster", address, "--out", os.devnull + "/x"]) == 2
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --cluster: " in err and words in err and "Traceback" not in err, err


def test_a_cluster_address_that_can_be_passes():
    assert [options.cluster_address(a) for a in ("tcp://127.0.0.1:8786", "tcp://sched", "local:2")] == \
        ["tcp://127.0.0.1:8786", "tcp://sched", "local:2"]
