"""freeze_in_call in real stress runs: a worker process stops itself between two statements of its own
finish, is resumed once another worker took the task over, and a check-then-act finish is caught there.

The evidence is the history's, as a reader would check it: the worker's ``info failpoint`` record
(which call, which statement, its text), the nemesis' pause of the same worker around it with its
end recorded (resumed, not killed), and the takeover's claim in between. A user's queue from
tests/fixtures/queues/user_mistakes.py: its finish SELECTs, checks in Python, then UPDATEs by id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.attempts import until_shown
from tests.helpers.processes import (
    REPO,
    records,
    start_takeover,
    stop_and_reap,
    wait_for_record,
    wait_no_stragglers,
)
from tests.system.test_aimed import stress as aimed_stress

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

KIND = "freeze_in_call"


def stress(run_dir: Path, seed: int, queue: str, duration: float = 4.0) -> dict[str, Any]:
    """A short smoke-profile run with freeze_in_call alone on (1.5/s), checked; its summary."""
    return aimed_stress(run_dir, seed, duration, queue, **{KIND: 1.5})


@pytest.fixture
def user_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers (spawned: they get this sys.path) and the coordinator import user_mistakes."""
    monkeypatch.syspath_prepend(str(REPO / "tests" / "fixtures" / "queues"))


def hits(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in recs if r["f"] == KIND and r["type"] == "ok" and r.get("value") == "hit"]


def caught_run(root: Path, queue: str) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    """The first of up to three seeds whose run reached a finish window (the next seed only after a miss)."""

    def run(i: int) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
        run_dir = root / f"run{i}"
        return run_dir, stress(run_dir, seed=3 + i, queue=queue), records(run_dir)

    def missing(got: tuple[Path, dict[str, Any], list[dict[str, Any]]]) -> str | None:
        return None if any(r.get("op") == "finish" for r in hits(got[2])) else "finish window hit"

    return until_shown(run, missing)


def test_a_worker_stops_inside_its_finish_before_the_second_statement_and_is_resumed(
        tmp_path: Path, user_queues: None) -> None:  # fmt: skip
    run_dir, summary, recs = caught_run(tmp_path, "user_mistakes:CheckThenActFinish")
    wait_no_stragglers(run_dir)
    hit = next(r for r in hits(recs) if r["op"] == "finish")
    assert (hit["statement"], hit["statements"]) == (2, 2), hit
    stop = next(r for r in recs if r["f"] == "failpoint" and r.get("task") == hit["task"] and r["gen"] == hit["gen"])
    assert stop["type"] == "info" and stop["value"] == "finish before statement 2 of 2", stop
    assert stop["detail"].startswith("UPDATE jobs SET status"), stop
    pause = [r for r in recs if r["f"] == "pause" and r.get("detail") == KIND and r["target"] == stop["process"]
             and r.get("task") == hit["task"]]  # fmt: skip
    assert [r["type"] for r in pause] == ["invoke", "ok"], "frozen, then resumed (not killed)"
    assert pause[0]["phase"] == "finishing" and pause[0]["time"] >= stop["time"]
    # The takeover it waited for: a claim of a newer generation of that task returned while it was frozen.
    taken = [r for r in recs if r["f"] == "claim" and r["type"] == "ok" and r.get("task") == hit["task"]
             and r["gen"] > hit["gen"] and pause[0]["time"] < r["time"] < pause[1]["time"]]  # fmt: skip
    assert taken, "no claim of the task came while its holder was frozen"
    # And the frozen finish went on after the resume: its completion is recorded after the pause's end.
    done = [r for r in recs if r["f"] == "finish" and r["type"] != "invoke" and r["process"] == stop["process"]
            and r.get("time", 0) > pause[1]["time"]]  # fmt: skip
    assert done, "the resumed worker's finish never returned"
    assert summary["coverage"]["aimed"][KIND]["hit"] >= 1
    # The summary (and so the report) says where the workers stopped, with the statement's text.
    frozen = summary["coverage"]["aimed"][KIND]["frozen"]["finish before statement 2 of 2"]
    assert frozen["count"] >= 1 and frozen["statement"].startswith("UPDATE jobs SET status"), frozen


@pytest.mark.parametrize(("queue", "valid"), [("CheckThenActFinish", False), ("UserQueue", True)])
def test_a_check_then_act_finish_is_caught_and_the_correct_queue_is_not(
        tmp_path: Path, user_queues: None, queue: str, valid: bool) -> None:  # fmt: skip
    run_dir, summary, recs = caught_run(tmp_path, f"user_mistakes:{queue}")
    assert summary["valid"] is valid, {k: v["valid"] for k, v in summary["invariants"].items()}
    if not valid:
        assert summary["invariants"]["no_stale_commit"]["valid"] is False
        frozen = {r["task"] for r in hits(recs) if r["op"] == "finish"}
        named = {ex["task"] for ex in summary["invariants"]["no_stale_commit"]["examples"]}
        assert named & frozen, (named, frozen)


