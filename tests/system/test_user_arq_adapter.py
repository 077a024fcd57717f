"""An arq adapter written apart from the project, from docs/adapters.md alone
(tests/fixtures/queues/user_arq_adapter.py), works with ``--db redis`` as takeover is: the contract calls
as arq's worker makes them, on a real redis-server, and the scenarios run to the departures the fixture's
docstring explains. The fixture runs unchanged in arq's own environment, .venv-arq (``make arq``; arq 0.28.0
requires redis-py < 6, takeover's environment has 8), served over the JSON-lines protocol by
adapters/py/serve.py: the class ``--queue user_arq_adapter:ArqAdapter`` would load, with nothing of takeover
beside it. (Before .venv-arq it was run in takeover's environment with arq installed over it: these tests
passed with redis-py 5.3.1 and with 8.1 installed over arq's pin.)

When it was written (load 4-16 on 2 cores): ``stress --db redis --seed 1`` INVALID, no_stale_commit and
finish_within_lease among the violations (arq completes a job by id alone), with and without
``--db-restart-rate 0.05 --conn-kill-rate 0.2 --db-pause-rate 0.05`` (seeds 1 and 2, redis-py 5.3.1 and 8.1);
state_matches_history broke only as ``stale_overwrite`` (a stale finish writing its outcome over the next
holder's, as arq's finish_job does: 6, 1 and 0 times in those runs), never as a misread snapshot. explore
--seed 1 departs after 0.35 s: a finish after the lease ran out, accepted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeover._internal import db
from takeover._internal.bridge import ExecFactory
from tests.helpers import arq_env
from tests.helpers.processes import takeover

pytestmark = [pytest.mark.needs_package("redis-server"), pytest.mark.timeout(120)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "queues" / "user_arq_adapter.py"
QUEUE = arq_env.served(FIXTURE, "ArqAdapter")


@pytest.fixture(scope="module")
def host() -> Iterator[db.Host]:
    """One private redis-server for the module; every test here needs .venv-arq (skips or, in CI, fails)."""
    arq_env.require()
    with db.serve("redis") as served:
        yield served


def test_a_paused_holders_completion_is_accepted_after_the_ttl_handed_the_job_on(host: db.Host, tmp_path: Path) -> None:
    """On the wall clock, as in a stress run: the in-progress key's TTL runs out on the server, another
    worker starts the job, and the first worker's finish_job (by id alone) still completes it."""
    with host.database(tmp_path, "arq") as url:
        factory = ExecFactory(QUEUE)
        a, b = factory(url), factory(url)
        try:
            arq_env.a_holds_t1(a, b, QUEUE)
            time.sleep(1.2)  # past the key's TTL, on the server's clock
            later = time.time()
            assert b.claim("B", later, 30.0) == ("t1", 2, later + 30.0)
            assert a.finish("t1", 1, "done", time.time()) is True  # the stale holder's completion
            assert b.snapshot() == [("t1", "done", 2, None)]
            assert b.finish("t1", 2, "done", time.time()) is True  # and the holder's own, "again"
        finally:
            a.close()
            b.close()


def test_the_scenarios_run_and_depart_only_where_the_servers_clock_holds_the_lease(tmp_path: Path) -> None:
    arq_env.require()
    result = takeover("scenarios", "--db", "redis", "--queue", QUEUE, cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "10 of 34 steps differ from the spec (S2, S3, S5)" in result.stdout
    for scenario, step in (("S2", 5), ("S3", 5), ("S5", 6)):
        assert f"{scenario} step {step} (t=31 B claim): returns: expected 2, got None" in result.stdout
