"""arq 0.28.0 through its official adapter (adapters/py/arq_adapter.py), in its own environment (.venv-arq,
``make arq``) over the JSON-lines protocol, on a real redis-server: the mechanisms docs/analyses/arq.md
names, each on the wall clock as in a stress run (the in-progress key's TTL runs out on the server).

The gate holds one (a frozen holder, about 2 s of leases); the others, the scenarios and a stress run are nightly.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeover._internal import db
from takeover._internal.bridge import ExecFactory, ExecQueue
from takeover.scenario_file import load_scenario_file
from takeover.scenario_replay import run_scenarios
from tests.helpers import arq_env
from tests.helpers.processes import takeover

ANALYSES = arq_env.ROOT / "docs" / "analyses"

pytestmark = [pytest.mark.needs_package("redis-server"), pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def host() -> Iterator[db.Host]:
    """One private redis-server for the module; every test here needs .venv-arq (skips or, in CI, fails)."""
    arq_env.require()
    with db.serve("redis") as served:
        yield served


def _open(url: str, n: int, *args: str) -> list[ExecQueue]:
    factory = ExecFactory(arq_env.queue(*args))
    return [factory(url) for _ in range(n)]


def test_a_holder_frozen_past_its_lease_fails_on_waking_the_job_its_successor_runs(
    host: db.Host, tmp_path: Path
) -> None:
    """The in-progress key runs out on the server while A is frozen (SIGSTOP, as a run's freeze), B starts the
    job again (try 2); on waking, A's own job timeout fires and arq's ``finish_job`` fails the job by its id
    alone, under B, which then completes it anyway."""
    with host.database(tmp_path, "arq") as url:
        a, b = _open(url, 2)
        try:
            arq_env.a_holds_t1(a, b, arq_env.QUEUE)
            os.kill(a.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(1.3)  # past the key's TTL, on the server's clock
                later = time.time()
                assert b.claim("B", later, 30.0) == ("t1", 2, later + 30.0)
            finally:
                os.kill(a.proc.pid, signal.SIGCONT)
            time.sleep(0.5)  # A's event loop wakes: its job timeout (0.97 s) is long past
            assert b.snapshot() == [("t1", "uncertain", 2, None)]  # failed by A's timeout, while B runs it
            assert a.finish("t1", 1, "done", time.time()) is False  # A's run was cancelled by its timeout
            assert b.finish("t1", 2, "done", time.time()) is True
            assert a.snapshot() == [("t1", "done", 2, None)]
        finally:
            a.close()
            b.close()


@pytest.mark.nightly
def test_a_live_holder_past_its_job_timeout_fails_the_job_for_good(host: db.Host, tmp_path: Path) -> None:
    """arq cancels a job at job_timeout (300/310 of the lease by default) and does not retry a TimeoutError:
    the job is failed, not handed to the next worker when the key runs out; the holder's finish is refused."""
    with host.database(tmp_path, "arq") as url:
        a, b = _open(url, 2)
        try:
            now = time.time()
            a.register("t1", now)
            assert a.claim("A", now, 0.5) == ("t1", 1, now + 0.5)
            time.sleep(0.8)
            assert b.claim("B", time.time(), 0.5) is None
            assert b.snapshot() == [("t1", "uncertain", 1, None)]
            assert a.finish("t1", 1, "done", time.time()) is False
        finally:
            a.close()
            b.close()


@pytest.mark.nightly
def test_a_job_whose_holders_died_max_tries_times_is_failed_at_the_next_start(host: db.Host, tmp_path: Path) -> None:
    """Each holder is killed (SIGKILL: no timeout fires, nothing is released); the key runs out and the next
    worker starts the job again, try after try, until arq's ``max_tries`` (--max-tries 2 here; 5 by default)
    fails it instead of starting it."""
    with host.database(tmp_path, "arq") as url:
        [setup] = _open(url, 1, "--max-tries", "2")
        try:
            setup.register("t1", time.time())
            for generation in (1, 2):
                [holder] = _open(url, 1, "--max-tries", "2")
                now = time.time()
                assert holder.claim("W", now, 0.3) == ("t1", generation, now + 0.3)
                holder.proc.kill()
                holder.proc.wait()
                holder.close()
                time.sleep(0.45)
            assert setup.claim("W", time.time(), 0.3) is None  # try 3 > max_tries: failed, not started
            assert setup.snapshot() == [("t1", "uncertain", 2, None)]
        finally:
            setup.close()


@pytest.mark.nightly
def test_the_spec_scenarios_match_on_the_paced_clock(tmp_path: Path) -> None:
    """On the paced clock (0.1 real s per scenario second) arq keeps every step of S1-S5: A's worker exits (a
    crash: its timeout never fires) before its key runs out, and a stale finish comes from a process that has
    no such run (docs/analyses/arq.md, "The spec's scenarios")."""
    arq_env.require()
    result = takeover("scenarios", "--db", "redis", "--queue", arq_env.queue(), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "All 5 scenario(s) match the spec (34 steps)" in result.stdout


@pytest.mark.nightly
@pytest.mark.timeout(600)
def test_a_stress_run_judges_arq_and_never_the_adapter(tmp_path: Path) -> None:
    """A smoke stress run through the bridge: a verdict on arq (exit 0 or 1), never INCONCLUSIVE (exit 3: the
    adapter broke the protocol or died), every invariant checked and every answer well formed."""
    arq_env.require()
    out = tmp_path / "run"
    proc = takeover("stress", "--db", "redis", "--queue", arq_env.queue(), "--profile", "smoke", "--duration", "6",
                    "--seed", "1", "--out", str(out), cwd=tmp_path, timeout=540)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["invariants"]) >= {"no_stale_commit", "lease_exclusive", "state_matches_history"}
    assert summary["invariants"].get("answers_well_formed", {"valid": True})["valid"], summary["invariants"]


@pytest.mark.nightly
def test_with_max_tries_raised_a_job_whose_workers_died_five_times_runs_again(host: db.Host) -> None:
    """The other side of arq.md's finding 2: with ``max_tries`` raised (the page's second spec string) the same
    scenario file matches the spec in every step: the sixth start runs the job."""
    doc = load_scenario_file(ANALYSES / "arq" / "max-tries-fails-a-job-whose-workers-died.json")
    [result] = run_scenarios(arq_env.queue("--max-tries", "100"), doc=doc)
    assert len(result.steps) == 12
    assert result.ok, f"departs at steps {[s.index for s in result.failed_steps()]}"
