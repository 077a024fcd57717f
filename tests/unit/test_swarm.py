"""Swarm draws (``--swarm``, takeover._internal.swarm): from the seed alone, different per seed, recorded, reproducible.

In one process: the draw itself, how ``takeover stress``, the soak and the sweep resolve it, and the
reproduce line read back by the stress parser. tests/system/test_hunt.py runs swarm runs for real
and reads their config.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
from pathlib import Path

import pytest

from takeover._internal import stress_run, swarm
from takeover._internal.commands import soak, stress
from takeover._internal.config import RunConfig, load_profile
from takeover._internal.options import FAULT_KINDS, NEMESIS_FAULTS, WORKER_FAULTS
from takeover._internal.soak.driver import segment_config
from takeover._internal.sweep.grid import load_grid
from takeover.cli import main
from takeover.errors import UsageError

SEEDS = range(1, 65)


def _parser(configure) -> argparse.ArgumentParser:  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser(exit_on_error=False)
    configure(parser)
    return parser


def resolve(*argv: str) -> RunConfig:
    return stress.resolve(_parser(stress.configure).parse_args(list(argv)))


def test_the_same_seed_draws_the_same_mix_and_other_seeds_draw_others():
    draws = [resolve("--swarm", "--seed", str(s)).faults for s in SEEDS]
    assert draws == [resolve("--swarm", "--seed", str(s)).faults for s in SEEDS]
    distinct_sets = {frozenset(k for k, v in d.items() if v > 0) for d in draws}
    assert len({tuple(sorted(d.items())) for d in draws}) == len(draws), "every seed its own rates"
    assert len(distinct_sets) >= 20, "different seeds turn different kinds on"


def test_every_kind_is_sometimes_on_and_sometimes_off_never_all_off_and_rates_stay_in_the_span():
    base = load_profile("stress")
    seen_on = {k: 0 for k in FAULT_KINDS}
    for seed in SEEDS:
        cfg = resolve("--swarm", "--seed", str(seed))
        assert cfg.swarm is True
        assert any(v > 0 for v in cfg.faults.values()), f"seed {seed}: a swarm run always has a fault"
        assert set(cfg.faults) == set(FAULT_KINDS)
        for kind, rate in cfg.faults.items():
            if rate == 0:
                continue
            seen_on[kind] += 1
            centre = base.faults[kind] or swarm.centre(dataclasses.replace(base, faults={}), kind)
            low, high = centre / swarm.SPAN, centre * swarm.SPAN
            assert low * 0.995 <= rate <= high * 1.005, (seed, kind, rate)
            if kind in WORKER_FAULTS:
                assert rate <= 1.0
    # Each kind is on with probability 1/2: over 64 seeds it is on at least a few times and off at least a few;
    # the steered kind (aim_unreached) is on in every draw, so every swarm run steers toward its unreached cells.
    for kind, n in seen_on.items():
        if kind in swarm.ALWAYS_ON:
            assert n == len(SEEDS), (kind, n)
        else:
            assert 8 <= n <= len(SEEDS) - 8, (kind, n)


def test_a_kind_the_profile_leaves_at_zero_is_drawn_around_a_default():
    zero = resolve("--no-faults")
    for seed in range(1, 30):
        drawn = swarm.draw(dataclasses.replace(zero, seed=seed))
        for kind, rate in drawn.faults.items():
            default = swarm.DEFAULT_RATE_PER_S if kind in NEMESIS_FAULTS else swarm.DEFAULT_PROBABILITY
            assert rate == 0 or default / swarm.SPAN * 0.995 <= rate <= default * swarm.SPAN * 1.005


def test_a_rate_given_explicitly_is_kept_and_the_other_kinds_draw_as_without_it():
    for seed in range(1, 20):
        free = resolve("--swarm", "--seed", str(seed))
        pinned = resolve("--swarm", "--seed", str(seed), "--pause-rate", "0", "--kill-rate", "2.5")
        assert pinned.faults["pause"] == 0 and pinned.faults["kill"] == 2.5
        others = [k for k in FAULT_KINDS if k not in ("pause", "kill")]
        if any(free.faults[k] for k in others):  # otherwise the free draw turned one on to have a fault
            assert {k: pinned.faults[k] for k in others} == {k: free.faults[k] for k in others}


@pytest.mark.parametrize("profile", ["stress", "smoke"])
def test_the_reproduce_line_gives_the_same_config_and_config_json_records_the_draw(profile: str):
    for seed in range(1, 30):
        cfg = resolve("--profile", profile, "--swarm", "--seed", str(seed))
        argv = shlex.split(cfg.command())
        assert "--swarm" in argv
        assert resolve(*argv[2:]) == cfg
        data = cfg.to_dict()
        assert data["swarm"] is True
        assert data["faults"] == {k: cfg.faults[k] for k in FAULT_KINDS}
        assert RunConfig.from_json(cfg.to_json()) == cfg
    plain = resolve("--profile", profile)
    assert plain.to_dict()["swarm"] is False and "--swarm" not in shlex.split(plain.command())


def test_swarm_and_no_faults_together_are_bad_input(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(UsageError, match="--swarm draws the fault rates and --no-faults"):
        resolve("--swarm", "--no-faults")
    assert main(["stress", "--swarm", "--no-faults", "--out", "/nonexistent/never"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--swarm" in err[0]


def test_each_soak_segment_draws_its_own_mix_and_the_header_prints_the_first():
    args = _parser(soak.configure).parse_args(["--swarm", "--profile", "smoke", "--slow-rate", "0"])
    base, pinned = stress_run.resolve_base(args)
    assert base.swarm and pinned == ("slow",)
    segs = [segment_config(base, i, 30.0, pinned) for i in range(8)]
    assert [s.seed for s in segs] == [base.seed + i for i in range(8)]
    assert len({tuple(sorted(s.faults.items())) for s in segs}) == 8
    assert all(s.swarm and s.faults["slow"] == 0 and s.duration == 30.0 for s in segs)
    assert segs[3] == resolve(*shlex.split(segs[3].command())[2:]), "a segment's line reproduces it"
    lines = soak.header(base, 1.0, 300.0, Path("x"), pinned)
    assert lines[1] == f"seg-0001 runs: {segs[0].command().replace('--duration 30', '--duration 60')}"


def test_a_sweep_repeat_draws_its_mix_and_the_fault_scale_multiplies_it(tmp_path: Path):
    grid = load_grid("sweep-tiny")
    grid.fixed["swarm"] = True
    grid.fault_scales = [0.5, 2.0]
    grid.seeds = 6
    runs = grid.runs()
    configs = {(cell.cell_id, seed): grid.config(cell, seed, tmp_path / "x") for cell, seed in runs}
    cells = {cell.cell_id: cell for cell, _ in runs}
    seeds = sorted({seed for _, seed in runs})
    for (cell_id, _seed), cfg in configs.items():
        cell = cells[cell_id]
        assert cfg.swarm and cfg.lease == cell.lease, "the axis values stay as the grid says"
        assert resolve(*shlex.split(cfg.command())[2:]) == dataclasses.replace(cfg, out=None)
    by_scale = {c.fault_scale: c for c in cells.values()}
    low, high = by_scale[0.5].cell_id, by_scale[2.0].cell_id
    for seed in seeds:
        a, b = configs[(low, seed)].faults, configs[(high, seed)].faults
        for kind in FAULT_KINDS:
            assert (a[kind] > 0) == (b[kind] > 0), "the same seed has the same kinds on in every cell"
            if kind in NEMESIS_FAULTS and a[kind] > 0:
                assert math.isclose(b[kind], 4 * a[kind]), "the scale multiplies the drawn rate"
    mixes = {tuple(sorted(configs[(low, s)].faults.items())) for s in seeds}
    assert len(mixes) == len(seeds), "each repeat draws its own mix"
