"""Test the tester: short real stress runs must catch planted bugs and pass the reference queue."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from takeover._internal.checker import INVARIANTS
from takeover._internal.history import HistoryWriter
from takeover._internal.pipeline import check_and_report
from takeover._internal.run.registration import register_tasks
from takeover._internal.selftest.runs import QUICK
from takeover._internal.store import HISTORY_FILE, VIOLATIONS_CSV
from takeover.contract import REFERENCE_QUEUE, open_queue
from takeover.queues.planted import NEEDS_FAULT, PLANTED

LEASE = 1.0
T0 = 1_000.0


def test_planted_queues_cover_every_invariant() -> None:
    covered = {name for expected in PLANTED.values() for name in expected}
    assert covered == set(INVARIANTS)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_quick_selftest_catches_planted_bugs_and_passes_the_reference(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "takeover", "selftest", "--quick", "--seeds", "2", "--json",
                          "--keep", str(tmp_path)], capture_output=True, text=True, timeout=390)
    result = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert result["ok"] is True
    assert (result["profile"], result["duration"]) == ("smoke", 3)
    for row in result["planted"]:
        assert row["caught"], row
        assert str(row["seed"]) not in row.get("unreached", {}), row  # the catching run reached the bug's cells
        assert set(row["violated"]) & set(row["expected"])
        _assert_diagnosed(row["queue"], Path(row["run_dir"]))
    assert [r["valid"] for r in result["reference"]] == [True]


def _assert_diagnosed(name: str, folder: Path) -> None:
    """A real run of a planted bug: violations.csv lists every violation, the diagnosis names the
    planted defect, and the spec scenario run right after the run confirms it."""
    from tests.quality.test_diagnosis import EXPECTED

    summary = json.loads((folder / "summary.json").read_text())
    with (folder / VIOLATIONS_CSV).open(newline="") as f:
        listed = Counter(row["invariant"] for row in csv.DictReader(f))
    assert dict(listed) == {n: inv["violations"] for n, inv in summary["invariants"].items() if inv["violations"]}
    invariant, pattern, defect = EXPECTED[name]
    [entry] = [e for e in summary["diagnosis"] if (e["invariant"], e["pattern"]) == (invariant, pattern)]
    assert entry["defect"] == defect and entry.get("confirmed_by", "").startswith("spec scenario S2 departs"), entry
    # `takeover check` of the same folder runs no scenario, yet keeps what the run's check confirmed
    rechecked = subprocess.run([sys.executable, "-m", "takeover", "check", "--no-reports", str(folder)],
                               capture_output=True, text=True, timeout=120)
    assert rechecked.returncode == 1, rechecked.stdout + rechecked.stderr
    assert f"confirmed by the spec: {entry['confirmed_by']}" in rechecked.stdout
    assert json.loads((folder / "summary.json").read_text())["diagnosis"] == summary["diagnosis"]


class _Scripted:
    """A queue driven from the test process with explicit clocks, on a real SQLite file, each call
    recorded in a run folder's history as the worker process ``p`` would record it (each process
    with its own connection), so the same folder then goes through the checker."""

    def __init__(self, queue_name: str, folder: Path) -> None:
        folder.mkdir()
        self.queue_name, self.folder = queue_name, folder
        self.queues: dict[int, Any] = {}
        self.hist: dict[int, HistoryWriter] = {}

    def queue(self, p: int) -> Any:
        if p not in self.queues:
            self.queues[p] = open_queue(self.queue_name, str(self.folder / "queue.sqlite"))
            self.hist[p] = HistoryWriter(self.folder / HISTORY_FILE, p)
        return self.queues[p]

    def register(self, p: int, ids: list[str], now: float) -> None:
        register_tasks(self.queue(p), self.hist[p], ids, now)

    def claim(self, p: int, now: float, lease: float = LEASE) -> tuple | None:
        queue = self.queue(p)
        self.hist[p].write("invoke", "claim", worker=f"w{p}", now=now, lease=lease)
        got = queue.claim(f"w{p}", now, lease)
        if got is None:
            self.hist[p].write("fail", "claim", error="empty")
        else:
            self.hist[p].write("ok", "claim", task=got[0], gen=got[1], lease_until=got[2], now=now)
        return got

    def act_and_finish(self, p: int, task: str, gen: int, now: float) -> bool:
        """The action (recorded as answered; no ledger) at ``now``, the finish a tenth of a lease later."""
        queue = self.queue(p)
        self.hist[p].write("invoke", "action", task=task, gen=gen, now=now)
        self.hist[p].write("ok", "action", task=task, gen=gen, value="ok")
        self.hist[p].write("invoke", "finish", task=task, gen=gen, outcome="done", now=now + 0.1 * LEASE)
        ok = queue.finish(task, gen, "done", now + 0.1 * LEASE)
        if ok:
            self.hist[p].write("ok", "finish", task=task, gen=gen, outcome="done", value="true")
        else:
            self.hist[p].write("fail", "finish", task=task, gen=gen, outcome="done", error="rejected")
        return ok

    def drain(self, p: int, now: float) -> None:
        """Process ``p`` claims and finishes until nothing is claimable."""
        while (got := self.claim(p, now)) is not None:
            self.act_and_finish(p, got[0], got[1], now)
            now += 0.2 * LEASE

    def check(self, tasks: int) -> dict:
        """Snapshot, close every connection, check the folder; the checker's summary."""
        try:
            snapshot = self.queue(0).snapshot()
            (self.folder / "snapshot.json").write_text(json.dumps({"time": T0 + 100, "tasks": snapshot}))
        finally:
            for queue in self.queues.values():
                queue.close()
            for h in self.hist.values():
                h.close()
        (self.folder / "config.json").write_text(json.dumps({"queue": self.queue_name, "tasks": tasks,
                                                            "lease": LEASE, "faults": {}}))
        check_and_report(self.folder, out=io.StringIO(), reports=False)
        return json.loads((self.folder / "summary.json").read_text())


