"""takeover tune without runs: the search's stopping rule against a fake outcome oracle, the time scale and
its refusals, the driver's phases and budget fed with made-up rows, tuning.json and the report, bad input.

The search is not the thing under test of a real run, so its logic is driven here by an oracle that draws
lease-caused duplicates from a known rate; tests/system/test_tune.py runs the command for real.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from takeover._internal.task_times import parse_task_times
from takeover._internal.tune.driver import Tuning
from takeover._internal.tune.plan import Failures, Plan, default_scale
from takeover._internal.tune.result import tuning_json
from takeover._internal.tune.search import CAPPED, OVER, UNDER, Search, nice_ladder
from takeover.cli import main
from takeover.errors import UsageError
from takeover.reports.tuning import write_tuning_report

REPO = Path(__file__).resolve().parents[2]
LIGHT = REPO / "examples" / "task-times-light.csv"
HEAVY = REPO / "examples" / "task-times-heavy.json"


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


def _drive(search: Search, rate: Any, tasks: int = 250, seed: int = 1, limit: int = 100) -> int:
    """Run the search against an oracle with P(lease-caused duplicate) = rate(value); returns the runs spent."""
    rng = random.Random(seed)
    for runs in range(limit):
        index = search.next()
        if index is None:
            return runs
        search.record(index, _binomial(rng, tasks, rate(search.values[index])), tasks)
    raise AssertionError("the search did not stop")


# -- the search ---------------------------------------------------------------------------------------------
def test_the_ladder_is_round_values_covering_the_range():
    assert nice_ladder(0.15, 1.2) == [0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.2]
    assert nice_ladder(17, 130) == [15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150]
    assert nice_ladder(2, 2) == [2.0]


@pytest.mark.parametrize("seed", range(5))
def test_the_search_stops_resolved_at_the_boundary_in_few_runs(seed: int):
    ladder = nice_ladder(1, 1000)  # 31 values
    boundary = ladder.index(40.0)
    search = Search(ladder, 0.02, cap=1000, start=20)
    runs = _drive(search, lambda v: 0.3 if v < 40 else 0.0, seed=seed)
    assert search.resolved() and search.answer() == 40.0
    assert search.state(boundary) == UNDER and search.state(boundary - 1) == OVER
    assert runs <= 7, "a bisection of 31 values, each decided in one run"
    assert search.next() is None, "resolved means stopped"


def test_runs_go_where_the_bound_is_undecided_and_a_point_that_never_decides_is_given_up_at_the_cap():
    ladder = [10.0, 20.0, 30.0]
    search = Search(ladder, 0.02, cap=1000, start=1)
    runs = _drive(search, lambda v: {10.0: 0.5, 20.0: 0.02, 30.0: 0.0}[v])  # 20 s sits on the target
    assert search.points[1].runs == 4 and search.state(1) == CAPPED  # 4 runs of 250: the cap
    assert search.answer() == 30.0 and search.resolved()
    assert 10.0 not in [ladder[i] for i in search.tried()], "below a capped point there is nothing to find"
    assert runs == 5


def test_nothing_shown_under_on_the_whole_ladder_stops_unresolved():
    search = Search([1.0, 2.0, 4.0, 8.0, 16.0], 0.02, cap=500, start=0)
    runs = _drive(search, lambda v: 0.2)
    assert (search.answer(), search.resolved(), search.next()) == (None, False, None)
    assert search.tried()[-1] == 4 and runs < 5, "it climbs 1, 2, 4 steps to the top, not one by one"


def test_a_good_point_followed_by_a_bad_longer_one_is_not_the_answer():
    """The sweep's closure: a lease is recommended only when every longer lease tried is under too."""
    search = Search([1.0, 2.0, 3.0, 4.0], 0.02, cap=1000)
    search.record(1, 0, 500)
    search.record(2, 60, 500)
    search.record(3, 0, 500)
    assert search.answer() == 4.0 and search.resolved()


def test_the_answer_at_the_first_value_is_resolved():
    search = Search([5.0, 6.0], 0.02, cap=1000, start=1)
    _drive(search, lambda v: 0.0)
    assert (search.answer(), search.resolved()) == (5.0, True)


