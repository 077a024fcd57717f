"""Model coverage from known histories: each call lands in exactly the cell the spec's model puts it in.

The histories are written by tests/quality/builder.py (a real run folder, checked by the real checker);
lease 5 s, so the stress tick is 50 ms and "edge" is within 50 ms of a lease's end.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from takeover._internal import coverage_space as cs
from takeover._internal.checker.model_coverage import callers_of, times_of
from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run


def _model(run: Run, folder: Path) -> dict:
    run.write(folder)
    out = io.StringIO()
    check_and_report(folder, out=out, reports=False)
    model = json.loads((folder / "summary.json").read_text())["coverage"]["model"]
    # the console's line: the figure, then the important cells not reached, stale and expired first
    line = next(x.strip() for x in out.getvalue().splitlines() if "model coverage:" in x)
    assert line.startswith(f"model coverage: {model['reached']}/{model['possible']} cells reached; "
                           "important cells not reached: ")
    return model


def test_a_takeover_history_reaches_exactly_its_cells(tmp_path: Path) -> None:
    run = Run()
    run.register("a", "b")
    run.spawn(1, "w1")
    run.spawn(2, "w2")
    run.spawn(3, "w3")
    run.claim(1, 0.0, "a", 1)  # lease until 5
    run.claim(3, 0.1, "b", 1)  # lease until 5.1
    run.claim(2, 5.02, "a", 2)  # a takeover within a tick after the end: lease until 10.02
    run.finish(3, 5.5, "b", 1, status="rejected")  # b's holder, 0.4 s past its lease, nobody took it
    run.finish(1, 6.0, "a", 1, status="rejected")  # the old holder comes back inside the new lease
    run.extend(2, 9.99, "a", 2)  # a heartbeat 30 ms before the end: lease until 14.99
    run.finish(2, 11.0, "a", 2)
    run.reregister(12.0, 0, "a")  # the producer sends a finished task again
    run.claim(1, 20.0, None, status="empty")  # w1 asks again: its last task (a, generation 1) is done at 2
    run.snap(("a", "done", 2, None), ("b", "running", 1, 5.1))
    model = _model(run, tmp_path / "run")
    assert model["cells"] == {
        "register/absent/never/none": 2,
        "register/done/never/none": 1,
        "claim/pending/never/none": 2,
        "claim/running/never/edge": 1,
        "claim/done/stale/none": 1,
        "finish_done/running/stale/inside": 1,
        "finish_done/running/expired/past": 1,
        "extend/running/holder/edge": 1,
        "finish_done/running/holder/inside": 1,
        "snapshot/running/never/past": 1,  # the snapshot (at 100) lists b, its lease long gone
        "snapshot/done/never/none": 1,
    }
    assert model["tick"] == 0.05
    assert model["extensions"] == ["extend"]  # the history proves extend(); nothing shows resolve()
    assert model["possible"] == len(cs.possible(("extend",)))
    assert model["reached"] == 11
    assert "finish_done/running/stale/inside" not in model["unreached"]
    assert "register/uncertain/never/none" in model["unreached_important"]
    assert "impossible_reached" not in model


def test_uncertain_reregistered_and_a_late_finish_at_the_edge(tmp_path: Path) -> None:
    run = Run()
    run.register("a", "b")
    run.spawn(1, "w1")
    run.claim(1, 0.0, "a", 1)
    run.finish(1, 1.0, "a", 1, "uncertain")
    run.reregister(2.0, 0, "a")
    run.claim(1, 3.0, "b", 1)  # lease until 8
    run.finish(1, 8.02, "b", 1, status="rejected")  # 20 ms late: outside, within a tick
    model = _model(run, tmp_path / "run")
    assert model["cells"] == {
        "register/absent/never/none": 2,
        "register/uncertain/never/none": 1,
        "claim/pending/never/none": 2,
        "finish_uncertain/running/holder/inside": 1,
        "finish_done/running/expired/edge": 1,
    }
    assert model["extensions"] == []


def test_the_vectorized_classification_agrees_with_coverage_space() -> None:
    """takeover._internal.checker.model_coverage mirrors coverage_space.caller_of and time_of, on every mix of
    states, generations and times around the lease's end."""
    rng = np.random.default_rng(7)
    n = 4000
    state = rng.integers(0, len(cs.STATES), n)
    caller_gen = rng.choice([np.nan, 0, 1, 2, 3], n)
    current = rng.choice([np.nan, 0, 1, 2, 3], n)
    lease = rng.choice([np.nan, 10.0], n)
    now = 10.0 + rng.choice([-1.0, -0.06, -0.05, -0.01, 0.0, 0.01, 0.049, 0.05, 1.0], n)
    tick = 0.05
    callers = callers_of(state, caller_gen, current, now, lease)
    times = times_of(state, now, lease, tick)
    for i in range(n):
        s = cs.STATES[state[i]]
        cg = None if np.isnan(caller_gen[i]) else int(caller_gen[i])
        cur = None if np.isnan(current[i]) else int(current[i])
        lu = None if np.isnan(lease[i]) else float(lease[i])
        assert cs.CALLERS[callers[i]] == cs.caller_of(s, cg, cur, float(now[i]), lu), i
        assert cs.TIMES[times[i]] == cs.time_of(s, float(now[i]), lu, tick), i


