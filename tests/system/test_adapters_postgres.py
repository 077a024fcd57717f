"""procrastinate, pgqueuer and chancy behind the contract, on a real PostgreSQL server.

Each library's departures from the contract are findings (docs/adapters.md), asserted here so that
a change in a library or an adapter shows up in the tests rather than silently in a stress report:
a stale holder's completion after a takeover (accepted by procrastinate and pgqueuer, refused by
chancy's claim id), a completion for a generation never handed out (accepted by procrastinate and
pgqueuer, which complete by job id alone; refused by chancy, which has no claim for it), and the
spec's scenarios S2 and S3, where all three depart.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from takeover._internal import db
from takeover._internal.scenario.replay import run_scenarios
from takeover.contract import check_queue_object, has_extension
from takeover.errors import ContractError

ADAPTERS = {
    "procrastinate": "ProcrastinateAdapter",
    "pgqueuer": "PgQueuerAdapter",
    "chancy": "ChancyAdapter",
}


def adapter_class(library: str) -> Any:
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is an optional extra: pip install '.[{library}]'")
    module = importlib.import_module(f"takeover.adapters.{library}")
    return getattr(module, ADAPTERS[library])


@pytest.fixture(scope="module")
def host() -> Iterator[db.PostgresHost]:
    """One private server (takeover._internal.db.server) for the module; each test gets fresh databases on it."""
    with db.serve("postgres") as served:
        assert isinstance(served, db.PostgresHost)
        yield served


@pytest.mark.parametrize("library", list(ADAPTERS))
def test_adapter_takes_postgres_only_and_says_so(library: str) -> None:
    cls = adapter_class(library)
    assert cls.databases == ("postgres",)
    with pytest.raises(ContractError, match="runs on PostgreSQL only"):
        cls("/tmp/queue.sqlite")


# What a stale holder's finish after a takeover returns, and what a finish for a generation that was
# never handed out returns, per library (the findings in docs/adapters.md).
STALE_FINISH = {"procrastinate": True, "pgqueuer": True, "chancy": False}
UNCLAIMED_FINISH = {"procrastinate": True, "pgqueuer": True, "chancy": False}


@pytest.mark.slow
@pytest.mark.needs_package("postgresql")
@pytest.mark.parametrize("library", list(ADAPTERS))
def test_takeover_and_the_stale_holder_as_each_library_does_it(
    library: str, host: db.PostgresHost, tmp_path: Path
) -> None:
    cls = adapter_class(library)
    with host.database(tmp_path, library) as url:
        a, b = cls(url), cls(url)  # two processes' worth: each opens its own connections
        try:
            check_queue_object(a, library)
            assert has_extension(a, "extend") and has_extension(a, "register_many")
            a.register_many(["t1", "t2"], 0.0)
            a.register("t1", 0.5)  # registering again changes nothing
            assert sorted(r[0] for r in b.snapshot()) == ["t1", "t2"]

            first = a.claim("A", 1.0, 30.0)
            assert first is not None and first[1] == 1 and first[2] == pytest.approx(31.0)
            assert b.claim("B", 2.0, 30.0) is not None  # the other task
            assert b.claim("B", 20.0, 30.0) is None  # A's worker was seen at t=1: still held
            # A goes silent; past its worker's (procrastinate, chancy) or job's (pgqueuer) heartbeat
            # timeout the next claim takes the job back: generation 2.
            task, generation, _ = first
            again = b.claim("B", 40.0, 30.0)
            assert again is not None and again[:2] == (task, 2)
            assert a.finish(task, generation, "done", 41.0) is STALE_FINISH[library]
            states = {row[0]: row[1:3] for row in b.snapshot()}
            assert states[task] == (("done", 2) if STALE_FINISH[library] else ("running", 2))

            other = next(t for t in ("t1", "t2") if t != task)
            assert a.finish(other, 2, "done", 42.0) is UNCLAIMED_FINISH[library]  # B holds generation 1
        finally:
            a.close()
            b.close()


# S2 and S3 hold every kind of departure the three libraries show in the scenarios (docs/adapters.md);
# S5 departs as S2 does, and S1 and S4 pass. Both depart first at step 5, the recovery one tick late
# at t=31, in all three.
FIRST_DEPARTURE = 5


@pytest.mark.slow
@pytest.mark.needs_package("postgresql")
@pytest.mark.parametrize("library", list(ADAPTERS))
def test_the_scenarios_on_postgres_depart_where_the_findings_say(library: str, host: db.PostgresHost) -> None:
    cls = adapter_class(library)
    spec = f"{cls.__module__}:{cls.__name__}"
    with db.serve(host.admin_url):
        results = {r.id: r for r in run_scenarios(spec, only=["S2", "S3"])}
    assert [r.failed_steps()[0].index for r in results.values()] == [FIRST_DEPARTURE, FIRST_DEPARTURE]
    stale = results["S3"].steps[5]  # A's finish of generation 1 at t=32, after its lease ran out at 31
    assert stale.ok is False and stale.observed.get("returns") is True, "no library checks the time at completion"
    unclaimed = results["S2"].steps[5]  # B's finish at t=35 of the task whose claim returned nothing
    assert unclaimed.observed.get("returns") is UNCLAIMED_FINISH[library]