# -- the plan: time scale, refusals ------------------------------------------------------------------------------
def _plan(times: str = '{"p50": 20, "p90": 30, "p99": 40, "max": 50}', **kw: Any) -> Plan:
    t = parse_task_times(times, "f")
    values: dict[str, Any] = {"spec": str(LIGHT), "times": t, "target": 20.0, "budget_s": 600.0, "scale": 250.0,
                              "scale_derived": True, "latency_s": 0.001, "queue": "q:Q", "has_extend": True}
    values.update(kw)
    return Plan(**values)


def test_the_default_scale_puts_the_median_task_far_above_the_call_latency():
    t = parse_task_times("[10, 20, 30]", "f")
    assert default_scale(t, 0.001) == 120  # 20 s / (160 x 1 ms), two significant digits
    assert default_scale(t, 0.004) == 31


def test_a_time_scale_that_puts_the_tasks_under_the_harness_latency_is_refused_naming_one_that_works():
    with pytest.raises(UsageError) as info:
        _plan(scale=10_000.0).check()
    msg = str(info.value)
    assert msg.startswith("--time-scale 10000 makes the median task 2 ms, under 5x the harness's per-call latency")
    suggested = float(re.search(r"use --time-scale (\S+) or less", msg).group(1))  # type: ignore[union-attr]
    _plan(scale=suggested).check()


def test_a_target_the_budget_cannot_resolve_is_refused_naming_the_budget_that_would():
    with pytest.raises(UsageError) as info:
        _plan(target=1.0, budget_s=120.0).check()
    msg = str(info.value)
    assert "--target 1 per 1000 needs >= 3838 tasks at each lease tried" in msg
    minutes = float(re.search(r"--budget (\d+) would", msg).group(1))  # type: ignore[union-attr]
    _plan(target=1.0, budget_s=60 * minutes).check()


def test_rates_scale_with_k_and_the_crash_caused_duplicates_scale_back():
    plan = _plan(failures=Failures(crash_rate_per_hour=3600.0))
    assert plan.production_kill_rate() == pytest.approx(250 * 6)  # one per worker-second -> K per scaled second
    assert plan.crash_ratio() == 1.0
    rare = _plan(failures=Failures(crash_rate_per_hour=0.5))
    assert rare.kill_rate() > rare.production_kill_rate(), "the runs kill often enough to measure recovery"
    assert rare.crash_ratio() == pytest.approx(rare.production_kill_rate() / rare.kill_rate())


def test_each_run_gets_the_scaled_durations_lease_and_heartbeat(tmp_path: Path):
    plan = _plan()
    grid = plan.grid()
    cfg = grid.config(plan.cell(grid, 40.0, 0.3), 5, tmp_path / "r")
    assert cfg.lease == pytest.approx(0.16) and cfg.heartbeat == pytest.approx(0.048)
    assert cfg.task_time.dist == "empirical" and cfg.task_time.scale == 250.0
    assert max(cfg.task_time.samples) == pytest.approx(53 / 250)  # the light example's longest task, scaled
    assert cfg.faults["kill"] == pytest.approx(plan.kill_rate(), rel=1e-4) and cfg.seed == 5


def test_stalls_run_at_the_production_rate_with_their_lengths_scaled(tmp_path: Path):
    (tmp_path / "gc.json").write_text('{"p50": 0.5, "p99": 5}')
    plan = _plan(failures=Failures(pause_rate_per_hour=60.0, pause_file=str(tmp_path / "gc.json")))
    grid = plan.grid()
    cfg = grid.config(plan.cell(grid, 40.0), 1, tmp_path / "r")
    assert cfg.faults["pause"] == pytest.approx(60 / 3600 * 250 * 6, rel=1e-4)
    assert cfg.pause_time_scale == 250 and max(cfg.pause_time_samples) > 5 / 250 > min(cfg.pause_time_samples)