def _plain_run(*, reregister: bool) -> Run:
    run = Run()
    run.register("a", "b")
    run.spawn(1, "w1")
    run.work(1, 0.0, "a", 1)
    if reregister:
        run.reregister(3.0, 0, "a")
    run.work(1, 4.0, "b", 1)
    run.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return run


def test_a_run_that_never_reached_a_planted_bugs_cells_fails_the_selftest(tmp_path: Path) -> None:
    """RegisterReplaces needs a known task registered again: a run without one reached none of its cells,
    so the selftest's row for it says NEVER REACHED and fails, even though the bug was (say) caught."""
    from takeover._internal.selftest.verdict import passed, row_line, unreached_cells
    from takeover.queues.planted import NEEDS_CELLS
    from takeover.reports.coverage import needs_lines

    _model(_plain_run(reregister=False), tmp_path / "plain")
    summary = json.loads((tmp_path / "plain" / "summary.json").read_text())
    missing = unreached_cells("RegisterReplaces", summary)
    assert missing == list(NEEDS_CELLS["RegisterReplaces"])
    assert unreached_cells("BumpsByTwo", summary) is None  # its first claims are there
    row = {"queue": "RegisterReplaces", "expected": ["lease_exclusive"], "caught": True, "seed": 1, "seconds": 9.0,
           "first_violation_at": 2.0, "violated": ["lease_exclusive"], "tries": 1, "unreached": {1: missing}}
    assert "NEVER REACHED RegisterReplaces" in row_line(row)
    assert f"never reached cell {missing[0]}" in row_line(row)
    assert not passed([row], [{"valid": True}])  # caught by a run that reached none of its cells
    assert passed([{**row, "unreached": {}}], [{"valid": True}])
    # a first run that missed both the bug and its cells is what the second seed is for
    assert passed([{**row, "seed": 2, "tries": 2}], [{"valid": True}])
    assert not passed([{**row, "caught": False, "tries": 1}], [{"valid": True}])
    # any run's console names the planted bugs whose cells it never reached; a mutant's table works alike
    lines = needs_lines(summary)
    assert any(line.endswith("which planted bug RegisterReplaces needs") for line in lines)
    assert not any("BumpsByTwo" in line for line in lines)
    assert needs_lines(summary, {"m7": ("extend/running/stale/past",)}, "mutant") == [
        "never reached cell extend/running/stale/past, which mutant m7 needs"]

    _model(_plain_run(reregister=True), tmp_path / "again")
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert unreached_cells("RegisterReplaces", again) is None


def test_every_planted_bug_declares_possible_cells_on_both_databases() -> None:
    from takeover.queues import planted, planted_postgres

    assert set(planted.NEEDS_CELLS) == set(planted.PLANTED)
    assert planted_postgres.NEEDS_CELLS == {n: planted.NEEDS_CELLS[n] for n in planted_postgres.PLANTED}
    possible = set(cs.possible())
    assert all(cells and set(cells) <= possible for cells in planted.NEEDS_CELLS.values())


def test_each_unreached_cell_says_why_and_the_console_lists_them(tmp_path: Path) -> None:
    """coverage.model.unreached_why (issue 36): a cell an aim_unreached window aimed at and missed says the
    window's reason; a cell no window can reach says why not; the others that no window came to say so. The
    console lists them, important cells first."""
    from takeover.reports.coverage import unreached_lines

    run = Run()
    run.config["queue_capabilities"] = {"extend": True, "resolve": True}
    run.register("a")
    run.spawn(1, "w1")
    run.claim(1, 0.0, "a", 1)
    run.aimed_start("aim_unreached", 1.0)
    run.aimed_end("aim_unreached", 2.0, "no lease holder fit for the window was in phase acted",
                  cell="extend/running/stale/edge")
    run.finish(1, 3.0, "a", 1)
    run.snap(("a", "done", 1, None))
    model = _model(run, tmp_path / "run")
    why = model["unreached_why"]
    assert set(why) == set(model["unreached"])
    assert why["extend/running/stale/edge"] == ("1 aim_unreached window(s) aimed at it; the last: missed, no lease "
                                                "holder fit for the window was in phase acted")
    assert why["claim/uncertain/holder/none"].startswith("a claim lands on the caller's own earlier task only")
    assert why["finish_uncertain/pending/stale/none"].startswith("only a resolve back to pending")
    assert why["resolve/done/never/none"].startswith("none of the 1 aim_unreached window(s) came to it")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    lines = unreached_lines(summary)
    assert lines[0] == f"never reached: extend/running/stale/edge — {why['extend/running/stale/edge']}"
    assert lines[-1].startswith(f"never reached: {len(why) - 6} more cell(s)")
