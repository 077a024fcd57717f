"""A Redis queue written apart from the project, from the user docs alone (tests/fixtures/queues/
user_redis_queue.py), keeps passing the spec's scenarios, and its unfenced twin keeps being caught: the
docs (docs/howto/redis.md, docs/reference/contract.md) suffice to write a queue takeover judges right.

When it was written (load 13-16 on 2 cores, redis-py 5.3.1): scenarios matched, ``explore --seed 1`` passed
(216 examples), ``stress --seed 1`` VALID, and VALID with ``--db-restart-rate 0.05 --conn-kill-rate 0.2
--db-pause-rate 0.05`` (1 restart, 3 connection kills, 1 pause hit). Those runs are too long for the gate:
the scenarios and explore are what the gate holds, the last test the stress runs (nightly; 69 s at load 4).
"""

from __future__ import annotations

import pytest

from tests.helpers.processes import takeover

pytestmark = [pytest.mark.needs_package("redis-server"), pytest.mark.timeout(180)]


def test_the_users_queue_matches_the_spec(tmp_path) -> None:
    result = takeover("scenarios", "--db", "redis", "--queue", "user_redis_queue:MyQueue", cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "All 5 scenario(s) match the spec (34 steps) on user_redis_queue:MyQueue." in result.stdout


def test_its_unfenced_twin_is_caught_by_the_scenarios_at_s3(tmp_path) -> None:
    result = takeover("scenarios", "--db", "redis", "--queue", "user_redis_queue:UnfencedQueue", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "S3 step 6 (t=32 A finish done (generation 1)): returns: expected False, got True" in result.stdout
    assert "2 of 34 steps differ from the spec (S3)" in result.stdout


def test_explore_passes_the_users_queue_and_catches_the_twin(tmp_path) -> None:
    explore = ("explore", "--db", "redis", "--seed", "1", "--queue")
    good = takeover(*explore, "user_redis_queue:MyQueue", "--examples", "60", cwd=tmp_path, timeout=150)
    assert good.returncode == 0, good.stdout[-2000:] + good.stderr[-2000:]
    assert "PASSED: every answer was the spec's." in good.stdout
    bad = takeover(*explore, "user_redis_queue:UnfencedQueue", cwd=tmp_path, timeout=150)
    assert bad.returncode == 1, bad.stdout[-2000:] + bad.stderr[-2000:]
    assert "DEPARTED from the spec: breaks finish_within_lease" in bad.stdout
    assert "the queue answered True; the spec says False" in bad.stdout


@pytest.mark.nightly
@pytest.mark.timeout(400)
def test_under_stress_with_the_servers_faults_the_queue_holds_and_the_twin_breaks(tmp_path) -> None:
    """What the user ran by hand when writing it: VALID under every server fault (restart, connection kill,
    freeze, lost replies); the twin's stale finishes caught by the default profile's 20 s (seed 1: at 10.9 s)."""
    faults = ("--db-restart-rate", "0.05", "--conn-kill-rate", "0.2", "--db-pause-rate", "0.05")
    stress = ("stress", "--db", "redis", "--seed", "1", "--queue")
    good = takeover(
        *stress, "user_redis_queue:MyQueue", *faults, "--db-lost-reply-rate", "0.3", cwd=tmp_path, timeout=300
    )
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-2000:]
    assert "VALID: " in good.stdout
    bad = takeover(*stress, "user_redis_queue:UnfencedQueue", cwd=tmp_path, timeout=300)
    assert bad.returncode == 1, bad.stdout[-3000:] + bad.stderr[-2000:]
    assert "no_stale_commit: VIOLATED" in bad.stdout
    assert "completion is not fenced by the generation (S3)" in bad.stdout
