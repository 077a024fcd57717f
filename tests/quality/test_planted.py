"""Test the tester: short real stress runs must catch planted bugs and pass the reference queue."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from takeover.checker import INVARIANTS
from takeover.commands.selftest import QUICK
from takeover.contract import REFERENCE_QUEUE, open_queue
from takeover.history import HistoryWriter
from takeover.pipeline import check_and_report
from takeover.queues.planted import PLANTED
from takeover.run.registration import register_tasks
from takeover.store import HISTORY_FILE


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
    for row in result["planted"]:
        assert row["caught"], row
        assert set(row["violated"]) & set(row["expected"])
    assert [r["valid"] for r in result["reference"]] == [True]


def _scripted_takeover(queue_name: str, folder: Path) -> dict:
    """One task through a takeover, driven directly with explicit clocks on a real SQLite queue:
    w1 claims and is never heard of again (killed, or its late finish falls outside any window),
    w2 tries to claim in the second half of w1's lease, w3 claims after it expired, acts, finishes.
    Returns the checker's summary of the run folder written on the way."""
    folder.mkdir()
    lease = 1.0
    queue = open_queue(queue_name, str(folder / "queue.sqlite"))
    hist = {p: HistoryWriter(folder / HISTORY_FILE, p) for p in (0, 1, 2, 3)}
    t0 = 1_000.0
    try:
        register_tasks(queue, hist[0], ["a"], t0)

        def claim(p: int, now: float) -> tuple | None:
            hist[p].write("invoke", "claim", worker=f"w{p}", now=now, lease=lease)
            got = queue.claim(f"w{p}", now, lease)
            if got is None:
                hist[p].write("fail", "claim", error="empty")
            else:
                hist[p].write("ok", "claim", task=got[0], gen=got[1], lease_until=got[2], now=now)
            return got

        claim(1, t0)
        claim(2, t0 + 0.75 * lease)
        got = claim(3, t0 + 1.1 * lease)
        if got is not None:
            task, gen, _ = got
            hist[3].write("invoke", "action", task=task, gen=gen, now=t0 + 1.2 * lease)
            hist[3].write("ok", "action", task=task, gen=gen, value="ok")
            hist[3].write("invoke", "finish", task=task, gen=gen, outcome="done", now=t0 + 1.3 * lease)
            ok = queue.finish(task, gen, "done", t0 + 1.3 * lease)
            if ok:
                hist[3].write("ok", "finish", task=task, gen=gen, outcome="done", value="true")
            else:
                hist[3].write("fail", "finish", task=task, gen=gen, outcome="done", error="rejected")
        (folder / "snapshot.json").write_text(json.dumps({"time": t0 + 2, "tasks": queue.snapshot()}))
    finally:
        queue.close()
        for h in hist.values():
            h.close()
    (folder / "config.json").write_text(json.dumps({"queue": queue_name, "tasks": 1, "lease": lease,
                                                    "faults": {}}))
    check_and_report(folder, out=io.StringIO(), reports=False)
    return json.loads((folder / "summary.json").read_text())


@pytest.mark.parametrize("name", QUICK)
def test_quick_planted_bugs_are_caught_by_any_takeover(name: str, tmp_path) -> None:
    """Why the quick selftest cannot miss under load: its bugs show in the takeover itself, not in
    where a displaced holder's late call happens to land."""
    summary = _scripted_takeover(f"takeover.queues.planted:{name}", tmp_path / name)
    fired = {n for n, inv in summary["invariants"].items() if inv["valid"] is False}
    assert fired & set(PLANTED[name]), summary["invariants"]


def test_the_reference_queue_passes_the_scripted_takeover(tmp_path) -> None:
    summary = _scripted_takeover(REFERENCE_QUEUE, tmp_path / "reference")
    assert summary["valid"] is True, summary["invariants"]
    assert summary["counts"]["takeovers"] == 1