def _frozen_run(tmp_path: Path) -> tuple[Path, subprocess.Popen]:
    """A long run of a check-then-act queue, with freezes inside calls often (the caller waits for one)."""
    from takeover._internal.options import FAULT_KINDS

    run_dir = tmp_path / "run"
    others = [a for kind in FAULT_KINDS if kind != KIND for a in (f"--{kind.replace('_', '-')}-rate", "0")]
    proc = start_takeover("stress", "--profile", "smoke", "--queue", "user_mistakes:CheckThenActFinish",
                          "--duration", "60", "--freeze-in-call-rate", "3", *others, "--out", str(run_dir))  # fmt: skip
    return run_dir, proc


def _stopped_itself(r: dict[str, Any]) -> bool:
    return r["f"] == "failpoint"


def _freeze_recorded(r: dict[str, Any]) -> bool:
    return r["f"] == "pause" and r.get("detail") == KIND and r["type"] == "invoke"


def test_ctrl_c_while_a_worker_is_frozen_inside_a_call_resumes_it_and_leaves_nothing(tmp_path: Path) -> None:
    run_dir, proc = _frozen_run(tmp_path)
    try:
        assert wait_for_record(run_dir, _stopped_itself), "no worker stopped itself inside a call"
        # the worker's own record comes first; Ctrl-C once the run has recorded the freeze it resumes
        assert wait_for_record(run_dir, _freeze_recorded), "the run never recorded the freeze"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        left = wait_no_stragglers(run_dir, timeout=15)
    finally:
        stop_and_reap(proc, run_dir)
    assert not left, [(p.pid, p.status(), p.cmdline()) for p in left]
    assert proc.returncode == 130 and "Traceback" not in err, out + err
    recs = records(run_dir)
    freezes = [r for r in recs if r["f"] == "pause" and r.get("detail") == KIND]
    assert freezes and [r["type"] for r in freezes].count("invoke") == [r["type"] for r in freezes].count("ok")
    windows = [r for r in recs if r["f"] == KIND]
    assert [r["type"] for r in windows].count("invoke") == [r["type"] for r in windows].count("ok")


def test_sigkill_of_the_coordinator_while_a_worker_is_frozen_inside_a_call_leaves_nothing(tmp_path: Path) -> None:
    run_dir, proc = _frozen_run(tmp_path)
    try:
        assert wait_for_record(run_dir, _stopped_itself), "no worker stopped itself inside a call"
        proc.send_signal(signal.SIGKILL)  # the coordinator only: a stopped worker must go with it
        proc.communicate(timeout=30)
        left = wait_no_stragglers(run_dir, timeout=15)
        assert not left, [(p.pid, p.status(), p.cmdline()) for p in left]
    finally:
        stop_and_reap(proc, run_dir)


@pytest.mark.needs_package("postgresql")
def test_the_hook_sees_a_postgres_queues_statements_through_psycopg(tmp_path: Path) -> None:
    """The PostgreSQL reference queue on a private server: its statements reach the hook through the cursor
    class set on its connection, and a trap stops before its finish's UPDATE with the row still running."""
    from takeover._internal import db
    from takeover._internal.failpoints import Point, StatementHook
    from takeover.queues.postgres_lease import PostgresLeaseQueue

    with db.run_database("postgres", tmp_path) as url:
        hook = StatementHook()
        with hook.watching():
            queue = PostgresLeaseQueue(url)
        other = PostgresLeaseQueue(url)  # another process's view: not watched
        try:
            queue.register("t000001", 0.0)
            with hook.call("claim"):
                claimed = queue.claim("w1", 1.0, 10.0)
            assert claimed is not None and hook.counts["claim"] >= 1
            seen: list[tuple[Point, str]] = []

            def action(point: Point) -> bool:
                seen.append((point, str(other.snapshot()[0][1])))
                return True

            hook.arm("finish", 1, action)
            with hook.call("finish"):
                assert queue.finish(claimed[0], claimed[1], "done", 2.0) is True
            (point, state), = seen
            assert point.op == "finish" and point.sql.lstrip().upper().startswith("UPDATE"), point
            assert state == "running" and not point.locked
            assert str(other.snapshot()[0][1]) == "done"
        finally:
            queue.close()
            other.close()


WATCHED_IN_A_FRESH_PROCESS = """
import sys
from takeover._internal.failpoints import StatementHook
from takeover.queues.postgres_lease import PostgresLeaseQueue

hook = StatementHook()
with hook.watching():
    assert "psycopg" not in sys.modules, "the hook imported psycopg before any queue asked for it"
    queue = PostgresLeaseQueue(sys.argv[1])  # imports psycopg as it opens: a worker of a PostgreSQL run
queue.register("t000001", 0.0)
with hook.call("claim"):
    assert queue.claim("w1", 1.0, 10.0) is not None
queue.close()
print(hook.counts["claim"])
"""


@pytest.mark.needs_package("postgresql")
def test_a_queue_that_imports_psycopg_while_watched_is_watched(tmp_path: Path) -> None:
    """The hook leaves psycopg unimported (a SQLite run's worker never pays for it), and a queue that imports
    it while the hook watches still has its connection watched: its claim's statements reach the hook."""
    from takeover._internal import db

    with db.run_database("postgres", tmp_path) as url:
        done = subprocess.run([sys.executable, "-c", WATCHED_IN_A_FRESH_PROCESS, url],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 1, done.stdout
