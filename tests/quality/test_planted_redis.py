"""The planted bugs on Redis (takeover.queues.planted_redis) are caught, fast, by what catches them elsewhere.

Each of the twelve carried over from the SQL references departs from the spec's scenarios exactly where its
SQLite namesake does (the same defect, the same steps), or, where the scenarios cannot reach it, explore
finds it on seed 1 by the namesake's invariant; the Redis idioms (a ``SET NX PX`` lock as the lease, a
reaper on the worker's clock) depart in the scenarios' takeovers. The claim built from separate commands
(NonAtomicClaim) shows only when two claims meet, in stress runs: the selftest's (``takeover selftest --db
redis``; its quick form here, every bug in the nightly run). RetriedClaim needs a lost reply inside a claim:
the selftest runs it with ``--db-lost-reply-rate 3`` (planted_redis.STRESS_ARGS), and
tests/system/test_redis_queue.py shows the double claim with a proxy that drops one answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeover._internal import db
from takeover._internal.explorer import explore_queue
from takeover._internal.scenario.replay import run_scenarios
from takeover.queues import planted, planted_redis

pytestmark = pytest.mark.needs_package("redis-server")

CARRIED = [name for name in planted_redis.PLANTED if name in planted.PLANTED]
# The carried bugs the spec's scenarios do not reach (as on SQLite), and the invariant explore catches each by.
EXPLORED = {"FinishIgnoresLease": "finish_within_lease", "IdempotentFinish": "single_finish",
            "FinishNotDurable": "state_matches_history", "DropsTasks": "no_lost_task",
            "RegisterReplaces": "state_matches_history"}  # fmt: skip


@pytest.fixture(scope="module")
def redis_host() -> Iterator[db.Host]:
    with db.serve("redis") as host:
        yield host


def _departures(queue: str) -> list[str]:
    return [r.id for r in run_scenarios(queue) if not r.ok]


def test_the_tables_name_every_planted_class_and_the_carried_ones_keep_their_namesakes_entries() -> None:
    assert set(planted_redis.PLANTED) == set(CARRIED) | {"LockAsLease", "ClientClockReaper", "RetriedClaim"}
    assert len(CARRIED) == len(planted.PLANTED)
    assert all(planted_redis.PLANTED[n] == planted.PLANTED[n] for n in CARRIED)
    assert set(planted_redis.NEEDS_CELLS) == set(planted_redis.PLANTED)
    assert set(planted_redis.STRESS_ARGS) <= set(planted_redis.PLANTED)
    assert all(isinstance(getattr(planted_redis, n), type) for n in planted_redis.PLANTED)


def test_each_carried_bug_departs_from_the_scenarios_where_its_sqlite_namesake_does(redis_host: db.Host) -> None:
    on_sqlite = {}
    with db.serve("sqlite"):
        for name in CARRIED:
            on_sqlite[name] = _departures(f"takeover.queues.planted:{name}")
    on_redis = {name: _departures(f"takeover.queues.planted_redis:{name}") for name in CARRIED}
    assert on_redis == on_sqlite
    assert {n for n, d in on_redis.items() if not d} == set(EXPLORED) | {"NonAtomicClaim"}


@pytest.mark.parametrize("name", ["LockAsLease", "ClientClockReaper"])
def test_the_redis_idioms_depart_in_the_scenarios_takeovers(redis_host: db.Host, name: str) -> None:
    """On the scenarios' logical clock a lock key never runs out (the server's clock barely moves) and the
    worker's clock is decades past every lease: the takeovers of S2, S3 and S5 go wrong."""
    assert _departures(f"takeover.queues.planted_redis:{name}") == ["S2", "S3", "S5"]
    assert _departures("takeover.queues.redis_lease:RedisLeaseQueue") == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(EXPLORED))
def test_explore_finds_the_carried_bugs_the_scenarios_miss(redis_host: db.Host, name: str, tmp_path: Path) -> None:
    # Finding the departure is what is tested, not shrinking it: a small shrink budget halves the time.
    result = explore_queue(f"takeover.queues.planted_redis:{name}", seed=1, out=tmp_path, shrink_budget=10)
    assert not result.ok
    departure = result.to_json()["departure"]
    assert EXPLORED[name] in departure["invariants"], departure


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_quick_selftest_on_redis_catches_its_bugs_and_passes_the_reference(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "takeover", "selftest", "--db", "redis", "--quick", "--seeds", "2",
                          "--json", "--keep", str(tmp_path)], capture_output=True, text=True, timeout=390)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert [row["queue"] for row in result["planted"]] == ["NoBumpOnTakeover", "StealsLiveLeases"]
    assert all(row["caught"] for row in result["planted"]), result["planted"]
    assert [r["valid"] for r in result["reference"]] == [True]
    config = json.loads(next(tmp_path.rglob("config.json")).read_text())
    assert config["queue"].startswith("takeover.queues.") and "redis" in config["queue"]


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_selftest_on_redis_catches_every_planted_bug(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "takeover", "selftest", "--db", "redis", "--json", "--keep",
                          str(tmp_path)], capture_output=True, text=True, timeout=3500)  # fmt: skip
    result = json.loads(out.stdout)
    missed = [row for row in result["planted"] if not row["caught"]]
    assert out.returncode == 0 and not missed, missed
    assert {row["queue"] for row in result["planted"]} == set(planted_redis.PLANTED)
    # the reaper on the worker's clock is run with the clock skew it needs, and only it
    for name, config in ((p.parent.name, json.loads(p.read_text())) for p in tmp_path.glob("*/config.json")):
        assert config.get("clock_skew_max", 0) == (0.5 if name.startswith("ClientClockReaper") else 0), name
        assert config.get("db_lost_reply_rate", 0) == (3 if name.startswith("RetriedClaim") else 0), name
