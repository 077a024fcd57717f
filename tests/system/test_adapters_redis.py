"""RQ, Celery (kombu's Redis transport), Huey, taskiq-redis and SAQ behind the contract, on a private redis-server.

One smoke test per library in the gate: the contract calls as two worker processes make them (two
adapter objects), through a takeover and a stale holder's completion, asserting what the library's
page (docs/analyses/rq.md, celery.md, huey.md, taskiq_redis.md, saq.md) says each call answers. The findings
themselves are held by tests/system/test_analyses.py; a short stress run per adapter is nightly.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeover._internal import db
from takeover._internal.replay.judge import judge
from takeover._internal.scenario.file import load_scenario_file
from takeover._internal.scenario.replay import run_scenarios
from takeover.contract import check_queue_object, has_extension
from tests.helpers.processes import REPO, takeover

pytestmark = [pytest.mark.needs_package("redis-server")]

ANALYSES = REPO / "docs" / "analyses"


def adapter(library: str, name: str) -> Any:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is an optional extra: pip install '.[{library}]'")
    return getattr(importlib.import_module(f"takeover.adapters.{library}"), name)


@pytest.fixture(scope="module")
def host() -> Iterator[db.Host]:
    """One private redis-server for the module; each test gets empty databases on it."""
    with db.serve("redis") as served:
        yield served


@pytest.mark.parametrize("library, name", [("rq", "RQRetryAdapter"), ("celery", "CeleryAcksLateAdapter")])
def test_takeover_and_the_stale_holder_as_each_library_does_it(
    library: str, name: str, host: db.Host, tmp_path: Path
) -> None:
    cls = adapter(library, name)
    assert cls.databases == ("redis",)
    with host.database(tmp_path, library) as url:
        a, b = cls(url), cls(url)  # two processes' worth: each opens its own connections
        try:
            check_queue_object(a, library)
            assert has_extension(a, "register_many")
            assert has_extension(a, "extend") == (library == "rq")  # Celery has no heartbeat for a task
            a.register_many(["t1"], 100.0)
            a.register("t1", 100.5)  # registering again changes nothing
            assert b.snapshot() == [("t1", "pending", 0, None)]

            first = a.claim("A", 101.0, 30.0)
            assert first == ("t1", 1, pytest.approx(131.0, abs=0.5))
            assert b.claim("B", 102.0, 30.0) is None  # held
            # Past A's lease a worker's sweep takes it back: a new worker's (RQ runs maintenance on a
            # worker's first turn, then every 600 s: B's was at t=102).
            second = b.claim("C", 132.0, 30.0)
            assert second is not None and second[:2] == ("t1", 2)
            assert a.snapshot() == [("t1", "running", 2, pytest.approx(162.0, abs=0.5))]
            # The stale holder's completion is accepted: nothing in either library checks the holder.
            assert a.finish("t1", 1, "done", 133.0) is True
            assert b.snapshot() == [("t1", "done", 2, None)]
        finally:
            a.close()
            b.close()


def test_huey_pops_a_task_and_never_hands_it_out_again(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/huey.md: no lease, no acknowledgement; a popped task is Huey's nowhere."""
    cls = adapter("huey", "HueyAdapter")
    with host.database(tmp_path, "huey") as url:
        a, b = cls(url), cls(url)
        try:
            check_queue_object(a, "huey")
            assert not has_extension(a, "extend")
            a.register_many(["t1"], 0.0)
            a.register("t1", 0.5)  # registering again changes nothing
            assert b.claim("A", 1.0, 30.0) == ("t1", 1, 31.0)
            assert a.snapshot() == [("t1", "running", 1, 31.0)]
            assert a.claim("B", 40.0, 30.0) is None  # past the lease: nothing brings it back
            assert a.finish("t1", 2, "done", 41.0) is False  # never handed out: no call
            assert b.finish("t1", 1, "uncertain", 42.0) is True
            assert a.snapshot() == [("t1", "uncertain", 1, None)]
        finally:
            a.close()
            b.close()


