"""The bench's arithmetic: alternating turns, the median of their ratios, its spread, and when it may judge.

Deterministic fake turns (each returns the rate it is given): this tests the statistics and the verdict
rules, not the machine, so nothing here is timed.
"""

from __future__ import annotations

import json
import time

import pytest

from takeover.benchmarks.others_cpu import cpu_text
from takeover.benchmarks.suite_log import parse
from takeover.benchmarks.targets import TARGETS, evaluate, quieter
from takeover.benchmarks.timing import CPU, MISS, NOISY, PASS, Spread, Timed, Turns, quartiles, verdict
from takeover.errors import UsageError


def _turns(rates: list[float], log: list[str], name: str):
    it = iter(rates)

    def turn() -> Timed:
        log.append(name)
        return Timed(next(it))

    return turn


def test_turns_alternate_the_order_every_round_and_take_the_median_of_the_rounds_ratios():
    log: list[str] = []
    # one warm-up each (untimed), then 5 rounds; the candidate's rate over the baseline's, per round
    cand = _turns([1.0, 90, 80, 100, 50, 95], log, "A")
    base = _turns([1.0, 100, 100, 100, 100, 100], log, "B")
    turns = Turns().run(cand, base, 5)
    assert log[2:] == ["B", "A", "A", "B", "B", "A", "A", "B", "B", "A"]  # flipped each round
    assert turns.ratios.values == (0.9, 0.8, 1.0, 0.5, 0.95)
    fig = turns.figures("x", "a_per_s", "b_per_s")
    assert fig["x"] == 0.9 and fig["a_per_s"] == 90 and fig["b_per_s"] == 100
    assert fig["x_iqr"] == [0.8, 0.95] and fig["x_range"] == [0.5, 1.0] and fig["x_rounds"] == 5
    assert fig["x_spread"] == pytest.approx(0.5 / 0.9)  # the rates' own (max - min) / median, as before
    assert set(fig["load_avg"]) == {"min", "median", "max"} and fig["when"]
    # a second repetition (fresh databases) adds rounds and keeps alternating where the first stopped
    log.clear()
    turns.run(_turns([1.0, 70], log, "A"), _turns([1.0, 100], log, "B"), 1)
    assert log == ["A", "B", "A", "B"] and len(turns.ratios.values) == 6


def _busy(cpu_s: float) -> None:
    end = time.process_time() + cpu_s
    while time.process_time() < end:
        pass


def test_turns_timed_by_cpu_time_leave_out_what_the_process_waited_for():
    # The candidate computes 20 ms; the baseline computes 10 ms and waits 50 ms (as a loop waits for the disk's
    # fsync, or for a core): by CPU time the candidate is half as fast, whatever the machine's load.
    def cand() -> int:
        _busy(0.02)
        return 100

    def base() -> int:
        _busy(0.01)
        time.sleep(0.05)
        return 100

    fig = Turns(CPU).run(cand, base, 3, warmups=0).figures("x", "c_per_s", "b_per_s")
    assert 0.35 < fig["x"] < 0.65 and fig["x_clock"] == CPU and fig["x_rounds"] == 3
    assert fig["x_wall"] > fig["x"]  # by the wall clock the baseline's wait counts
    assert fig["b_per_s"] < fig["b_per_cpu_s"] / 3  # the rates per second stay the wall clock's
    assert "x_clock" not in Turns().run(cand, base, 1, warmups=0).figures("x", "c_per_s", "b_per_s")


def test_a_ratio_of_times_is_the_inverse_of_the_rates():
    turns = Turns().run(_turns([0, 1.0, 2.0], [], "check"), _turns([0, 2.0, 2.0], [], "read"), 2)
    fig = turns.figures("time_ratio", "c", "r", inverse=True)
    assert fig["time_ratio"] == 1.5 and fig["time_ratio_range"] == [1.0, 2.0]