def test_hosts_go_to_every_run_with_the_network_rates_and_delay_scaled_as_every_rate(tmp_path: Path):
    plan = _plan(db="postgres", net={"hosts": 3, "partition_rate": 0.001, "db_restart_rate": 0.0002,
                                     "net_delay": 2.5, "net_loss": 0.01})
    cfg = plan.grid().config(plan.cell(plan.grid(), 40.0), 1, tmp_path / "r") if os.geteuid() == 0 else None
    runs = plan.network()
    assert runs == {"hosts": 3, "partition_rate": 0.25, "db_restart_rate": 0.05, "net_delay": 0.01, "net_loss": 0.01}
    assert {k: v for k, v in plan.grid().fixed.items() if k in runs} == runs
    if cfg is not None:  # validating a config with hosts needs root (the config checks this machine's means)
        assert (cfg.hosts, cfg.partition_rate, cfg.net_delay, cfg.conn_kill_rate) == (3, 0.25, 0.01, 0.0)
        assert "--hosts 3 --partition-rate 0.25" in cfg.command()


# -- the driver, fed with made-up rows --------------------------------------------------------------------------
def _row(cfg: Any, k: int, tasks: int, valid: bool = True) -> dict[str, Any]:
    return {"valid": valid, "violated": "" if valid else "lease_exclusive", "tasks": tasks, "dup_lost_lease": k,
            "dup_s5": 0, "dup_extra": k, "heartbeat_fraction": cfg.heartbeat / cfg.lease if cfg.heartbeat else 0.0,
            "remedy": cfg.remedy, "wasted_work_s": 0.1, "wasted_attempts_pct": 1.0, "recovery_p50": cfg.lease / 2,
            "recovery_p99": cfg.lease, "run_dir": cfg.out, "seed": cfg.seed}


def _feed(tuning: Tuning, outcome: Any) -> list[tuple[str, float, float, str]]:
    seen = []
    for cell, _seed, cfg in tuning.runs():
        lease = round(cfg.lease * cfg.task_time.scale, 6)
        fraction = cell.mode.heartbeat
        phase = tuning._pending[0].name if tuning._pending else "?"
        seen.append((phase, lease, fraction, cfg.remedy))
        k, valid = outcome(phase, lease, fraction, cfg.task_time.scale)
        tuning.on_row(_row(cfg, k, tuning.plan.tasks_per_run, valid))
    return seen


def test_the_phases_run_in_turn_and_the_recommendation_is_the_heartbeat_lease(tmp_path: Path):
    tuning = Tuning(_plan(), tmp_path)
    seen = _feed(tuning, lambda phase, lease, f, k: (0 if (lease >= 40 or f and f <= 0.5) else 60, True))
    phases = [s[0] for s in seen]
    assert phases == sorted(phases, key=["fixed", "heartbeat", "fraction", "remedies", "scale"].index)
    assert tuning.recommended() == (20.0, 0.5) and tuning.resolved()  # the ladder starts at the median task
    assert [s[3] for s in seen if s[0] == "remedies"] == ["idempotency-key", "fencing"]
    data = tuning_json(tuning, command="takeover tune ...", interrupted=False, elapsed_s=1.0)
    for key in ("lease", "heartbeat", "duplicates_per_1000", "duplicates_per_1000_upper", "recovery_p50",
                "recovery_p99", "time_scale", "runs", "tasks", "resolved", "command"):
        assert key in data
    assert (data["lease"], data["heartbeat"], data["resolved"], data["runs"]) == (20.0, 10.0, True, len(seen))
    assert data["alternatives"]["fixed"]["lease"] == 40.0
    assert data["recovery_p99"] == pytest.approx(20.0)  # the made-up rows' p99 is the lease: back in production s
    assert data["scale_check"]["agrees"] is True
    written = write_tuning_report(tmp_path, data)
    page = (tmp_path / written[1]).read_text()
    assert "data:image/png;base64," in page and not re.search(r"(src|href)=['\"](?!data:)", page)
    assert "recommended lease: 20 s, heartbeat every 10 s" in (tmp_path / written[0]).read_text()


