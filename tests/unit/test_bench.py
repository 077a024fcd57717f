"""The benchmark's targets and its steady-rate window, without running a benchmark."""

from __future__ import annotations

import json

import pytest

from takeover.benchmarks.targets import TARGETS
from takeover.benchmarks.workers4 import steady_rate

NAMES = ["queue_vs_raw", "workers4_vs_queue4", "workers4_vs_queue4_service", "history_overhead", "full_vs_normal",
         "bridge_vs_native", "check_1m_vs_read", "check_1m_peak_rss_mb"]


def test_targets_are_the_issues():
    assert [t.name for t in TARGETS] == NAMES
    bounds = {t.name: (t.op, t.bound) for t in TARGETS}
    assert bounds["queue_vs_raw"] == (">=", 0.9)
    assert bounds["workers4_vs_queue4"] == (">=", 0.7)
    assert bounds["workers4_vs_queue4_service"] == (">=", 0.8)
    # Out of reach by construction (the side effect alone costs half): printed, but a miss does not fail.
    # The price of synchronous=FULL is the disk's, not takeover's: printed for the README, never failing.
    assert [t.name for t in TARGETS if not t.enforced] == ["workers4_vs_queue4", "full_vs_normal"]
    assert bounds["history_overhead"] == (">=", 0.8)  # issue 37: 0.95 is past one write(2) per record (targets.py)
    assert bounds["check_1m_vs_read"] == ("<=", 2.5)  # issue 37: 2 is below the read path's floor (targets.py)
    assert bounds["bridge_vs_native"] == (">=", 0.5)
    assert bounds["check_1m_peak_rss_mb"] == ("<=", 400.0)


def test_steady_rate_counts_only_the_steady_window(tmp_path):
    """Start-up (until every worker's first claim + warm-up) and the tail are not counted."""
    lines = []
    for p in (1, 2):
        lines.append({"time": 10.0 + p, "process": p, "type": "ok", "f": "claim"})
    # 100 finishes per second from t=10 to t=20: the window is [12.3, faults_stop=18).
    for i in range(1000):
        lines.append({"time": 10.0 + i * 0.01, "process": 1, "type": "ok", "f": "finish"})
    lines.append({"time": 18.0, "process": 0, "type": "info", "f": "run", "value": "faults_stop"})
    hist = tmp_path / "history.jsonl"
    hist.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rate, counted, window = steady_rate(hist, tasks=100_000)
    assert window == pytest.approx(18.0 - 12.3)
    assert counted == pytest.approx(570, abs=2)
    assert rate == pytest.approx(100, rel=0.01)


def _run(seed: int, caught: bool, first: float | None, at_end: bool = False, mode: str = "aimed") -> dict:
    return {"seed": seed, "mode": mode, "exit": 1 if caught else 0, "caught": caught,
            "violated": ["lease_exclusive"] if caught else [], "first_violation_s": first, "at_end": at_end,
            "wall_s": 12.0, "aimed": {}}


def test_detection_figures_and_targets():
    """Caught fraction over every run, median time over the caught ones, targets from issue 12."""
    from takeover.benchmarks.detection import summarise

    b = summarise("X", ("lease_exclusive",), [_run(3, False, None), _run(1, True, 1.0), _run(2, True, 4.0)])
    assert [r["seed"] for r in b["per_run"]] == [1, 2, 3]
    assert (b["runs"], b["caught"], b["caught_fraction"]) == (3, 2, 0.667)
    assert b["median_first_violation_s"] == 2.5
    assert (b["caught_pass"], b["first_pass"], b["time_pass"]) == (False, True, True)
    assert b["time_target"] == "median_first_violation_s" and b["time_target_reason"] == ""
    # Seen only at the end of a run: timed by the run's end, counted as such; the median target
    # cannot apply (first_pass stays the literal verdict), "caught at the end" does, with its reason.
    b = summarise("X", ("no_lost_task",), [_run(1, True, 30.0, at_end=True)])
    assert (b["caught_fraction"], b["median_first_violation_s"], b["at_end"]) == (1.0, 30.0, 1)
    assert (b["caught_pass"], b["first_pass"], b["time_pass"]) == (True, False, True)
    assert b["time_target"] == "at_end" and "final snapshot" in b["time_target_reason"]
    b = summarise("X", ("no_lost_task",), [_run(1, False, None)])
    assert (b["caught_fraction"], b["median_first_violation_s"], b["first_pass"], b["time_pass"]) == (0.0, None, False,
                                                                                                      False)
    # One operation-level invariant among the expected ones: the median target applies.
    b = summarise("X", ("generation_monotonic", "state_matches_history"), [_run(1, True, 30.0, at_end=True)])
    assert (b["time_target"], b["time_pass"]) == ("median_first_violation_s", False)
    # The mid-run snapshot probes date state_matches_history: a bug only it catches has the median target.
    b = summarise("X", ("state_matches_history",), [_run(1, True, 0.8)])
    assert (b["time_target"], b["time_pass"]) == ("median_first_violation_s", True)