def test_quartiles_of_one_two_and_many_values():
    assert quartiles([0.7]) == (0.7, 0.7)
    assert quartiles([1.0, 2.0]) == (1.25, 1.75)
    assert quartiles([1, 2, 3, 4, 5]) == (2, 4)
    assert Spread((3.0, 1.0, 2.0)).median == 2.0 and Spread((3.0, 1.0, 2.0)).range == (1.0, 3.0)


@pytest.mark.parametrize(("op", "iqr", "expected"), [
    (">=", [0.91, 0.95], PASS), (">=", [0.9, 0.95], PASS), (">=", [0.85, 0.89], MISS), (">=", [0.85, 0.92], NOISY),
    ("<=", [1.5, 1.9], PASS), ("<=", [1.5, 2.0], PASS), ("<=", [2.1, 2.5], MISS), ("<=", [1.8, 2.2], NOISY),
])  # fmt: skip
def test_a_verdict_only_when_the_whole_iqr_is_on_one_side(op, iqr, expected):
    bound = 0.9 if op == ">=" else 2.0
    assert verdict(op, bound, iqr) == expected


def test_the_bench_fails_only_a_miss_and_says_how_to_quieten_a_noisy_figure():
    figures = {"queue_vs_raw": {"queue_vs_raw": 0.92, "queue_pairs_per_s": 1, "raw_pairs_per_s": 1,
                                "queue_vs_raw_iqr": [0.85, 0.97], "queue_vs_raw_range": [0.7, 1.0],
                                "queue_vs_raw_rounds": 20, "when": "w", "load_avg": {"min": 3, "median": 4, "max": 5}},
               "history_overhead": {"history_overhead": 0.5, "recorded_pairs_per_s": 1, "bare_pairs_per_s": 2,
                                    "history_overhead_iqr": [0.45, 0.55]}}  # fmt: skip
    rows = {r["name"]: r for r in evaluate(figures)}
    assert rows["queue_vs_raw"]["verdict"] == NOISY and rows["queue_vs_raw"]["pass"] is True
    assert rows["history_overhead"]["verdict"] == MISS
    advice = quieter(list(rows.values()))
    assert advice is not None and "queue_vs_raw" in advice and "history_overhead" not in advice
    assert "--only queue_vs_raw --repeat" in advice and "other processes below 0.1 of the CPUs" in advice
    assert {t.name for t in TARGETS} >= set(rows)


LOG = """\
tests/unit/test_a.py ....                                     [100%]
============================= slowest 15 durations =============================
41.20s call     tests/system/test_stress.py::test_kill_storm[sqlite]
3.05s setup    tests/system/test_db.py::test_server
0.50s teardown tests/unit/test_a.py::test_x

(12 durations < 0.005s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
\x1b[32m= 712 passed, 12 skipped, 3 deselected, 1 xfailed in 498.12s (0:08:18) =\x1b[0m
"""


def test_the_suite_log_gives_the_session_time_and_the_slowest_tests():
    suite = parse(LOG)
    assert suite["wall_s"] == 498.12
    assert suite["counts"] == {"passed": 712, "skipped": 12, "deselected": 3, "xfailed": 1}
    assert suite["slowest"] == [
        {"seconds": 41.2, "phase": "call", "test": "tests/system/test_stress.py::test_kill_storm[sqlite]"},
        {"seconds": 3.05, "phase": "setup", "test": "tests/system/test_db.py::test_server"},
        {"seconds": 0.5, "phase": "teardown", "test": "tests/unit/test_a.py::test_x"}]
    with pytest.raises(UsageError, match="no pytest summary line"):
        parse(LOG.rsplit("\n", 2)[0])  # cut off before its last line