def test_taskiq_reclaims_only_after_a_new_message_and_accepts_the_stale_ack(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/taskiq_redis.md, findings 1 and 2 (two tasks: the second message is what lets a
    worker's turn reach XAUTOCLAIM on 1.2.4)."""
    cls = adapter("taskiq_redis", "TaskiqStreamAdapter")
    with host.database(tmp_path, "taskiq") as url:
        a, b = cls(url), cls(url)
        try:
            check_queue_object(a, "taskiq_redis")
            assert not has_extension(a, "extend")  # no heartbeat: idle time restarts only on a delivery
            settings = cls.library_settings(30.0, 10.0)  # takeover tune's answer, in taskiq-redis's names
            assert settings[0].startswith("RedisStreamBroker(idle_timeout=30000)") and "no counterpart" in settings[-1]
            a.register_many(["t1"], 0.0)
            a.register("t1", 0.5)  # registering again changes nothing
            assert b.snapshot() == [("t1", "pending", 0, None)]
            assert a.claim("A", 1.0, 30.0) == ("t1", 1, 31.0)
            assert b.claim("B", 2.0, 30.0) is None  # held
            assert b.claim("B", 32.0, 30.0) is None  # finding 1: idle past idle_timeout, no new message
            a.register("t2", 33.0)
            assert b.claim("B", 34.0, 30.0) == ("t2", 1, 64.0)  # the new message; the same turn reclaims t1
            assert b.claim("B", 35.0, 30.0) == ("t1", 2, 64.0)  # B's prefetch: its lease counts from the fetch
            assert a.finish("t1", 1, "done", 36.0) is True  # finding 2: A's stale XACK, by message id
            assert ("t1", "done", 2, None) in b.snapshot()
            assert b.finish("t1", 2, "done", 37.0) is True
            assert a.finish("t2", 2, "done", 38.0) is False  # never handed out: no call
        finally:
            a.close()
            b.close()


def test_taskiq_runs_a_prefetched_message_another_worker_reclaimed(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/taskiq_redis.md, "A prefetched message reclaimed while it waits": a message a turn
    fetched waits in its worker's prefetch while its idle time runs; past idle_timeout another worker's
    turn reclaims it and runs it, and the first worker then hands out its copy anyway, its lease over."""
    cls = adapter("taskiq_redis", "TaskiqStreamAdapter")
    with host.database(tmp_path, "taskiq-prefetch") as url:
        a, b, c = cls(url), cls(url), cls(url)
        try:
            a.register_many(["t1"], 0.0)
            assert a.claim("A", 1.0, 30.0) == ("t1", 1, 31.0)  # A dies with it
            a.register("t2", 33.0)
            assert b.claim("B", 34.0, 30.0) == ("t2", 1, 64.0)  # the same turn reclaims t1 into B's prefetch
            a.register("t3", 65.0)  # B is still at t2, past t1's idle_timeout
            assert c.claim("C", 66.0, 30.0) == ("t3", 1, 96.0)  # C's turn reclaims t1 from B's name
            assert c.claim("C", 67.0, 30.0) == ("t1", 2, 96.0)
            assert b.claim("B", 68.0, 30.0) == ("t1", 3, 64.0)  # B's prefetched copy: lease over, C's live
            assert ("t1", "running", 3, 64.0) in c.snapshot()  # the adapter records B's hand-out last
            assert c.finish("t1", 2, "done", 69.0) is True
            assert b.finish("t1", 3, "done", 70.0) is True  # both runs complete: the task ran twice
        finally:
            a.close()
            b.close()
            c.close()


def test_taskiq_acked_on_receipt_is_never_reclaimed(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/taskiq_redis.md, finding 3: with ack_type=when_received the entry leaves the
    pending-entries list at the hand-out; a turn that reaches XAUTOCLAIM (a new message) finds nothing."""
    cls = adapter("taskiq_redis", "TaskiqAckOnReceiveAdapter")
    with host.database(tmp_path, "taskiq-received") as url:
        a, b = cls(url), cls(url)
        try:
            a.register_many(["t1"], 0.0)
            assert a.claim("A", 1.0, 30.0) == ("t1", 1, 31.0)
            assert b.snapshot() == [("t1", "running", 1, 31.0)]  # held by nothing in Redis but A's memory
            a.register("t2", 33.0)
            assert b.claim("B", 34.0, 30.0) == ("t2", 1, 64.0)  # this turn ran XAUTOCLAIM: t1 was not pending
            assert b.claim("B", 35.0, 30.0) is None
        finally:
            a.close()
            b.close()


def test_saq_sweeps_a_silent_job_and_its_first_holder_still_beats_and_completes(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/saq.md, the smoke test: SAQ's safer settings (heartbeat, retries, a sweep every lease).
    A stops beating; B's sweep, once its timer and the shared lock allow, re-enqueues the job and B takes
    it; A's heartbeat and completion are still accepted (the abort A would see was overwritten)."""
    cls = adapter("saq", "SAQHeartbeatAdapter")
    assert cls.databases == ("redis",)
    settings = cls.library_settings(30.0, 10.0)  # takeover tune's answer, in SAQ's names
    assert "heartbeat=30" in settings[0] and "update() every 10 s" in settings[1]
    with host.database(tmp_path, "saq") as url:
        a, b = cls(url), cls(url)  # two processes' worth: each its own connections and event loop
        try:
            check_queue_object(a, "saq")
            assert has_extension(a, "register_many") and has_extension(a, "extend")
            a.register_many(["t1"], 0.0)
            a.register("t1", 0.5)  # registering again changes nothing (the key is incomplete)
            assert b.snapshot() == [("t1", "pending", 0, None)]
            assert a.claim("A", 1.0, 30.0) == ("t1", 1, pytest.approx(31.0))  # A's first sweep: lock to t=31
            assert a.extend("t1", 1, 10.0, 30.0) == pytest.approx(40.0)  # job.update(): touched
            assert b.claim("B", 11.0, 30.0) is None  # B's first sweep is locked out; the job is held anyway
            assert b.claim("B", 30.0, 30.0) is None  # B's sweep timer: every 10 SAQ-s, 30 s here
            second = b.claim("B", 41.0, 30.0)  # swept (touched at 10 + 30 < 41), retried, taken
            assert second == ("t1", 2, pytest.approx(71.0))
            assert a.extend("t1", 1, 42.0, 30.0) == pytest.approx(72.0)  # the stale holder's heartbeat: accepted
            assert a.finish("t1", 1, "done", 43.0) is True  # and its completion
            assert b.snapshot() == [("t1", "done", 2, None)]
            assert a.finish("t1", 3, "done", 44.0) is False  # never handed out: no call
        finally:
            a.close()
            b.close()


def test_saq_sweeps_a_job_between_its_dequeue_and_its_start_and_two_workers_run_it(
    host: db.Host, tmp_path: Path
) -> None:
    """docs/analyses/saq.md, the finding of saq #277: another worker's sweep lands between A's dequeue
    (``BLMOVE`` onto the active list) and A's ``job.update(status=ACTIVE)``: a job on the active list
    whose status is still ``queued`` is swept, re-enqueued (retries left) and taken by that worker; A then
    starts it too. Two holders at once, and both completions accepted."""
    cls = adapter("saq", "SAQRetryAdapter")
    with host.database(tmp_path, "saq-277") as url:
        a, w = cls(url), cls(url)
        try:
            assert w.claim("W", 0.0, 30.0) is None  # W's first sweep takes the lock (180 s here) and its timer
            a.register("t1", 1.0)
            job = a._dequeue("A", 179.0, 30.0)  # A's first sweep is locked out; BLMOVE: t1 on the active list
            assert job is not None and job.key == "t1"
            assert w.claim("W", 181.0, 30.0) == ("t1", 1, pytest.approx(211.0))  # swept as "queued", retried
            assert a._start("A", job, 182.0, 30.0) == ("t1", 2, pytest.approx(212.0))  # A starts it as well
            assert a.snapshot() == [("t1", "running", 2, pytest.approx(212.0))]
            assert w.finish("t1", 1, "done", 183.0) is True
            assert a.finish("t1", 2, "done", 184.0) is True  # the job ran, and completed, twice at once
        finally:
            a.close()
            w.close()


def test_saq_runs_again_a_job_completed_late_while_re_enqueued(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/saq.md, finding 8 (two jobs, so no one-task scenario file shows it): the sweep re-enqueued
    A's silent job behind another; A then completes it (by id: accepted); its id is still on the queued list,
    and the next dequeue runs the complete job again."""
    cls = adapter("saq", "SAQHeartbeatAdapter")
    with host.database(tmp_path, "saq-rerun") as url:
        a, b = cls(url), cls(url)
        try:
            a.register_many(["t1", "t2"], 0.0)
            assert a.claim("A", 1.0, 30.0) == ("t1", 1, pytest.approx(31.0))
            assert b.claim("B", 41.0, 30.0) == ("t2", 1, pytest.approx(71.0))  # t1 swept, pushed behind t2
            assert a.finish("t1", 1, "done", 42.0) is True  # late, accepted
            assert ("t1", "done", 1, None) in a.snapshot()
            again = b.claim("C", 43.0, 30.0)
            assert again is not None and again[:2] == ("t1", 2)  # the complete job runs again
        finally:
            a.close()
            b.close()


def test_saq_a_sweeper_killed_in_its_abort_wait_leaves_the_job_aborting(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/saq.md: ``Queue.sweep`` first aborts a stuck job (status ``aborting``, off the active list),
    then waits up to 5 s for its holder to confirm; a sweeper killed in that wait leaves the job on no list of
    SAQ's, and every later sweep reads only the active list: nothing runs the job again."""
    cls = adapter("saq", "SAQRetryAdapter")
    with host.database(tmp_path, "saq-abort") as url:
        a, s, c = cls(url), cls(url), cls(url)
        try:
            a.register("t1", 0.0)
            assert a.claim("A", 0.0, 30.0) == ("t1", 1, pytest.approx(30.0))  # then A stops
            with s.clock.at(181.0, 30.0):  # the sweeper's first step on A's stuck job, then it is killed
                s._run(s.queue.abort(s._run(s.queue.job("t1")), error=s.queue.swept_error_message))
            assert c.snapshot() == [("t1", "running", 1, pytest.approx(30.0))]  # aborting: held by no one
            assert c.claim("C", 400.0, 30.0) is None  # C's sweeps (here, and 180 s later) find an empty active list
            assert c.claim("C", 600.0, 30.0) is None
        finally:
            for queue in (a, s, c):
                queue.close()


@pytest.mark.parametrize(
    "library, name",
    [
        ("rq", "RQAdapter"),
        ("celery", "CeleryAdapter"),
        ("huey", "HueyAdapter"),
        ("taskiq_redis", "TaskiqStreamAdapter"),
        ("saq", "SAQAdapter"),
    ],
)
def test_a_redis_adapter_refuses_another_database_in_one_line(library: str, name: str) -> None:
    with pytest.raises(Exception, match="needs a Redis database"):
        adapter(library, name)("/tmp/queue.sqlite")


def test_rq_3_no_longer_runs_a_finished_job_again(host: db.Host) -> None:
    """rq #2424's fix (3.0.0): after a stale completion, the cleanup of the current holder's expired
    entry leaves the finished job alone; 2.12.0 hands it out a third time (docs/analyses/rq.md)."""
    adapter("rq", "RQRetryAdapter")
    doc = load_scenario_file(ANALYSES / "rq" / "stale-completion.json")
    [result] = run_scenarios(doc["queue"], doc=doc)
    outcome = judge(result, float(doc["lease_seconds"]))
    step5 = [d for d in outcome.departures if d.index == 5]
    assert not any("no_reclaim_after_terminal" in d.invariants for d in step5), step5
    assert result.steps[4].observed["returns"] is None  # C's claim: the finished job is not handed out


def test_rq_runs_again_a_job_completed_late_while_requeued(host: db.Host, tmp_path: Path) -> None:
    """docs/analyses/rq.md, finding 4 (two tasks, so no one-task scenario file shows it): the cleanup
    retried A's expired job behind another; A then completes it; the queued copy is handed out again."""
    cls = adapter("rq", "RQRetryAdapter")
    with host.database(tmp_path, "rq-rerun") as url:
        a, b = cls(url), cls(url)
        try:
            a.register_many(["t1", "t2"], 0.0)
            assert a.claim("A", 0.0, 30.0) == ("t1", 1, pytest.approx(30.0, abs=0.5))
            assert b.claim("B", 31.0, 30.0) == ("t2", 1, pytest.approx(61.0, abs=0.5))  # t1 requeued behind t2
            assert a.finish("t1", 1, "done", 32.0) is True  # late, accepted
            assert ("t1", "done", 1, None) in a.snapshot()
            again = b.claim("C", 33.0, 30.0)
            assert again is not None and again[:2] == ("t1", 2)  # the finished job runs again
        finally:
            a.close()
            b.close()


@pytest.mark.nightly
@pytest.mark.parametrize(
    "queue",
    [
        "takeover.adapters.rq:RQRetryAdapter",
        "takeover.adapters.celery:CeleryAcksLateAdapter",
        "takeover.adapters.taskiq_redis:TaskiqStreamAdapter",
        "takeover.adapters.saq:SAQHeartbeatAdapter",
    ],
)
def test_a_short_stress_run_checks_every_invariant(queue: str, tmp_path: Path) -> None:
    adapter(queue.split(".")[2].split(":")[0], queue.split(":")[1])
    out = tmp_path / "run"
    proc = takeover("stress", "--db", "redis", "--queue", queue, "--profile", "smoke", "--duration", "6",
                    "--seed", "1", "--out", str(out), timeout=600)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["invariants"], "no invariant was checked"
    assert summary.get("tasks", summary.get("task_count", 1)), summary.keys()