def _fired(summary: dict) -> set[str]:
    return {n for n, inv in summary["invariants"].items() if inv["valid"] is False}


def _scripted_takeover(queue_name: str, folder: Path) -> dict:
    """One task through a takeover: w1 claims and is never heard of again (killed, or its late
    finish falls outside any window), w2 tries to claim in the second half of w1's lease, w3 claims
    after it expired, acts, finishes. Returns the checker's summary."""
    run = _Scripted(queue_name, folder)
    run.register(0, ["a"], T0)
    run.claim(1, T0)
    run.claim(2, T0 + 0.75 * LEASE)
    got = run.claim(3, T0 + 1.1 * LEASE)
    if got is not None:
        run.act_and_finish(3, got[0], got[1], T0 + 1.2 * LEASE)
    return run.check(tasks=1)


@pytest.mark.parametrize("name", QUICK)
def test_quick_planted_bugs_are_caught_by_any_takeover(name: str, tmp_path) -> None:
    """Why the quick selftest cannot miss under load: its bugs show in the takeover itself, not in
    where a displaced holder's late call happens to land."""
    summary = _scripted_takeover(f"takeover.queues.planted:{name}", tmp_path / name)
    assert _fired(summary) & set(PLANTED[name]), summary["invariants"]


def test_the_reference_queue_passes_the_scripted_takeover(tmp_path) -> None:
    summary = _scripted_takeover(REFERENCE_QUEUE, tmp_path / "reference")
    assert summary["valid"] is True, summary["invariants"]
    assert summary["counts"]["takeovers"] == 1


def test_non_atomic_claim_hands_one_task_to_two_claims_at_the_same_instant(tmp_path) -> None:
    """w2's whole claim runs at the instant w1's claim goes from reading to writing (SQLite's trace
    hook on w1's connection, at its first statement that is not a SELECT): the planted queue has
    already picked its row there and hands it out a second time; the reference queue has not
    read yet, so it waits its turn and picks the next task."""
    found: dict[str, tuple] = {}
    for name in ("takeover.queues.planted:NonAtomicClaim", REFERENCE_QUEUE):
        run = _Scripted(name, tmp_path / name.split(":")[1])
        run.register(0, ["a", "b"], T0)
        inner: list[tuple | None] = []

        def cut_in(sql: str, run: _Scripted = run, inner: list = inner) -> None:
            if not inner and not sql.lstrip().upper().startswith("SELECT"):
                inner.append(run.claim(2, T0 + 1))

        run.queue(1)._conn.set_trace_callback(cut_in)
        first = run.claim(1, T0 + 1)
        run.queue(1)._conn.set_trace_callback(None)
        second = inner[0]
        assert first is not None and second is not None
        found[name] = first, second
        # Each holder works on what it was given; then whatever is left is drained.
        run.act_and_finish(2, second[0], second[1], T0 + 1.1)
        run.act_and_finish(1, first[0], first[1], T0 + 1.2)
        run.drain(1, T0 + 1.5)
        summary = run.check(tasks=2)
        if name == REFERENCE_QUEUE:
            assert {first[0], second[0]} == {"a", "b"} and first[1] == second[1] == 1
            assert summary["valid"] is True, summary["invariants"]
        else:
            # One task, two live leases (generations 1 and 2, both until T0 + 2).
            assert (second[0], second[1]) == ("a", 1) and (first[0], first[1]) == ("a", 2)
            assert min(first[2], second[2]) > T0 + 1
            assert _fired(summary) == {"lease_exclusive"}, summary["invariants"]