def test_detection_model_coverage_is_the_median_over_a_modes_runs():
    """bench.json's ``model_coverage`` per mode (issue 36): the cells of the spec the runs reached, median and
    range; a row without a model (a run from before it) is left out; the table says it in one line."""
    from takeover.benchmarks.detection import _model_coverage
    from takeover.benchmarks.detection_table import footer

    rows = [{"model": {"reached": 80, "possible": 107}}, {"model": {"reached": 90, "possible": 107}},
            {"model": {"reached": 30, "possible": 107}}, {}]
    cov = _model_coverage(rows)
    assert cov == {"runs": 3, "possible": 107, "median_reached": 80, "median_fraction": 0.748,
                   "min_fraction": 0.28, "max_fraction": 0.841}
    assert _model_coverage([{}]) == {"runs": 0}
    fig = _fig()
    fig["model_coverage"] = cov
    assert "model coverage, aimed: median 80 of 107 possible cells (75%; 28% to 84% over 3 runs)" in footer(fig)


def _fig(reference_invalid: bool = False) -> dict:
    from takeover.benchmarks.detection import _gain, summarise

    bugs = {"A": summarise("A", ("x",), [_run(1, True, 1.0), _run(2, True, 2.0)]),
            "B": summarise("B", ("x",), [_run(1, True, 9.0), _run(2, False, None)])}
    bugs["A"]["random_only"] = summarise("A", ("x",), [_run(1, True, 6.0, mode="random"),
                                                      _run(2, False, None, mode="random")])
    bugs["B"]["random_only"] = summarise("B", ("x",), [_run(1, False, None, mode="random"),
                                                      _run(2, False, None, mode="random")])
    ref_bad = [{"seed": 2, "valid": False, "not_holding": {"lease_exclusive": []}, "run_dir": "/tmp/ref-s2"}]
    fig = {"profile": "stress", "seeds": 2, "seconds": 10.0, "jobs": 2, "bugs_per_minute": 4.0, "caught_runs": 3,
           "total_runs": 4, "run_minutes": 0.75,
           "targets": {"caught_fraction": ">= 0.95", "median_first_violation_s": "<= 3"}, "bugs": bugs,
           "random_only": {"caught_runs": 1, "total_runs": 4, "run_minutes": 0.8, "bugs_per_minute": 1.25},
           "reference": {"aimed": {"runs": 2, "valid": 2, "invalid": [], "wall_s": [12.0, 12.0]},
                         "random_only": {"runs": 2, "valid": 1 if reference_invalid else 2,
                                         "invalid": ref_bad if reference_invalid else [], "wall_s": [12.0, 12.0]}}}
    fig["gain"] = _gain(fig)
    return fig


def test_detection_gain_is_aimed_against_random():
    """Caught more often is aimed/random, caught sooner random/aimed; a bug random faults never
    caught has no finite ratio (None in JSON, "inf" in the table), and neither has one neither caught."""
    fig = _fig()
    assert fig["gain"]["bugs"]["A"] == {"caught_fraction": 2.0, "median_first_violation": 4.0}
    assert fig["gain"]["bugs"]["B"] == {"caught_fraction": None, "median_first_violation": None}
    assert fig["gain"]["bugs_per_minute"] == pytest.approx(4.0 / 1.25, abs=0.01)


def test_detection_table_shows_every_bug_with_pass_or_miss(capsys):
    from takeover.benchmarks.detection import table
    from takeover.benchmarks.detection_table import print_detection

    fig = _fig()
    text = table(fig)
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith(("A ", "B "))}
    assert lines["A"].split()[1:5] == ["2/2", "1/2", "2.00x", "1.50"]
    assert "4.00x" in lines["A"] and "PASS" in lines["A"]
    assert lines["B"].split()[1:4] == ["1/2", "0/2", "inf"] and "MISS" in lines["B"]
    assert "aimed: 4.00" in text and "random only: 1.25" in text and "aimed/random 3.20x" in text
    assert "reference queue (random_only): 2/2 VALID" in text
    print_detection(fig)
    out = capsys.readouterr().out
    assert "2/2" in out and "1/2" in out and "9.00 s" in out and "MISS" in out and "inf" in out
    assert "bugs found per minute of run time, aimed: 4.00" in out


def test_detection_names_an_invalid_reference_run_as_a_release_blocker():
    from takeover.benchmarks.detection import table

    text = table(_fig(reference_invalid=True))
    assert "reference queue (random_only): 1/2 VALID, RELEASE BLOCKER: seed 2 /tmp/ref-s2: lease_exclusive" in text


