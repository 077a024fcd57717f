"""Faults steered by model coverage (takeover._internal.steering) and the hunt's options.

The choice is a pure function of the cells reached so far: these tests give it coverage by hand and
check which kinds it raises, which it turns on, and that it moves on from cells it already tried.
"""

from __future__ import annotations

import argparse

import pytest

from takeover._internal import coverage_space as cs
from takeover._internal.commands import hunt
from takeover._internal.options import FAULT_KINDS
from takeover._internal.steering import MOST, aimed_cells, steer

EXTS = ("extend",)
STRESS = {"kill": 0.25, "pause": 0.5, "expire_and_return": 0.2, "stale_return": 0.3, "duplicate_register": 0.2,
          "stale_heartbeat": 0.0, "lease_edge": 0.2, "lose_reply": 0.05, "slow": 0.03}  # fmt: skip


def test_an_unreached_cell_turns_on_the_kind_that_aims_at_it_and_leaves_the_others_alone() -> None:
    """Every possible cell reached but a stale holder's heartbeat on a task finished since: stale_heartbeat,
    off, is turned on, and it is the only kind changed (nothing else aims there)."""
    stale_beats = set(cs.expand("extend/done|uncertain/stale/*", EXTS))
    reached = [c for c in cs.possible(EXTS) if c not in stale_beats]
    s = steer(STRESS, reached, EXTS)
    assert set(s.toward) == stale_beats
    assert s.faults["stale_heartbeat"] > 0
    assert "stale_heartbeat" in s.kinds and "pause" not in s.kinds
    changed = {k for k in STRESS if s.faults[k] != STRESS[k]}
    assert changed <= set(s.kinds)
    assert s.kinds == {"stale_heartbeat": 0.25}
    assert "extend/done/stale/none" in s.describe() and "stale_heartbeat on at 0.25" in s.describe()


def test_a_kind_on_already_is_raised_by_its_unreached_cells_at_most_by_MOST() -> None:
    uncertain_again = "register/uncertain/never/none"
    reached = [c for c in cs.possible(EXTS) if c != uncertain_again]
    s = steer(STRESS, reached, EXTS)
    assert s.toward == [uncertain_again]
    assert s.kinds["duplicate_register"] == 2.0 and s.faults["duplicate_register"] == 0.4
    assert "lose_reply" in s.kinds  # its uncertain tasks are what a register of one needs
    everything = steer(STRESS, [], EXTS)
    assert all(f <= MOST for k, f in everything.kinds.items() if STRESS[k] > 0)


def test_the_steering_moves_on_from_cells_already_tried() -> None:
    """Two groups unreached; the group runs were steered toward many times loses its pull to the other."""
    a = set(aimed_cells("stale_heartbeat", EXTS))
    b = set(aimed_cells("lease_edge", EXTS))
    reached = [c for c in cs.possible(EXTS) if c not in a | b]
    first = steer(STRESS, reached, EXTS, top=1)
    tried = dict.fromkeys(first.toward, 5)
    second = steer(STRESS, reached, EXTS, tried=tried, top=1)
    assert set(first.kinds) != set(second.kinds), (first.kinds, second.kinds)
    assert steer(STRESS, reached, EXTS, tried=tried, top=1) == second, "deterministic"


def test_a_queue_without_extend_is_never_steered_to_heartbeats() -> None:
    assert aimed_cells("stale_heartbeat", ()) == []
    s = steer(STRESS, [], ())
    assert all(not c.startswith("extend/") for c in s.toward)


def test_hunt_takes_every_stress_option_task_times_included() -> None:
    parser = argparse.ArgumentParser()
    hunt.configure(parser)
    args = parser.parse_args(["--task-time-dist", "fixed", "--task-time-mean", "0.02", "--local-step", "0.01",
                              "--lease-edge-rate", "1.5", "--lose-reply-rate", "0.3", "--run-seconds", "3"])
    cfg = hunt.options_of(args).run_config(7, "aimed")
    assert (cfg.task_time.dist, cfg.task_time.mean, cfg.local_step) == ("fixed", 0.02, 0.01)
    assert cfg.faults["lease_edge"] == 1.5 and cfg.faults["lose_reply"] == 0.3
    assert (cfg.seed, cfg.duration) == (7, 3.0)
    for kind in FAULT_KINDS:
        assert f"--{kind.replace('_', '-')}-rate" in parser.format_help()


def test_the_library_hunt_takes_what_the_command_takes_and_refuses_bad_input_first(tmp_path) -> None:
    """takeover._internal.hunter.run_hunt is the hunt without a command line: the same run configs from the same
    options, and bad input is one line before any folder exists."""
    import io

    from takeover._internal.hunter import HuntOptions, run_hunt
    from takeover.errors import UsageError

    parser = argparse.ArgumentParser()
    hunt.configure(parser)
    args = parser.parse_args(["--lease", "2", "--kill-rate", "0.5", "--run-seconds", "3", "--seed", "4"])
    opts = HuntOptions(run_options={"lease": 2.0, "kill_rate": 0.5}, seed=4, run_seconds=3.0)
    for mode in ("aimed", "swarm"):
        assert opts.run_config(9, mode).to_dict() == hunt.options_of(args).run_config(9, mode).to_dict()
    out = tmp_path / "hunt"
    bad = [(HuntOptions(run_seconds=0, out=str(out)), "--run-seconds must be a positive number of seconds, got 0"),
           (HuntOptions(budget=1, out=str(out)), "--budget must be a number of seconds at least --run-seconds"),
           (HuntOptions(run_options={"seed": 3}, out=str(out)), "the hunt decides seed itself"),
           (HuntOptions(run_options={"workers": 0}, out=str(out)), "workers must be a positive integer, got 0")]
    for options, message in bad:
        with pytest.raises(UsageError, match=message):
            run_hunt(options, io.StringIO())
    assert not out.exists()
