"""Clock faults: the seeded draws (each incarnation's skew, the nemesis' jumps), their path to a worker's
clock over a real phase board, the options, and how the checker attributes the duplicates they cause.

A real run with skewed clocks, whose duplicates must carry the cause ``clock`` while every invariant
holds, is tests/system/test_clock.py; the hand-written histories with known causes are in
tests/quality/cases.py (the ``clock faults`` section) and run through tests/quality/test_duplicate_causes.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import multiprocessing

import pytest

from takeover._internal.config import RunConfig
from takeover._internal.pipeline import check_and_report
from takeover._internal.run.clock import WorkerClock, skew_of
from takeover._internal.run.nemesis import Nemesis
from takeover._internal.run.phases import PhaseBoard
from takeover.errors import UsageError
from tests.quality.cases import CASES


def _board(slots: int) -> PhaseBoard:
    board = PhaseBoard.create(multiprocessing.get_context("spawn"), slots)
    for slot in range(slots):
        board.set_owner(slot, slot + 1, 0)
        board.publish(slot, "idle", 0.0)
    return board


def test_each_incarnations_skew_comes_from_the_seed_and_its_process_within_the_bound():
    skews = [skew_of(7, p, 2.0) for p in range(1, 201)]
    assert skews == [skew_of(7, p, 2.0) for p in range(1, 201)]  # the same run draws the same skews
    assert all(-2.0 <= s <= 2.0 and round(s, 3) == s for s in skews)  # whole milliseconds, within the bound
    assert min(skews) < -1.0 and max(skews) > 1.0  # spread over the range, both ways
    assert len(set(skews)) > 150
    assert skews != [skew_of(8, p, 2.0) for p in range(1, 201)]
    assert skew_of(7, 3, 0.0) == 0.0


def _jumps(seed: int, rate: float, largest: float, seconds: float = 10.0) -> list[tuple[int, float]]:
    """Drive a real Nemesis over a real phase board for ``seconds`` simulated seconds with clock jumps only;
    return each slot's posted jump total after each tick where it changed, as (slot, step)."""
    cfg = RunConfig(workers=3, seed=seed, faults={"kill": 0.0}, clock_jump_rate=rate, clock_jump_max=largest)
    board = _board(cfg.workers)
    nemesis = Nemesis(cfg, board, live_slots=lambda: [0, 2], probe=lambda s: None, release=lambda s: None,
                      kill=lambda s, a, v: "", pause=lambda s, p: None, resume=lambda p: None)  # fmt: skip
    nemesis.start(1000.0)
    seen = [0.0] * cfg.workers
    posted: list[tuple[int, float]] = []
    for step in range(int(seconds * 100)):
        nemesis.tick(1000.0 + step * 0.01)
        for slot in range(cfg.workers):
            total = board.clock_jumps(slot)
            if total != seen[slot]:
                posted.append((slot, round(total - seen[slot], 3)))
                seen[slot] = total
    assert nemesis.tally.clock_jumps == len(posted)
    return posted


def test_the_nemesis_posts_seeded_jumps_at_the_rate_to_live_workers_only():
    posted = _jumps(5, 2.0, 1.5)
    assert len(posted) in (19, 20)  # one per 0.5 s slot (a step drawn as exactly 0 is not posted)
    assert {slot for slot, _ in posted} == {0, 2}  # slot 1 is not live
    assert all(-1.5 <= step <= 1.5 and step != 0 for _, step in posted)
    assert any(step < 0 for _, step in posted) and any(step > 0 for _, step in posted)
    assert posted == _jumps(5, 2.0, 1.5)
    assert posted != _jumps(6, 2.0, 1.5)
    assert _jumps(5, 0.0, 1.5) == []


def test_a_worker_clock_takes_the_jumps_posted_since_it_started_summed_between_two_looks():
    board = _board(2)
    board.post_clock_jump(0, 5.0)  # aimed at an earlier incarnation of the slot: not the next one's
    board.set_owner(0, 7, 0)  # the next incarnation is spawned
    board.post_clock_jump(0, 0.5)  # posted before it first reads its clock: its own
    clock = WorkerClock(0.25, board, 0)
    assert clock.pending() == 0.5 and clock.offset == 0.75
    assert clock.pending() == 0.0
    board.post_clock_jump(0, 1.5)
    board.post_clock_jump(0, -0.5)
    board.post_clock_jump(1, 9.0)  # another slot's
    assert clock.pending() == 1.0 and clock.offset == 1.75
    assert clock.pending() == 0.0
    assert clock.real(clock.offset + 100.0) == 100.0
    import time

    before = time.time()
    assert before + 1.75 <= clock.now() <= time.time() + 1.75


