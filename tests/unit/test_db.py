"""``--db`` and the run's database (takeover._internal.db), without a server: the values, the URLs, the queue's kinds.

A real server is started in tests/system/test_postgres.py (its clean-up on Ctrl-C and SIGKILL, fresh
databases, the scenarios and a stress run on PostgreSQL).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from takeover._internal import db
from takeover._internal.config import RunConfig
from takeover._internal.db import postgres
from takeover._internal.db.hosts import database_name
from takeover.cli import main
from takeover.contract import POSTGRES_REFERENCE_QUEUE, REFERENCE_QUEUE, open_queue
from takeover.errors import ContractError, UsageError


@pytest.mark.parametrize("value", ["sqlite", "postgres", "postgresql://me@host/db", "postgres://me:pw@host:5433/db",
                                   "postgresql:///db?host=/tmp/sock&port=5432", "redis", "redis://h:6379/3",
                                   "redis://:pw@h/0"])
def test_good_values_are_taken_as_given(value: str):
    assert db.check(value) == value


@pytest.mark.parametrize(("value", "problem"), [
    ("", "must be sqlite, postgres, redis, a postgresql:// URL or a redis:// URL"),
    ("mysql://me@host/db", "must be sqlite, postgres, redis, a postgresql:// URL or a redis:// URL"),
    ("Postgres", "must be sqlite, postgres, redis, a postgresql:// URL or a redis:// URL"),
    ("postgresql://me:secret@host:notaport/db", "is not a valid URL"),
    ("postgresql://me@host/db#frag", "has a #fragment"),
    ("Redis", "must be sqlite, postgres, redis"),
    ("redis://:secret@host:notaport/0", "is not a valid redis:// URL"),
    ("redis://:secret@host:6379/zero", "is not a valid redis:// URL"),
    ("redis://:secret@/0", "names no host"),
])  # fmt: skip
def test_bad_values_are_one_line_naming_the_problem_never_the_password(value: str, problem: str):
    with pytest.raises(UsageError, match=problem) as info:
        db.check(value)
    assert "secret" not in str(info.value) and "\n" not in str(info.value)


def test_a_password_is_never_shown():
    assert db.redact("postgresql://me:s3cr%40t@host:5433/db?sslmode=disable") == \
        "postgresql://me@host:5433/db?sslmode=disable"
    assert db.redact("postgresql://me@host/db") == "postgresql://me@host/db"
    assert db.redact("redis://:secret@host:6379/2") == "redis://host:6379/2"
    assert db.redact("redis://me:secret@host:6379/2") == "redis://me@host:6379/2"
    assert db.redact("sqlite") == "sqlite" and db.redact("/runs/x/queue.sqlite") == "/runs/x/queue.sqlite"


def test_the_kind_of_a_value_or_of_a_database_string():
    assert [db.kind(v) for v in ("sqlite", "/tmp/q.sqlite", "postgres", "postgres://h/d", "postgresql://h/d")] == \
        ["sqlite", "sqlite", "postgres", "postgres", "postgres"]
    assert [db.kind(v) for v in ("redis", "redis://127.0.0.1:6379/4")] == ["redis", "redis"]


def test_a_fresh_database_url_keeps_the_server_and_the_credentials():
    url = "postgresql://me:pw@/postgres?host=/tmp/pg%20dir&port=5433"
    fresh = postgres.with_database(url, "takeover_run_1")
    assert fresh == "postgresql://me:pw@/takeover_run_1?host=/tmp/pg%20dir&port=5433"
    assert postgres.database_of(fresh) == "takeover_run_1"
    assert postgres.socket_url("/tmp/x y", 5432) == "postgresql://postgres@/postgres?host=/tmp/x%20y&port=5432"


def test_fresh_database_names_are_valid_and_unique():
    names = {database_name("scenario_S1 ünïcode/../x" * 3) for _ in range(50)}
    assert len(names) == 50
    assert all(len(n) <= 63 and n.replace("_", "").isalnum() and n.isascii() for n in names)


def test_keep_db_needs_a_server_that_outlives_the_command():
    db.check_keep("postgresql://me@h/d", True)
    db.check_keep("postgres", False)
    db.check_keep("redis://h:6379/1", True)
    for value in ("sqlite", "postgres", "redis"):
        with pytest.raises(UsageError, match="--keep-db"):
            db.check_keep(value, True)


def test_config_json_records_the_database_only_when_it_is_not_sqlite():
    cfg = RunConfig()
    assert "db" not in cfg.to_dict() and "--db" not in cfg.command()
    pg = dataclasses.replace(cfg, db="postgres")
    assert pg.to_dict()["db"] == "postgres" and pg.command().endswith("--db postgres")
    assert RunConfig.from_dict(json.loads(pg.to_json())) == pg
    assert RunConfig.from_dict(json.loads(cfg.to_json())).db == "sqlite"


def test_a_redis_run_records_its_persistence_and_a_sqlite_run_does_not():
    cfg = RunConfig()
    assert "redis_persistence" not in cfg.to_dict() and "redis-persistence" not in cfg.command()
    rd = dataclasses.replace(cfg, db="redis")
    assert rd.to_dict()["redis_persistence"] == "always" and "--redis-persistence" not in rd.command()
    every = dataclasses.replace(rd, redis_persistence="everysec")
    assert every.to_dict()["redis_persistence"] == "everysec" and "--redis-persistence everysec" in every.command()
    assert RunConfig.from_dict(json.loads(every.to_json())) == every
    with pytest.raises(UsageError, match="redis-persistence: .*needs --db redis"):
        dataclasses.replace(cfg, redis_persistence="none").validate()


def test_server_faults_need_no_hosts_on_a_private_redis_server_only():
    base = RunConfig(db="redis", db_restart_rate=0.1, conn_kill_rate=0.2, db_pause_rate=0.1)
    assert base.validate() == base
    with pytest.raises(UsageError, match="partition-rate: network faults need --hosts"):
        dataclasses.replace(base, partition_rate=0.1).validate()
    with pytest.raises(UsageError, match="db-pause-rate: network faults need --hosts"):
        RunConfig(db_pause_rate=0.1).validate()
    with pytest.raises(UsageError, match="conn-kill-rate: faults of the server need --db redis"):
        RunConfig(db="redis://h:6379/1", conn_kill_rate=0.1).validate()
    assert dataclasses.replace(base, db_lost_reply_rate=1.0).validate().db_lost_reply_rate == 1.0
    for other in ({"db": "redis://h:6379/1"}, {"db": "sqlite"}):
        with pytest.raises(UsageError, match="db-lost-reply-rate: .*needs --db redis"):
            RunConfig(db_lost_reply_rate=1.0, **other).validate()


def test_stress_records_a_url_without_its_password():
    from takeover._internal.commands import stress

    args = stress_args("--db", "postgresql://me:hunter2@db.example/postgres")
    cfg = stress.resolve(args)
    assert cfg.db == "postgresql://me@db.example/postgres" and "hunter2" not in cfg.to_json()
    assert cfg.queue == POSTGRES_REFERENCE_QUEUE, "the default queue follows the database"
    assert stress.resolve(stress_args()).queue == REFERENCE_QUEUE
    explicit = stress.resolve(stress_args("--db", "postgres", "--queue", "mine:Q"))
    assert explicit.queue == "mine:Q"


def stress_args(*argv: str):
    import argparse

    from takeover._internal.commands import stress

    parser = argparse.ArgumentParser()
    stress.configure(parser)
    return parser.parse_args(["--profile", "smoke", *argv])


class _Both:
    databases = ("sqlite", "postgres")

    def __init__(self, database: str) -> None:
        self.database = database

    def register(self, task_id, now): ...
    def claim(self, worker, now, lease): ...
    def finish(self, task_id, generation, outcome, now): ...
    def snapshot(self): return []
    def close(self): ...


class _Undeclared(_Both):
    databases = None  # type: ignore[assignment]


def test_a_queue_that_takes_only_the_other_kind_is_refused_before_it_is_built(tmp_path: Path):
    sqlite_path = str(tmp_path / "q.sqlite")
    with pytest.raises(ContractError, match="takes only postgres databases .*run it with --db postgres"):
        open_queue(POSTGRES_REFERENCE_QUEUE, sqlite_path)
    assert not (tmp_path / "q.sqlite").exists()
    with pytest.raises(ContractError, match="takes only sqlite databases .*run it with --db sqlite"):
        open_queue(REFERENCE_QUEUE, "postgresql://nobody@/nothing?host=/nonexistent")
    with pytest.raises(ContractError, match="takes only sqlite"):
        open_queue("x:Undeclared", "postgresql://h/d", _Undeclared)  # said nothing: SQLite, as every queue before
    # A user's Redis queue that forgot the attribute is told to declare it, not only to run it on SQLite.
    with pytest.raises(ContractError, match=r"no 'databases' attribute\), not redis: if it takes redis, declare "
                       r"databases = \('redis',\) on it; else run it with --db sqlite"):
        open_queue("x:Undeclared", "redis://127.0.0.1:1/1", _Undeclared)
    assert open_queue("x:Both", "postgresql://h/d", _Both).database == "postgresql://h/d"  # type: ignore[attr-defined]
    assert open_queue("x:Both", sqlite_path, _Both).database == sqlite_path  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["stress", "scenarios", "selftest", "sweep", "soak", "bench", "hunt", "replay",
                                     "tune"])
def test_every_command_that_runs_a_queue_refuses_a_bad_db_in_one_line(command: str, capsys, tmp_path: Path):
    argv = [command, "--db", "mysql://x"]
    if command == "replay":
        argv.insert(1, str(tmp_path))
    if command == "tune":
        argv += ["--task-times", str(tmp_path / "times.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sqlite, postgres, redis, a postgresql:// URL or a redis:// URL" in err[0], err


def test_a_postgres_only_queue_under_sqlite_stops_the_scenarios_with_exit_2(capsys):
    assert main(["scenarios", "--queue", POSTGRES_REFERENCE_QUEUE]) == 2
    assert "takes only postgres databases" in capsys.readouterr().err


def test_reconcile_on_a_runs_own_redis_server_is_refused_before_anything_starts(capsys, tmp_path: Path):
    assert main(["stress", "--db", "redis", "--reconcile", "--profile", "smoke", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--reconcile with --db redis" in err[0], err
    assert not (tmp_path / "r").exists()