def test_progress_lines_are_in_production_seconds_and_say_which_duplicates_they_count(tmp_path: Path):
    """As the answer is: the lease in the user's seconds (40 s, not the run's 0.16), the lease-caused
    duplicates the Evidence table counts with all causes beside, labelled, and "capped" explained."""
    tuning = Tuning(_plan(), tmp_path)
    lines = []
    for cell, _seed, cfg in tuning.runs():
        lease, fraction = round(cfg.lease * cfg.task_time.scale, 6), cell.mode.heartbeat
        k = 0 if lease >= 40 or (fraction and fraction <= 0.5) else 6 if lease == 30 else 60  # 30 s: at the target
        row = {**_row(cfg, k, tuning.plan.tasks_per_run), "dup_extra": k + 2}  # two crash-caused besides
        tuning.on_row(row)
        lines.append((lease, fraction, k, tuning.progress_line(row)))
    assert {round(f, 1) for _, f, _, _ in lines} >= {0.0, 0.3, 0.5}
    for lease, fraction, k, line in lines:
        assert f"lease {lease:g} s" in line and f"lease {lease / 250:g}" not in line, line
        assert f"lease-caused duplicates {k} of 300 tasks" in line and f"all causes {k + 2}" in line, line
        assert f"recovery p99 {lease:.3g} s" in line, line  # the made-up p99 is the run's lease: scaled back
        if fraction:
            assert f"heartbeat every {lease * fraction:.3g} s ({fraction:g} lease)" in line, line
    capped = [line for lease, _, _, line in lines if lease == 30 and ": capped" in line]
    assert capped and "capped (undecided at the cap of 600 tasks a point may use: counted as not under)" in capped[-1]


def _unresolved_fixed_beside_a_resolved_heartbeat(tmp_path: Path) -> dict[str, Any]:
    """The issue's tuning: the heartbeat answer resolved at the bottom of its ladder, at 0.7; the fixed-lease
    search out of its share of the budget before it resolved."""
    tuning = Tuning(_plan(), tmp_path)
    _feed(tuning, lambda phase, lease, f, k: (0 if (lease >= 40 or f) else 60, True))
    data = tuning_json(tuning, command="c", interrupted=False, elapsed_s=1.0)
    assert data["heartbeat_fraction"] == 0.7 and data["searches"]["heartbeat"]["resolved"]
    data["searches"]["fixed"].update(resolved=False, stopped="budget")
    data["alternatives"]["fixed"]["resolved"] = False
    data["resolved"] = False  # as tuning.resolved() says when the fixed search is not
    return data


def test_not_resolved_names_the_search_that_did_not_finish(tmp_path: Path):
    from takeover.reports.tuning import headline, render_markdown

    data = _unresolved_fixed_beside_a_resolved_heartbeat(tmp_path)
    first = headline(data)[0]
    assert "a shorter lease may do" not in first
    assert ("the lease-with-heartbeat search this rests on is resolved; NOT RESOLVED overall: the fixed-lease "
            "alternative's search ran out of its share of the budget") in first
    md = render_markdown(data)
    alt = next(x for x in md.splitlines() if x.startswith("- lease with heartbeat:"))
    assert f"heartbeat every {data['heartbeat']:g} s (0.7 lease)" in alt and "0.3" not in alt
    fixed = next(x for x in md.splitlines() if x.startswith("- fixed lease:"))
    assert fixed.endswith("(not resolved: its search ran out of its share of the budget; a shorter lease may do)")
    data["searches"]["heartbeat"]["resolved"] = False
    assert "a shorter lease with this heartbeat may do" in headline(data)[0]


def test_the_report_explains_capped_lease_caused_and_the_wasted_work(tmp_path: Path):
    from takeover.reports.tuning import render_markdown

    data = _unresolved_fixed_beside_a_resolved_heartbeat(tmp_path)
    data["wasted_work"] = {"attempts_pct": 2.28, "seconds_per_1000_tasks": 0.0}
    md = render_markdown(data)
    assert ("2.28 % of attempts were not finished (killed or taken over); the attempts among them that had reached "
            "their action threw away 0 s of work per 1000 tasks") in md
    assert "capped = still undecided at the most tasks a point may use" in md
    assert "lease-caused = duplicates because a live holder outlived its lease" in md


def test_without_extend_only_the_fixed_lease_is_searched_and_the_heartbeat_is_null(tmp_path: Path):
    tuning = Tuning(_plan(has_extend=False), tmp_path)
    seen = _feed(tuning, lambda phase, lease, f, k: (0 if lease >= 40 else 60, True))
    assert {s[0] for s in seen} == {"fixed", "remedies", "scale"} and all(s[2] == 0 for s in seen)
    data = tuning_json(tuning, command="c", interrupted=False, elapsed_s=1.0)
    assert (data["lease"], data["heartbeat"], data["resolved"]) == (40.0, None, True)