def test_the_options_are_checked_recorded_and_reproduced():
    cfg = RunConfig(clock_skew_max=1.5, clock_jump_rate=0.5, clock_jump_max=2.0).validate()
    data = json.loads(cfg.to_json())
    assert (data["clock_skew_max"], data["clock_jump_rate"], data["clock_jump_max"]) == (1.5, 0.5, 2.0)
    assert "--clock-skew-max 1.5 --clock-jump-rate 0.5 --clock-jump-max 2" in cfg.command()
    assert RunConfig.from_json(cfg.to_json()) == cfg
    # The derived drain timeout waits out the clocks' disagreement: 2 x 1.5 s of skew, and 2.5 jumps of up to
    # 2 s (0.5/s x 20 s over 4 workers), so a dead holder's task whose lease a skewed clock set is not "stuck".
    assert data["drain_timeout_effective"] == RunConfig().effective_drain_timeout + 8.0
    # Without clock faults the keys and flags are left out (runs from before them read the same way).
    plain = RunConfig()
    assert not [k for k in json.loads(plain.to_json()) if k.startswith("clock_")]
    assert "--clock" not in plain.command()
    assert RunConfig.from_json(plain.to_json()) == plain
    with pytest.raises(UsageError, match="clock-jump-rate needs clock-jump-max > 0"):
        dataclasses.replace(cfg, clock_jump_max=0.0).validate()
    with pytest.raises(UsageError, match="clock-skew-max must be a number >= 0"):
        dataclasses.replace(cfg, clock_skew_max=-1.0).validate()


def _summary(name: str, tmp_path) -> tuple[dict, str]:
    """A case checked as ``takeover check`` checks it: its summary.json, and its report.md's text (rendered
    from that summary alone, without the HTML report's figures, which cost seconds)."""
    from takeover.reports import markdown

    folder = CASES[name][0]().write(tmp_path / name)
    check_and_report(folder, out=io.StringIO(), reports=False)
    summary = json.loads((folder / "summary.json").read_text())
    return summary, markdown.render(summary)


def test_a_clock_caused_duplicate_shows_what_the_clocks_hid_and_the_reports_name_it(tmp_path):
    from takeover.summary_types import Summary
    from tests.unit.test_summary_types import mismatches

    s, report = _summary("skewed_taker_takes_over_a_live_lease", tmp_path)
    (ex,) = s["duplicates"]["examples"]
    # By the clocks the lease (until 5) had run out at the takeover (now 5.5); on the real clock 2.5 s were left.
    assert (ex["cause"], ex["older_lease_until"], ex["taken_over_at"], ex["real_lease_left"]) == ("clock", 5.0, 5.5,
                                                                                                    2.5)
    assert s["coverage"]["clock"] == {"skewed": 1, "skew_abs_max": 3.0, "jumps": 0, "jump_abs_max": None}
    assert s["valid"] is True and mismatches(s, Summary) == []
    assert "| clock | 1 | a clock fault lost the earlier holder's lease" in report
    assert "clock faults: 1 worker incarnation(s) with a skewed clock (up to 3 s either way), 0 clock jump(s)" in report


def test_a_run_without_clock_faults_keeps_its_summary_and_report(tmp_path):
    s, report = _summary("paused_holder_acts_before_the_new_holder", tmp_path)
    assert list(s["duplicates"]["by_cause"]) == ["s5", "lost_lease", "other"]
    assert "clock" not in s["coverage"] and "real_lease_left" not in s["duplicates"]["examples"][0]
    assert "| clock |" not in report and "| lost_lease | 1 |" in report


def test_requested_clock_jumps_that_never_happened_are_a_warning(tmp_path):
    folder = CASES["clean_run"][0]().write(tmp_path / "r", config={"clock_jump_rate": 1.0, "clock_jump_max": 1.0})
    check_and_report(folder, out=io.StringIO(), reports=False)
    s = json.loads((folder / "summary.json").read_text())
    assert s["coverage"]["clock"]["jumps"] == 0
    assert "clock jumps were requested (rate 1.0) but no worker's clock jumped" in s["warnings"]
    assert s["duplicates"]["by_cause"] == {"s5": 0, "lost_lease": 0, "other": 0, "clock": 0}


def test_hunt_and_soak_hand_the_clock_options_to_every_run():
    """The hunt resolves each run's config as stress does, with its own seed and swarm mode; the soak's
    parser is stress's (tests/unit/test_options.py), so only the hunt's hand-over is checked here."""
    import argparse

    from takeover._internal.commands import hunt
    from takeover._internal.hunter.hunt import MODES

    parser = argparse.ArgumentParser()
    hunt.configure(parser)
    args = parser.parse_args(["--clock-skew-max", "0.5", "--clock-jump-rate", "0.25", "--clock-jump-max", "2"])
    for i, mode in enumerate(MODES):
        cfg = hunt.options_of(args).run_config(7 + i, mode)
        assert (cfg.clock_skew_max, cfg.clock_jump_rate, cfg.clock_jump_max) == (0.5, 0.25, 2.0), mode
        assert "--clock-skew-max 0.5 --clock-jump-rate 0.25 --clock-jump-max 2" in cfg.command()


def test_a_sweep_row_carries_the_clock_faults_and_their_duplicates(tmp_path):
    """sweep.csv's added columns, from a run folder the sweep checks as it checks every cell's."""
    from takeover._internal.config import TaskTime
    from takeover._internal.sweep.grid import Cell, Distribution, Mode
    from takeover._internal.sweep.metrics import COLUMNS, cell_row

    folder = CASES["skewed_taker_takes_over_a_live_lease"][0]().write(tmp_path / "cell")
    cell = Cell(Distribution("light", TaskTime()), 5.0, 1.0, Mode())
    row = cell_row(cell, RunConfig(lease=5.0, clock_skew_max=3.0), folder, 1.0)
    assert (row["clock_skew_max"], row["clock_jump_rate"], row["dup_clock"], row["dup_lost_lease"]) == (3.0, 0.0, 1, 0)
    assert set(COLUMNS) <= set(row)