def test_random_mode_sets_every_aimed_fault_to_zero_and_nothing_else():
    """The two modes differ by the aimed faults alone: parsed as takeover stress parses them."""
    from takeover._internal.config import load_profile
    from takeover._internal.options import AIMED_FAULTS, FAULT_KINDS
    from takeover.benchmarks.detection import mode_args

    assert mode_args("aimed") == ()
    args = mode_args("random")
    flags = dict(zip(args[::2], args[1::2], strict=True))
    assert set(flags.values()) == {"0"} and len(flags) == len(AIMED_FAULTS)
    profile = load_profile("stress")
    assert all(profile.faults[k] > 0 for k in AIMED_FAULTS)  # else the comparison compares nothing
    for kind in FAULT_KINDS:
        flag = f"--{kind.replace('_', '-')}-rate"
        assert (flag in flags) == (kind in AIMED_FAULTS), kind


def test_the_diagnosis_line_counts_only_bugs_whose_defect_the_diagnosis_names():
    """The network era's planted bugs have no defect the diagnosis names (their invariants say it): a table of
    them has no diagnosis line to read as "0 of 30", and beside a named one they are not counted."""
    from takeover.benchmarks.detection import summarise
    from takeover.benchmarks.detection_table import footer

    def fig(*names: str) -> dict:
        bugs = {n: summarise(n, ("x",), [_run(1, True, 1.0)]) for n in names}
        return {"bugs": bugs, "bugs_per_minute": 1.0, "caught_runs": len(names), "total_runs": len(names),
                "run_minutes": 1.0}

    assert not [line for line in footer(fig("AdvisoryLockLease", "AsyncCommit")) if line.startswith("diagnosis")]
    lines = [line for line in footer(fig("FinishIgnoresGeneration", "AdvisoryLockLease")) if "diagnosis" in line]
    assert lines == ["diagnosis, aimed: named the planted defect alone in 0 of 1 caught runs, among others in 0 more "
                     "(not alone: FinishIgnoresGeneration 0/1)"]


@pytest.mark.parametrize(("argv", "words"), [
    (["--detection-hosts", "2"], "--detection-hosts adds the network era's bugs to a detection measurement"),
    (["--only", "detection", "--detection-hosts", "-1"], "--detection-hosts must be an integer >= 0, got -1"),
    (["--only", "detection", "--detection-hosts", "2", "--shard", "1/2"], "--detection-hosts is not sharded"),
])  # fmt: skip
def test_detection_hosts_is_refused_in_one_line_before_anything_runs(tmp_path, capsys, argv, words):
    from takeover.cli import main

    assert main(["bench", *argv, "--out", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and not (tmp_path / "b.json").exists()


def test_a_bench_run_keeps_what_it_did_not_measure_from_the_earlier_file(tmp_path):
    """``--only X --out docs/bench.json`` must not throw away the detection figures of an hour-long run, nor
    the other targets' rows; what it measured replaces the earlier figures, by name."""
    import json

    from takeover.benchmarks.bench_file import keep_earlier

    out = tmp_path / "bench.json"
    out.write_text(json.dumps({
        "quick": False, "when": "2026-12-01T10:00:00+0000", "machine": {}, "detection": {"caught": 30},
        "results": [{"name": "bridge_vs_native", "value": 0.29}, {"name": "check_1m_s", "value": 4.0}],
        "measurements": {"bridge_vs_native": {"ratio": 0.29}, "check_1m": {"events": 10**6}}}))
    doc = {"quick": False, "when": "2026-12-02T07:00:00+0000", "machine": {},
           "results": [{"name": "bridge_vs_native", "value": 0.6}],
           "measurements": {"bridge_vs_native": {"ratio": 0.6}}}
    kept = keep_earlier(out, doc)
    assert kept == ["check_1m_s", "check_1m", "detection"]
    assert [r["value"] for r in doc["results"]] == [0.6, 4.0]  # the new row replaces, the other stays
    assert doc["measurements"]["bridge_vs_native"] == {"ratio": 0.6} and doc["detection"] == {"caught": 30}
    assert doc["kept_from"] == {k: "2026-12-01T10:00:00+0000" for k in kept}
    # another database's bench is replaced, not mixed in
    other = {"results": [], "measurements": {}, "db": "postgresql://localhost/x"}
    assert keep_earlier(out, other) == [] and "detection" not in other
    # a file that is not a bench.json is replaced, as before
    out.write_text("not json")
    fresh = {"results": [], "measurements": {}}
    assert keep_earlier(out, fresh) == [] and fresh == {"results": [], "measurements": {}}