def test_the_scale_check_warns_when_half_the_scale_passes_a_shorter_lease(tmp_path: Path):
    """At K the harness's stalls (K times longer in production units) fail 30 s; at K/2 it passes."""
    tuning = Tuning(_plan(has_extend=False), tmp_path)
    seen = _feed(tuning, lambda phase, lease, f, k: (0 if lease >= 40 or (lease >= 30 and k < 250) else 60, True))
    assert [(s[1], s[0]) for s in seen if s[0] == "scale"] == [(40.0, "scale"), (30.0, "scale")]
    check = tuning_json(tuning, command="c", interrupted=False, elapsed_s=1.0)["scale_check"]
    assert (check["time_scale"], check["agrees"], check["moves_to"]) == (125.0, False, 30.0)
    assert [p["agrees"] for p in check["points"]] == [True, False]


def test_a_violation_ends_the_tuning_with_no_recommendation(tmp_path: Path):
    tuning = Tuning(_plan(), tmp_path)
    seen = _feed(tuning, lambda phase, lease, f, k: (0, False))
    assert len(seen) == 1
    data = tuning_json(tuning, command="c", interrupted=False, elapsed_s=1.0)
    assert (data["lease"], data["heartbeat"], data["resolved"]) == (None, None, False)
    assert data["violations"][0]["violated"] == "lease_exclusive"


def test_the_budget_stops_the_search_unresolved(tmp_path: Path):
    tuning = Tuning(_plan(budget_s=0.0), tmp_path)
    assert _feed(tuning, lambda *a: (0, True)) == []
    assert tuning.phases["fixed"].stopped == "budget" and not tuning.resolved()
    tuning = Tuning(dataclasses.replace(_plan(), budget_s=1e9), tmp_path)
    tuning._walls = [1e9]  # the last run took the whole budget: no next one fits
    assert _feed(tuning, lambda *a: (0, True)) == []


