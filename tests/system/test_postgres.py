"""``--db postgres`` and ``postgresql://`` URLs on a real PostgreSQL server (takeover._internal.db).

The private server a command starts must be gone when the command is, however it ends (a normal end,
Ctrl-C, SIGKILL of takeover itself); a URL's runs each get a fresh, empty database, dropped afterwards
unless kept; the spec's scenarios and a short stress run pass on the PostgreSQL reference queue. The
values and URLs themselves are tests/unit/test_db.py's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from takeover._internal import db
from takeover._internal.db import postgres
from takeover._internal.db.server import OWNER_ENV
from takeover._internal.scenario.replay import run_scenarios
from takeover.contract import POSTGRES_REFERENCE_QUEUE
from tests.helpers.processes import REPO, live_servers, server_child_env, wait_servers_gone

# Each test starts a PostgreSQL server (about a second, more on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.needs_package("postgresql")]

MARKER_ENV = "TAKEOVER_TEST_HANG_MARKER"


def _env(**extra: str) -> dict[str, str]:
    return server_child_env(db.SERVER_ENV, **extra)


def servers_of(pid: int) -> list[psutil.Process]:
    """The live (not zombie) processes of the private server started by the takeover process ``pid``."""
    return live_servers("postgres", lambda p: p.environ().get(OWNER_ENV) == str(pid))


def server_folder(procs: list[psutil.Process]) -> Path:
    for p in procs:
        cmd = p.cmdline()
        if "-D" in cmd:
            return Path(cmd[cmd.index("-D") + 1]).parent
    raise AssertionError(f"no postmaster among {[p.cmdline() for p in procs]}")


def wait_gone(pid: int, folder: Path) -> list[psutil.Process]:
    return wait_servers_gone(lambda: servers_of(pid), [folder])


def _hung_scenarios(tmp_path: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """``takeover scenarios --db postgres`` stuck in a claim: its server is up and in use."""
    marker = tmp_path / "hung"
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeover", "scenarios", "--db", "postgres", "--queue", "postgres_queues:ClaimHangs",
         "--step-timeout", "100"],
        cwd=REPO, env=_env(**{MARKER_ENV: str(marker)}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=30)
    procs = servers_of(proc.pid)
    assert procs, "the command's private server is running"
    return proc, procs


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_the_private_server_is_gone_after_ctrl_c_and_after_takeover_is_killed(how: str, tmp_path: Path):
    proc, procs = _hung_scenarios(tmp_path)
    folder = server_folder(procs)
    try:
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal sends: the whole group
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 130, err
        else:
            proc.kill()  # takeover alone: no finally of its own runs; the watchdog must do it all
            proc.communicate(timeout=30)
        assert wait_gone(proc.pid, folder) == [], "no process of the server is left"
        assert not folder.exists(), "its folder is removed"
    finally:
        for p in servers_of(proc.pid):
            p.kill()
        if proc.poll() is None:
            proc.kill()


def test_a_short_stress_run_on_postgres_is_checked_like_a_sqlite_run_and_leaves_no_server(tmp_path: Path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeover", "stress", "--db", "postgres", "--profile", "smoke", "--duration", "1",
         "--tasks", "20", "--seed", "3", "--out", str(out)],
        cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    stdout, stderr = proc.communicate(timeout=150)
    assert proc.returncode == 0, stdout[-3000:] + stderr[-2000:]
    config = json.loads((out / "config.json").read_text())
    assert config["db"] == "postgres" and config["queue"] == POSTGRES_REFERENCE_QUEUE
    assert config["command"].endswith("--db postgres")
    assert not (out / "queue.sqlite").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["valid"] is True and summary["counts"]["tasks"] >= 20
    assert summary["config"]["db"] == "postgres"  # a summary read alone says which database it judged
    assert servers_of(proc.pid) == []


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A private server for the in-process tests below: its admin URL stands for a user's own server."""
    with db.serve("postgres") as host:
        assert isinstance(host, db.PostgresHost)
        yield host.admin_url


def _databases(admin: str) -> set[str]:
    with postgres.connect(admin) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'takeover_%'")}


def _tables(url: str) -> list[str]:
    with postgres.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]


def test_each_run_of_a_url_gets_a_fresh_empty_database_dropped_afterwards(server: str, tmp_path: Path):
    before = _databases(server)
    with db.serve(server) as host, host.database(tmp_path, "one") as one, host.database(tmp_path, "two") as two:
        assert one != two and postgres.database_of(one).startswith("takeover_one_")
        assert _tables(one) == [] and _tables(two) == []
        with postgres.connect(one) as conn:
            conn.execute("CREATE TABLE t (x int)")
        assert _tables(one) == ["t"] and _tables(two) == [], "nothing is shared between two runs' databases"
        assert _databases(server) - before == {postgres.database_of(one), postgres.database_of(two)}
    assert _databases(server) == before, "both dropped when the runs ended"


def test_keep_db_keeps_each_database_and_says_which(server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    before = _databases(server)
    with db.serve(server, keep=True) as host, host.database(tmp_path, "kept") as url:
        pass
    name = postgres.database_of(url)
    try:
        assert _databases(server) - before == {name}
        assert f"kept database {db.redact(url)}" in capsys.readouterr().err
    finally:
        postgres.drop_database(server, name)


def test_the_scenarios_pass_on_postgres_each_on_a_database_of_its_own(server: str):
    before = _databases(server)
    with db.serve(server):
        results = run_scenarios(POSTGRES_REFERENCE_QUEUE)
        planted = run_scenarios("takeover.queues.planted_postgres:FinishIgnoresGeneration", ["S2", "S3"])
    assert [r.id for r in results] == ["S1", "S2", "S3", "S4", "S5"] and all(r.ok for r in results), \
        [f for r in results for f in r.failures()]
    assert [r.ok for r in planted] == [True, False], "the planted bug departs where its SQLite namesake does: in S3"
    assert _databases(server) == before


def test_a_holder_frozen_inside_a_transaction_is_ended_by_the_server_and_its_row_freed(server: str, tmp_path: Path):
    """The private server's idle_in_transaction_session_timeout: a SIGSTOPped holder's row lock does not
    outlive it (a queue that held its lock until the holder woke up would lose the task meanwhile)."""
    from takeover.benchmarks import frozen_holder

    with db.serve(server) as host, host.database(tmp_path, "frozen") as url:
        figures = frozen_holder.open_transaction(url, wait_too=False)
    assert figures["skip_locked_missed_s"] is not None, "the row came back to SKIP LOCKED claims"
    assert figures["skip_locked_missed_s"] > 0, "the frozen holder held it first"