def test_register_replaces_resets_a_done_and_a_running_task(tmp_path) -> None:
    """Register, claim, finish, register again, claim again: the planted queue hands the done task
    out again at generation 1, and a running task taken over at generation 2 comes back at 1. The
    reference queue ignores both registrations. The checker sees the consequences, not the
    registrations: a reclaim of a terminal task and a generation that went back."""
    for name in ("takeover.queues.planted:RegisterReplaces", REFERENCE_QUEUE):
        run = _Scripted(name, tmp_path / name.split(":")[1])
        run.register(0, ["a", "b"], T0)
        a = run.claim(1, T0)
        b = run.claim(2, T0)
        assert a is not None and b is not None and (a[0], b[0]) == ("a", "b")
        assert run.act_and_finish(1, "a", a[1], T0 + 0.1)
        b2 = run.claim(3, T0 + 1.5 * LEASE)  # b's first lease ran out: taken over at generation 2
        assert b2 is not None and b2[:2] == ("b", 2)
        run.register(0, ["a", "b"], T0 + 1.6 * LEASE)
        again = [run.claim(4, T0 + 1.7 * LEASE), run.claim(4, T0 + 1.7 * LEASE)]
        rows = {row[0]: row[1:3] for row in run.queue(0).snapshot()}
        if name == REFERENCE_QUEUE:
            assert again == [None, None]
            assert rows == {"a": ("done", 1), "b": ("running", 2)}
            run.act_and_finish(3, "b", 2, T0 + 1.8 * LEASE)
            summary = run.check(tasks=2)
            assert summary["valid"] is True, summary["invariants"]
        else:
            assert sorted(g[:2] for g in again if g) == [("a", 1), ("b", 1)]
            assert rows == {"a": ("running", 1), "b": ("running", 1)}
            assert not run.act_and_finish(3, "b", 2, T0 + 1.8 * LEASE)  # its holder is refused
            run.drain(4, T0 + 1.9 * LEASE)
            summary = run.check(tasks=2)
            fired = _fired(summary)
            assert {"no_reclaim_after_terminal", "generation_monotonic"} <= fired, summary["invariants"]


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(200)
def test_the_selftest_reports_a_bug_its_runs_could_not_expose(tmp_path) -> None:
    """RegisterReplaces needs a task registered twice; a profile without the duplicate_register
    fault cannot show it, and the selftest must say so and fail, not pass over it (nor spend every
    seed on it)."""
    profile = tmp_path / "plain.toml"
    profile.write_text('workers = 2\ntasks = 6\nduration = 1\nlease = 0.6\n')
    out = subprocess.run([sys.executable, "-m", "takeover", "selftest", "--only", "RegisterReplaces",
                          "--profile", str(profile), "--seeds", "2", "--keep", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 1, out.stdout + out.stderr
    line = next(x for x in out.stdout.splitlines() if "RegisterReplaces" in x)
    assert line.startswith("MISSED") and "after 1 run(s)" in line, out.stdout
    assert "no duplicate_register fault" in line, out.stdout
    # and its run reached none of the cells the bug needs (a known task registered again): said, and failed on
    assert "NEVER REACHED RegisterReplaces" in out.stdout, out.stdout
    assert "never reached cell register/pending/never/none (or any of 5 more), which planted bug RegisterReplaces " \
           "needs" in out.stdout
    assert "selftest: FAILED: runs on RegisterReplaces never reached the cells those bugs need" in out.stdout
    assert NEEDS_FAULT["RegisterReplaces"] == "duplicate_register"