def test_bench_suite_log_records_into_the_bench_file_and_keeps_the_rest(tmp_path, capsys):
    from takeover.cli import main

    out = tmp_path / "bench.json"
    out.write_text(json.dumps({"results": [{"name": "queue_vs_raw"}], "measurements": {}}))
    log = tmp_path / "test.log"
    log.write_text(LOG)
    assert main(["bench", "--suite-log", str(log), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["results"] == [{"name": "queue_vs_raw"}] and doc["suite"]["wall_s"] == 498.12
    assert len(doc["suite"]["slowest"]) == 3 and doc["suite"]["log"] == "test.log"
    log.write_text("not a pytest log\n")
    assert main(["bench", "--suite-log", str(log), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no pytest summary line" in err and err.count("\n") == 1


def test_make_tests_log_names_its_commit_and_a_suite_of_another_commit_says_so(tmp_path, capsys):
    from takeover.benchmarks.suite_log import table
    from takeover.cli import main

    head = "# make test: commit 1234567890abcdef dirty, started 2026-12-03T19:00:00+0000\n"
    suite = parse(head + LOG)
    assert suite["commit"] == "1234567890abcdef" and suite["dirty"] is True and suite["started"].startswith("2026")
    out = tmp_path / "bench.json"
    log = tmp_path / "test-log.txt"
    # the figures' commit is another: the page says the suite's time is not their code's
    out.write_text(json.dumps({"results": [], "measurements": {}, "commit": "fedcba9876543210"}))
    log.write_text(head.replace(" dirty", "") + LOG)
    assert main(["bench", "--suite-log", str(log), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["suite"]["stale"] == "the suite ran at commit 1234567890, not fedcba9876"
    assert "Not the code of the figures above: the suite ran at commit 1234567890" in "\n".join(table(doc["suite"]))
    # the same commit: current, nothing said; with uncommitted changes: said
    out.write_text(json.dumps({"results": [], "measurements": {}, "commit": "1234567890abcdef"}))
    assert main(["bench", "--suite-log", str(log), "--out", str(out)]) == 0
    assert "stale" not in json.loads(out.read_text())["suite"]
    log.write_text(head + LOG)
    assert main(["bench", "--suite-log", str(log), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["suite"]["stale"] == "the suite ran with uncommitted changes"


def test_the_page_judges_no_row_measured_while_others_used_the_machine():
    from takeover.benchmarks.targets import load_text, shown_verdict

    quiet = {"cpu": {"others_cores": 0.05, "bench_cores": 1.9, "cpus": 2, "seconds": 30.0, "quiet": True}}
    loaded = {"cpu": {"others_cores": 0.8, "bench_cores": 1.2, "cpus": 2, "seconds": 30.0, "quiet": False}}
    base = {"history_overhead": 0.5, "recorded_pairs_per_s": 1, "bare_pairs_per_s": 2,
            "history_overhead_iqr": [0.45, 0.55], "when": "w", "load_avg": {"min": 2.5, "median": 2.7, "max": 2.9}}
    (row,) = evaluate({"history_overhead": {**base, **quiet}})
    assert row["quiet"] is True and shown_verdict(row) == MISS  # a load of 2.9 from the bench itself: judged
    assert "others 0.05 of 2 cores (bench 1.9)" in load_text(row)
    (row,) = evaluate({"history_overhead": {**base, **loaded}})
    assert row["verdict"] == MISS and row["quiet"] is False  # bench.json keeps the verdict ...
    assert shown_verdict(row).startswith("not judged") and MISS not in shown_verdict(row)  # ... the page does not
    # a row from before the measure: judged by its load average, below 2 only
    (row,) = evaluate({"history_overhead": base})
    assert "quiet" not in row and shown_verdict(row).startswith("not judged")
    (row,) = evaluate({"history_overhead": {**base, "load_avg": {"min": 0.5, "median": 0.6, "max": 1.5}}})
    assert shown_verdict(row) == MISS


class _Probe:
    """Stands for OthersCpu over one step: the others' cores it reports come from a script, in step order."""

    script: list[float] = []

    def cores(self) -> tuple[float, float, float]:
        return _Probe.script.pop(0), 1.0, 3.0


def _rounds(others: list[float], rates: dict[str, list[float]], planned: int, extra: int, key: tuple[str, ...] = ()):
    from takeover.benchmarks.rounds import Rounds

    _Probe.script = list(others)
    log: list[str] = []

    def step(name: str):
        it = iter(rates[name])

        def run() -> float:
            log.append(name)
            return next(it)

        return run

    rounds = Rounds({n: step(n) for n in rates}, ("a", "b", "c"), key, probe=_Probe, cpus=2).run(planned, extra)
    return rounds, log


def test_rounds_flip_their_order_and_a_disturbed_round_is_left_out_and_made_again():
    # round 2's step "b" shared the machine with 0.5 cores of others: left out, and a fourth round made
    others = [0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    rates = {"a": [80, 40, 82, 84], "b": [100, 100, 100, 100], "c": [1, 1, 1, 1]}
    rounds, log = _rounds(others, rates, 3, 2)
    assert log == ["a", "b", "c", "c", "b", "a", "a", "b", "c", "c", "b", "a"]  # reversed every other round
    assert len(rounds.done) == 4 and [rounds.disturbed(r) for r in rounds.done] == [False, True, False, False]
    assert rounds.ratio("a", "b").values == (0.8, 0.82, 0.84)  # the disturbed round's 0.4 is not in it
    fig = rounds.figures()
    assert fig["cpu"]["excluded_rounds"] == 1 and fig["cpu"]["quiet"] is True
    assert [r["counted"] for r in fig["round_steps"]] == [True, False, True, True]
    assert fig["round_steps"][1]["b"] == {"rate": 100, "others_cores": 0.5, "seconds": 3.0}
    assert cpu_text(fig).endswith("; 1 disturbed round left out")


def test_rounds_stop_at_their_extra_and_too_few_quiet_ones_judge_nothing():
    rates = {"a": [80, 40, 82, 84, 86], "b": [100] * 5, "c": [1] * 5}
    # others at 0.11 cores in one step of every round but the first: 0.05 of 2 CPUs is 0.1 cores
    busy = [0.0, 0.0, 0.0] + [0.0, 0.11, 0.0] * 4
    rounds, log = _rounds(busy, rates, 3, 2)
    assert len(rounds.done) == 5 and len(rounds.quiet) == 1  # 3 planned + 2 extra, then it stops
    assert rounds.ratio("a", "b").values == (0.8, 0.4, 0.82, 0.84, 0.86)  # all of them: too few quiet
    cpu = rounds.figures()["cpu"]
    assert cpu["quiet"] is False and cpu["too_few_quiet"] is True and cpu["excluded_rounds"] == 0
    assert cpu_text({"cpu": cpu}).endswith("; too few quiet rounds")
    # nothing disturbed: exactly the planned rounds
    rounds, _ = _rounds([0.0] * 9, rates, 3, 2)
    assert len(rounds.done) == 3 and rounds.figures()["cpu"]["quiet"] is True
    # every planned round disturbed: 2 extra rounds, if quiet, make the 2 a judged figure needs, so they are
    # made; 1 extra round could not, and none is made (the bench is not made longer for nothing)
    rounds, _ = _rounds([0.5] * 9 + [0.0] * 6, rates, 3, 2)
    assert len(rounds.done) == 5 and len(rounds.quiet) == 2 and rounds.figures()["cpu"]["quiet"] is True
    rounds, _ = _rounds([0.5] * 9 + [0.0] * 3, rates, 3, 1)
    assert len(rounds.done) == 3 and rounds.figures()["cpu"]["too_few_quiet"] is True


def test_a_step_outside_the_judged_ones_disturbs_only_its_own_ratios():
    # round 2's "c" shared the machine: the round still counts for a/b (the judged steps), not for a/c
    others = [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    rates = {"a": [80, 82, 84], "b": [100, 100, 100], "c": [100, 50, 100]}
    rounds, _ = _rounds(others, rates, 3, 2, key=("a", "b"))
    assert len(rounds.done) == 3 and rounds.ratio("a", "b").values == (0.8, 0.82, 0.84)
    assert rounds.ratio("a", "c").values == (0.8, 0.84) and rounds.rates("c") == (100, 100)
    assert rounds.figures()["cpu"]["excluded_rounds"] == 0