# -- bad input on the command line ------------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "extra", "message"), [
    ("", [], "is empty"),
    ("seconds\n1\nfast\n", [], "line 3 is not a number: 'fast'"),
    ("[1, -3]", [], "item 2 is negative"),
    ("[20, 30, 40]", ["--target", "-1"], "--target must be a number >= 0"),
    ("[20, 30, 40]", ["--target", "0.5", "--budget", "2"], "would"),
    ("[20, 30, 40]", ["--time-scale", "100000"], "under 5x the harness's per-call latency"),
    ("[20, 30, 40]", ["--time-scale", "0"], "--time-scale must be a positive number"),
    ("[20, 30, 40]", ["--lost-reply-rate", "2"], "--lost-reply-rate is a probability"),
    ("[20, 30, 40]", ["--pause-rate-per-hour", "2", "--pause-p50", "1"], "needs the stalls' length"),
    ("[20, 30, 40]", ["--pause-p99", "1"], "need --pause-rate-per-hour"),
    ("[20, 30, 40]", ["--pause-rate-per-hour", "2", "--pause-p50", "3", "--pause-p99", "1"],
     "percentiles must not decrease: p50 = 3 s but p99 = 1 s"),
    ("[20, 30, 40]", ["--hosts", "2"], "--hosts needs --db postgres or --db redis (SQLite's WAL needs one machine)"),
    ("[20, 30, 40]", ["--partition-rate", "0.1"], "partition-rate: network faults need --hosts N"),
    ("[20, 30, 40]", ["--hosts", "-1"], "hosts must be an integer >= 0"),
    ("[20, 30, 40]", ["--db", "postgres", "--hosts", "2", "--net-loss", "2"], "net-loss is a probability"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                          extra: list[str], message: str):
    path = tmp_path / ("t.json" if content.startswith("[") else "t.csv")
    path.write_text(content)
    code = main(["tune", "--task-times", str(path), "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists(), "nothing started"


def test_the_examples_are_light_and_heavy_tailed():
    from takeover._internal.task_times import load_task_times

    light, heavy = load_task_times(str(LIGHT)), load_task_times(str(HEAVY))
    assert 1.7 < light.p99 / light.p50 < 2.3 and light.source == "samples"
    assert 17 < heavy.p99 / heavy.p50 < 23 and heavy.source == "summary"
    assert json.loads(HEAVY.read_text())["max"] == heavy.max


def test_bullmq_and_bee_queue_get_the_recommendation_in_their_own_setting_names() -> None:
    """The Node adapters (exec:) are known by their file: BullMQ's lockDuration, stalledInterval (the ratio the
    adapter was given), lockRenewTime, maxStalledCount; Bee-Queue's stallInterval and its stall check."""
    from takeover._internal.tune.result import library_settings

    bull = library_settings("exec:node adapters/js/bullmq.js", 95.3, None)
    assert bull and bull[0] == ("new Worker(name, processor, { lockDuration: 95300, stalledInterval: 95300, "
                                "maxStalledCount: 1 })")  # fmt: skip
    assert "285.9 s" in bull[2] and bull[3].startswith("maxStalledCount: 1 fails a job that stalls 2 times")
    raised = library_settings("exec:node /x/adapters/js/bullmq.js --max-stalled-count 100 --stalled-interval 5000 "
                              "--lock-duration 30000", 95.3, 30.0)  # fmt: skip
    assert raised and "stalledInterval: 15883, maxStalledCount: 100" in raised[0]
    assert raised[1].startswith("lockRenewTime: 30000") and len(raised) == 3
    bee = library_settings("exec:node adapters/js/beequeue.js", 95.3, 30.0)
    assert bee and bee[0].startswith("new Queue(name, { stallInterval: 95300 })")
    assert "waits for a worker to start" in bee[1] and "47.65 s" in bee[2]
    checked = library_settings("exec:node adapters/js/beequeue.js --check-stalled", 95.3, None)
    assert checked and checked[1].startswith("queue.checkStalledJobs(95300) on every worker") and len(checked) == 2
    assert library_settings("exec:node adapters/js/bullmq.js", None, None) is None


def test_the_recommendation_is_also_given_in_the_librarys_own_settings(tmp_path: Path):
    """An adapter's optional ``library_settings(lease, heartbeat)`` turns the answer into the library's words
    (RQ's job_monitoring_interval, Celery's visibility_timeout); a queue without it gets none."""
    import importlib.util

    from takeover._internal.tune.result import library_settings
    from takeover.reports.tuning import headline

    assert library_settings("takeover.queues.reference:ReferenceQueue", 90.0, None) is None
    assert library_settings("exec:node adapters/js/reference.js", 90.0, None) is None
    assert library_settings("takeover.queues.reference:ReferenceQueue", None, None) is None
    if importlib.util.find_spec("saq") is not None:  # SAQ's words: the job's timeout or heartbeat, the sweep's timer
        saq = library_settings("takeover.adapters.saq:SAQRetryAdapter", 95.3, None)
        assert saq and saq[0].startswith("queue.enqueue(..., timeout=96, retries=N)") and "'sweep': 48" in saq[-1]
        beat = library_settings("takeover.adapters.saq:SAQHeartbeatAdapter", 95.3, 30.0)
        assert beat and "heartbeat=96" in beat[0] and "update() every 30 s" in beat[1]
    # arq's adapter runs in its own environment (exec:): takeover knows it by the adapter's file name
    arq = library_settings("exec:.venv-arq/bin/python adapters/py/arq_adapter.py --job-timeout 20", 95.7, None)
    assert arq and arq[0].startswith("Worker(job_timeout=85)") and "in-progress key of 95 s" in arq[0]
    short = library_settings("exec:.venv-arq/bin/python adapters/py/arq_adapter.py", 10.5, None)
    assert short and "at least 11 s" in short[0]
    with_heartbeat = library_settings("exec:/x/.venv-arq/bin/python /x/adapters/py/arq_adapter.py", 95.7, 30.0)
    assert with_heartbeat and "no heartbeat" in with_heartbeat[-1]
    if importlib.util.find_spec("rq") is None:
        pytest.skip("rq is an optional extra: pip install '.[rq]'")
    rq = library_settings("takeover.adapters.rq:RQRetryAdapter", 95.3, None)
    assert rq and rq[0].startswith("Worker(job_monitoring_interval=36)") and "TTL of 96 s" in rq[0]
    assert "at least 61 s" in library_settings("takeover.adapters.rq:RQAdapter", 12.0, None)[0]  # type: ignore[index]
    data = _unresolved_fixed_beside_a_resolved_heartbeat(tmp_path)
    data["library_settings"] = rq
    assert f"  in the library's settings: {rq[0]}" in headline(data)
