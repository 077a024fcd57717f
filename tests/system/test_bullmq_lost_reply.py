"""BullMQ's claim when the server's answer to it is lost (docs/analyses/bullmq.md, finding 4, "a claim resent
after a lost reply takes a second job"): ioredis resends a command whose reply never came once it has reconnected (its
``autoResendUnfulfilledCommands``, on by default; the adapter's client has ``maxRetriesPerRequest: null``).
``moveToActive`` is not safe to run twice: its first run took a job and locked it with the worker's token, the
resend takes the next job with the same token, and the claim answers that one. The first job stays active,
its ``attemptsStarted`` raised, under a lock no worker renews, until BullMQ's stalled checker takes it back.

The proxy is tests/system/test_redis_queue.py's: it lets the marked request reach the server and closes the
client's connection instead of passing the answer back, as ``--db-lost-reply-rate`` does in a stress run.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from takeover._internal import db
from takeover.contract import open_queue
from tests.system.test_redis_queue import LosingProxy

pytestmark = [pytest.mark.needs_package("nodejs", "npm", "redis-server"), pytest.mark.needs_node_for("bullmq.js")]

BULLMQ = "exec:node adapters/js/bullmq.js"
# moveToActive's request, as ioredis writes it: the script's 11 keys, the first two BullMQ's wait and active
# lists (moveToFinished has 14 keys, the stalled checker's script begins with the stalled set).
MOVE_TO_ACTIVE = b"\r\n$2\r\n11\r\n$18\r\nbull:takeover:wait\r\n$20\r\nbull:takeover:active\r\n"


@pytest.fixture
def lossy(tmp_path: Path) -> Iterator[tuple[str, LosingProxy]]:
    with db.serve("redis") as host, host.database(tmp_path, "test") as url:
        host_port, database = url.removeprefix("redis://").split("/")
        proxy = LosingProxy(int(host_port.rsplit(":", 1)[1]), marker=MOVE_TO_ACTIVE)
        yield f"redis://127.0.0.1:{proxy.port}/{database}", proxy
        proxy.close()


def test_a_move_to_active_whose_reply_was_lost_is_resent_and_takes_a_second_job(
        lossy: tuple[str, LosingProxy]) -> None:  # fmt: skip
    through, proxy = lossy
    q = open_queue(BULLMQ, through)
    try:
        q.register_many(["a", "b", "c"], 0.0)  # type: ignore[attr-defined]
        now = time.time()
        first = q.claim("w", now, 30.0)
        assert first is not None and first[:2] == ("a", 1)  # the scripts are loaded; nothing lost yet
        proxy.armed.set()
        got = q.claim("w", now + 0.1, 30.0)
        assert proxy.lost == 1  # the first run reached the server, its answer did not reach ioredis
        rows = {t: (s, g) for t, s, g, _ in q.snapshot()}
        assert got is not None and got[:2] == ("c", 1), (got, rows)
        # b was taken by the first run: active, its attempt counted, under a lock nobody holds
        assert rows == {"a": ("running", 1), "b": ("running", 1), "c": ("running", 1)}
    finally:
        q.close()
