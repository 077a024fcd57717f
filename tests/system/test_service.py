"""The real service process with real clients: replies stay matched to their requests when a
client is frozen mid-wait, and a malformed request does not kill the service.

Assertions are on what came back (which reply, which exception), never on elapsed time.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from takeover._internal.run.service import (
    ServiceAddress,
    ServiceClient,
    ServiceSpec,
    address_of,
    listen,
    listen_local,
    service_main,
)

_FROZEN_CHILD = r"""
import sys, json
from takeover._internal.run.service import ServiceClient
client = ServiceClient(int(sys.argv[1]), timeout=float(sys.argv[2]))
print("ready", flush=True)
sys.stdin.readline()
out = []
for gen in (1, 2, 3):
    try:
        out.append(client.call({"task": "t", "gen": gen, "worker": "w0", "process": 1, "key": "t"}))
    except Exception as exc:
        out.append(type(exc).__name__)
print(json.dumps(out), flush=True)
"""


@contextmanager
def running_service(ledger: Path, remedy: str = "none", sock: socket.socket | None = None
                    ) -> Iterator[tuple[Any, ServiceAddress]]:
    """The real service process on ``sock`` (default: the socket a run's service gets); stopped after."""
    sock = sock or listen_local()
    address = address_of(sock)
    service = multiprocessing.get_context("spawn").Process(
        target=service_main, args=(ServiceSpec(str(ledger), remedy, os.getpid()), sock))
    service.start()
    sock.close()
    try:
        yield service, address
    finally:
        service.terminate()
        service.join(10)
        if service.is_alive():
            service.kill()
            service.join()


def test_a_worker_frozen_mid_wait_gets_its_own_replies_in_order(tmp_path) -> None:
    """SIGSTOP while the client waits in recv, SIGCONT later: every answer matches its request.

    Over TCP, as ``reconcile --service-port`` reaches a service (the other tests use a run's socket).
    """
    with running_service(tmp_path / "ledger.sqlite", "fencing", listen()) as (service, port):
        child = subprocess.Popen([sys.executable, "-c", _FROZEN_CHILD, str(port), "30"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            child.stdin.write("go\n")
            child.stdin.flush()
            for _ in range(3):  # freeze it a few times while it is busy with its calls
                os.kill(child.pid, signal.SIGSTOP)
                time.sleep(0.3)
                os.kill(child.pid, signal.SIGCONT)
                time.sleep(0.05)
            out, _ = child.communicate(timeout=60)
            replies = json.loads(out.strip().splitlines()[-1])
            assert [r["count"] for r in replies] == [1, 2, 3]  # each call answered by its own reply
            assert [r["reply"] for r in replies] == ["ok", "ok", "ok"]  # gens rise: never fenced
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert not [p for p in psutil.Process().children(recursive=True) if p.pid in (child.pid, service.pid)]


def test_a_generation_beyond_64_bits_is_refused_without_killing_the_service(tmp_path) -> None:
    """SQLite integers are 64-bit: such a request is malformed, the service keeps serving the rest."""
    ledger = tmp_path / "ledger.sqlite"
    with running_service(ledger) as (service, address):
        client = ServiceClient(address, timeout=30.0)
        try:
            assert client.call({"task": "a", "gen": 1})["reply"] == "ok"
            assert client.call({"task": "a", "gen": 2**63}) == {"reply": "error", "result": "malformed"}
            assert client.call({"task": "a", "gen": 2, "process": 2**64 - 1})["result"] == "malformed"
            assert client.call({"task": "b", "gen": 1}) == {"reply": "ok", "result": "performed", "count": 1}
            assert service.is_alive()
        finally:
            client.close()
    assert _rows(ledger, "SELECT task_id, generation FROM actions ORDER BY seq") == [("a", 1), ("b", 1)]


def test_the_ledgers_wal_starts_over_while_the_service_commits_continuously(tmp_path) -> None:
    """3000 actions one after another: the WAL stays near SQLite's checkpoint size (~1000 pages).

    A WAL that never starts over grows by every page of every commit (about 3 per action here:
    ~40 MB), and each commit then pays for new file blocks; that is what a checkpoint running
    beside the commits, on another connection, led to.
    """
    ledger = tmp_path / "ledger.sqlite"
    biggest = 0
    with running_service(ledger) as (_, address):
        client = ServiceClient(address, timeout=30.0)
        try:
            for i in range(3000):
                assert client.call({"task": f"t{i:06d}", "gen": 1})["reply"] == "ok"
                if i % 100 == 99:
                    biggest = max(biggest, (tmp_path / "ledger.sqlite-wal").stat().st_size)
        finally:
            client.close()
    assert 0 < biggest < 12_000_000
    assert _rows(ledger, "SELECT COUNT(*) FROM actions") == [(3000,)]


def _rows(ledger: Path, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(ledger)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()
