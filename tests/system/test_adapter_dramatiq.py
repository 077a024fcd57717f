"""Dramatiq's RedisBroker behind the contract, on a private redis-server (docs/analyses/dramatiq.md).

The gate holds one smoke test: the contract calls as two worker processes make them (two adapter
objects), through a takeover and a stale holder's ack, asserting what the page says each call answers.
The findings themselves are held by tests/system/test_analyses.py; a short stress run is nightly.
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
from takeover.contract import check_queue_object, has_extension
from tests.helpers.processes import takeover

pytestmark = [pytest.mark.needs_package("redis-server")]


def adapter(name: str) -> Any:
    if importlib.util.find_spec("dramatiq") is None:
        pytest.skip("dramatiq is an optional extra: pip install '.[dramatiq]'")
    return getattr(importlib.import_module("takeover.adapters.dramatiq"), name)


@pytest.fixture(scope="module")
def host() -> Iterator[db.Host]:
    with db.serve("redis") as served:
        yield served


def test_dramatiq_requeues_a_dead_workers_message_and_ignores_its_late_ack(host: db.Host, tmp_path: Path) -> None:
    """Both settings in one database each: the default's maintenance (1 command in 1000) does not come at
    the takeover; with it on every command the message comes back, and the first worker's ack, by its own
    ack set, no longer acts."""
    default, always = adapter("DramatiqAdapter"), adapter("DramatiqMaintainAlwaysAdapter")
    assert default.databases == always.databases == ("redis",)
    with pytest.raises(Exception, match="needs a Redis database"):
        default("/tmp/queue.sqlite")
    settings = default.library_settings(90.0, 10.0)  # takeover tune's answer, in Dramatiq's names
    assert settings[0].startswith("RedisBroker(heartbeat_timeout=90000)")
    assert "maintenance_chance=1000000" in settings[1] and "worker_timeout=10000" in settings[2]
    assert not any("maintenance_chance" in line for line in always.library_settings(90.0, None))

    with host.database(tmp_path, "dramatiq-default") as url:
        a, b = default(url), default(url)
        try:
            a.register_many(["t1"], 100.0)
            assert a.claim("A", 101.0, 30.0) == ("t1", 1, 131.0)
            assert b.claim("C", 132.0, 30.0) is None  # A is dead, but no maintenance was drawn
            assert b.snapshot() == [("t1", "running", 1, 131.0)]  # still in A's ack set, A's last beat + 30
        finally:
            a.close()
            b.close()

    with host.database(tmp_path, "dramatiq-always") as url:
        a, b = always(url), always(url)  # two processes' worth: each its own brokers and connections
        try:
            check_queue_object(a, "dramatiq")
            assert has_extension(a, "register_many") and has_extension(a, "extend")
            a.register_many(["t1"], 100.0)
            a.register("t1", 100.5)  # registering again changes nothing
            assert b.snapshot() == [("t1", "pending", 0, None)]

            assert a.claim("A", 101.0, 30.0) == ("t1", 1, 131.0)
            assert b.claim("B", 102.0, 30.0) is None  # held: A's heartbeat is 29 s old at most
            assert a.extend("t1", 1, 110.0, 30.0) == 140.0  # the delay-queue poll: A beats, for all it holds
            assert b.claim("B", 139.0, 30.0) is None
            second = b.claim("C", 140.0, 30.0)  # A's last beat 30 s ago: dead at the boundary
            assert second == ("t1", 2, 170.0)
            assert a.snapshot() == [("t1", "running", 2, 170.0)]
            # A is not told (dramatiq #692): its heartbeat, per worker, goes on for the message C now runs.
            assert a.extend("t1", 1, 140.5, 30.0) == 170.5
            # A's ack: its ack set was requeued and deleted, so SREM finds nothing and the script does nothing.
            assert a.finish("t1", 1, "done", 141.0) is False
            assert a.extend("t1", 2, 142.0, 30.0) is None  # never held by this process
            assert b.snapshot() == [("t1", "running", 2, 170.0)]
            assert b.finish("t1", 2, "uncertain", 143.0) is True  # nack: dead-lettered
            assert a.snapshot() == [("t1", "uncertain", 2, None)]
            assert b.claim("B", 200.0, 30.0) is None
        finally:
            a.close()
            b.close()


@pytest.mark.nightly
@pytest.mark.parametrize("name", ["DramatiqAdapter", "DramatiqMaintainAlwaysAdapter"])
def test_a_short_dramatiq_stress_run_checks_every_invariant(name: str, tmp_path: Path) -> None:
    adapter(name)
    out = tmp_path / "run"
    proc = takeover("stress", "--db", "redis", "--queue", f"takeover.adapters.dramatiq:{name}", "--profile", "smoke",
                    "--duration", "6", "--seed", "1", "--out", str(out), timeout=600)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["invariants"], "no invariant was checked"
