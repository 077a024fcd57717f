"""RunConfig: profiles, overrides, validation before anything starts, and the config.json round trip."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys

import pytest

from takeover._internal.commands import stress
from takeover._internal.config import RunConfig, TaskTime, load_profile, profile_names
from takeover._internal.options import FAULT_KINDS
from takeover.errors import UsageError


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    stress.configure(parser)
    return parser.parse_args(list(argv))


def test_shipped_profiles_are_valid_and_request_every_fault_kind():
    assert {"smoke", "stress"} <= set(profile_names())
    for name in profile_names():
        cfg = load_profile(name).validate()
        assert cfg.profile == name
    # The smoke profile's 4 s leave the two lease-long aimed kinds no window, and it has no steered one
    # (workloads/smoke.toml says so).
    for name, left_out in (("smoke", {"stale_heartbeat", "lease_edge", "aim_unreached"}), ("stress", set())):
        faults = load_profile(name).faults
        assert {kind for kind in FAULT_KINDS if not faults[kind] > 0} == left_out, (name, faults)


def test_default_profile_exercises_every_nemesis_fault_within_its_duration():
    cfg = load_profile("stress")
    for kind in ("kill", "kill_before_action", "kill_after_action", "kill_during_finish", "pause"):
        assert cfg.faults[kind] * cfg.duration >= 3, kind  # stratified plan: about rate*duration of each


def test_options_override_the_profile():
    cfg = stress.resolve(parse("--profile", "smoke", "--workers", "5", "--lease", "2.5", "--kill-rate", "0",
                               "--task-time-dist", "pareto", "--task-time-spread", "1.5", "--seed", "9"))  # fmt: skip
    base = load_profile("smoke")
    assert (cfg.workers, cfg.lease, cfg.seed) == (5, 2.5, 9)
    assert cfg.faults["kill"] == 0 and cfg.faults["pause"] == base.faults["pause"]
    assert cfg.task_time == dataclasses.replace(base.task_time, dist="pareto", spread=1.5)
    none = stress.resolve(parse("--profile", "smoke", "--no-faults"))
    assert set(none.faults.values()) == {0.0}


def test_an_explicit_rate_beside_no_faults_still_counts():
    only_kills = stress.resolve(parse("--profile", "smoke", "--no-faults", "--kill-rate", "1.5"))
    assert only_kills.faults["kill"] == 1.5
    assert {k: v for k, v in only_kills.faults.items() if k != "kill"} == dict.fromkeys(
        (k for k in only_kills.faults if k != "kill"), 0.0)


def test_json_round_trip_and_pinned_keys():
    cfg = dataclasses.replace(load_profile("stress"), seed=42, out="runs/x", remedy="fencing", heartbeat=0.25)
    data = cfg.to_dict()
    for key in ("queue", "seed", "workers", "tasks", "duration", "lease", "profile", "remedy", "heartbeat",
                "faults", "command"):  # fmt: skip
        assert key in data
    assert set(data["faults"]) == set(FAULT_KINDS)
    back = RunConfig.from_json(cfg.to_json())
    assert back == cfg
    assert isinstance(back.task_time, TaskTime)


def test_command_reproduces_the_config():
    cfg = stress.resolve(parse("--profile", "smoke", "--seed", "3", "--lease", "0.75", "--slow-rate", "0.2"))
    argv = shlex.split(cfg.command())
    assert argv[:2] == ["takeover", "stress"]
    again = stress.resolve(parse(*argv[2:]))
    assert again == cfg


def test_the_reproduce_line_is_pinned_byte_for_byte():
    """Stored runs and CI logs hold these lines: the order, the spelling of numbers and the quoting stay."""
    cfg = RunConfig(
        profile="smoke", queue="my pkg.q:Queue's", workers=3, tasks=0, duration=2.5, lease=0.6, seed=-7, out="runs/x",
        remedy="idempotency-key", heartbeat=0.2, arrival_rate=12.0, task_time=TaskTime("pareto", 0.05, 1.6, 1.0),
        local_step=0.04, poll=0.02, client_timeout=0.25, drain_timeout=0.0,
        faults={"kill": 0.5, "pause": 1.0, "lose_reply": 0.2, "slow": 1e-07},  # the kinds not listed are 0
    )  # fmt: skip
    assert cfg.command() == (
        "takeover stress --profile smoke --queue 'my pkg.q:Queue'\"'\"'s' --workers 3 --tasks 0 --duration 2.5 "
        "--lease 0.6 --seed -7 --remedy idempotency-key --heartbeat 0.2 --arrival-rate 12 --task-time-dist pareto "
        "--task-time-mean 0.05 --task-time-spread 1.6 --task-time-max 1 --local-step 0.04 --poll 0.02 "
        "--client-timeout 0.25 --drain-timeout 0 --kill-rate 0.5 --kill-before-action-rate 0 "
        "--kill-after-action-rate 0 --kill-during-finish-rate 0 --pause-rate 1 --expire-and-return-rate 0 "
        "--stale-return-rate 0 --claim-stampede-rate 0 --duplicate-register-rate 0 --freeze-in-call-rate 0 "
        "--stale-heartbeat-rate 0 --lease-edge-rate 0 --aim-unreached-rate 0 --lose-reply-rate 0.2 --slow-rate 1e-07 "
        "--probe-rate 0"
    )
    assert stress.resolve(parse(*shlex.split(cfg.command())[2:])).command() == cfg.command()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lease", "0"], "lease must be a positive number, got 0.0"),
        (["--lease", "nan"], "lease must be a positive number, got nan"),
        (["--workers", "0"], "workers must be a positive integer, got 0"),
        (["--tasks", "-1"], "tasks must be an integer >= 0, got -1"),
        (["--duration", "-3"], "duration must be a positive number, got -3.0"),
        (["--arrival-rate", "-1"], "arrival-rate must be a number >= 0, got -1.0"),
        (["--task-time-mean", "-1"], "task-time-mean must be a number >= 0, got -1.0"),
        (["--local-step", "-1"], "local-step must be a number >= 0, got -1.0"),
        (["--poll", "0"], "poll must be a positive number, got 0.0"),
        (["--drain-timeout", "-1"], "drain-timeout must be a number >= 0, got -1.0"),
        (["--pause-rate", "-1"], "pause-rate must be a number >= 0, got -1.0"),
        (["--slow-rate", "2"], "slow-rate is a probability and must be <= 1, got 2.0"),
        (["--lose-reply-rate", "-1"], "lose-reply-rate must be a number >= 0, got -1.0"),
        (["--task-time-dist", "pareto", "--task-time-spread", "1"],
         "task-time-spread is the pareto tail index and must be > 1, got 1.0"),
        (["--task-time-dist", "uniform", "--task-time-spread", "1.5"],
         "task-time-spread for uniform must be <= 1 (a fraction of the mean), got 1.5"),
        (["--heartbeat", "5", "--lease", "1"], "heartbeat (5.0) must be shorter than the lease (1.0)"),
        (["--tasks", "0", "--arrival-rate", "0"], "nothing to do: tasks is 0 and arrival-rate is 0"),
        (["--profile", "nope"], f"unknown profile 'nope' (known: {', '.join(profile_names())})"),
        (["--client-timeout", "0"], "client-timeout must be a positive number, got 0.0"),
    ],
)  # fmt: skip
def test_validation_names_the_bad_value(argv, message):
    with pytest.raises(UsageError) as caught:
        stress.resolve(parse(*argv))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('remedy = "x"', "remedy must be one of none, idempotency-key, fencing, got 'x'"),
        ("seed = 1.5", "seed must be an integer, got 1.5"),
        ('workers = "a"', "workers must be a positive integer, got 'a'"),
        ('duration = "a"', "duration must be a positive number, got 'a'"),
        ('[task_time]\ndist = "x"', "task-time-dist must be one of fixed, uniform, exponential, lognormal, pareto, "
                                     "empirical, got 'x'"),
    ],
)  # fmt: skip
def test_a_bad_value_in_a_profile_is_named_like_on_the_command_line(tmp_path, line, message):
    profile = tmp_path / "p.toml"
    profile.write_text(line + "\n")
    with pytest.raises(UsageError) as caught:
        stress.resolve(parse("--profile", str(profile)))
    assert str(caught.value) == message


def test_a_bad_profile_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("workers = 2\nwat = 1\n")
    with pytest.raises(UsageError, match="unknown key"):
        load_profile(str(bad))
    broken = tmp_path / "broken.toml"
    broken.write_text("workers = \n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_profile(str(broken))
    faults = tmp_path / "faults.toml"
    faults.write_text("[faults]\nmeteor = 1\n")
    with pytest.raises(UsageError, match=r"\[faults\]"):
        load_profile(str(faults))


@pytest.mark.parametrize("value", ['"a"', "[1]", "true", '"0.5"', "nan"])
def test_a_fault_rate_that_is_not_a_number_is_a_usage_error(tmp_path, value):
    profile = tmp_path / "p.toml"
    profile.write_text(f"[faults]\nkill = {value}\n")
    with pytest.raises(UsageError, match="kill"):
        stress.resolve(parse("--profile", str(profile)))


# -- where the run was started: what a fresh shell needs to run the reproduce line again --------------------
def test_the_reproduce_line_carries_the_working_folder_and_the_import_path():
    """A queue found in the current folder gets ``cd``; one found through another folder ``PYTHONPATH=``;
    the rest of the line is the pinned one, and config.json has the two keys only when they are set."""
    base = RunConfig(profile="smoke", queue="myq:Q", seed=1, out="runs/x")
    here = dataclasses.replace(base, workdir="/home/me/my proj")
    path = dataclasses.replace(base, workdir="/w", pythonpath=("/src/a", "/src/b"))
    assert here.command() == "cd '/home/me/my proj' && " + base.command()
    assert path.command() == "cd /w && PYTHONPATH=/src/a:/src/b " + base.command()
    assert base.command().startswith("takeover stress --profile smoke --queue myq:Q ")
    assert {"workdir", "pythonpath"}.isdisjoint(base.to_dict())
    assert (path.to_dict()["workdir"], path.to_dict()["pythonpath"]) == ("/w", ["/src/a", "/src/b"])
    assert RunConfig.from_json(path.to_json()) == path
    assert RunConfig.from_json(base.to_json()) == base  # a config.json from before the keys existed reads the same


def test_a_queue_in_the_current_folder_is_found_there_and_recorded(tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "myq_in_cwd.py").write_text("from takeover.queues.sqlite_lease import SQLiteLeaseQueue as Q\n")
    elsewhere = tmp_path / "lib"
    elsewhere.mkdir()
    (elsewhere / "myq_on_path.py").write_text("from takeover.queues.sqlite_lease import SQLiteLeaseQueue as Q\n")
    (proj / "p.toml").write_text("workers = 2\n")
    monkeypatch.chdir(proj)
    monkeypatch.setattr(sys, "path", [str(elsewhere), *(p for p in sys.path if p not in ("", str(proj)))])
    cfg = stress.resolve(parse("--queue", "myq_in_cwd:Q"))
    assert (cfg.workdir, cfg.pythonpath) == (str(proj), ())
    assert cfg.command().startswith(f"cd {proj} && takeover stress ")
    other = stress.resolve(parse("--queue", "myq_on_path:Q"))
    assert (other.workdir, other.pythonpath) == (None, (str(elsewhere),))
    assert stress.resolve(parse("--profile", "p.toml")).workdir == str(proj)  # a relative profile path
    installed = stress.resolve(parse("--queue", "takeover.queues.planted:StealsLiveLeases"))
    assert (installed.workdir, installed.pythonpath) == (None, ())
    # the command finds the module in the current folder first, as `python -m` does
    from takeover.contract import load_queue_factory

    assert load_queue_factory("myq_in_cwd:Q").__name__ == "SQLiteLeaseQueue"
    with pytest.raises(UsageError, match=r"not found .*looked in the current folder .* PYTHONPATH$"):
        load_queue_factory("no_such_queue_module_anywhere:Q")
