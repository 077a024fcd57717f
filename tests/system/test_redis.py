"""``--db redis`` and ``redis://`` URLs on real redis-server processes (takeover._internal.db.redis,
takeover._internal.db.redis_server, takeover._internal.run.redis_site).

The private servers (the command's, and each run's) must be gone when the command is, however it ends (a normal
end, Ctrl-C, SIGKILL of takeover itself); every queue gets an empty database; a user's database is refused when
not empty and emptied afterwards unless kept; each server fault (a restart, a freeze, a connection kill) happens
and is recorded with its start and end. The queue is the small Lua queue of tests/fixtures/queues/redis_queues.py,
so these tests judge the plumbing, not takeover's own Redis queue. The values and URLs are tests/unit/test_db.py's.
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
from takeover._internal.db import redis as redis_db
from takeover._internal.db.redis_server import PrivateRedis, owner_of
from takeover._internal.scenario.replay import run_scenarios
from tests.helpers.processes import REPO, live_servers, server_child_env, wait_servers_gone

pytestmark = [pytest.mark.slow, pytest.mark.needs_package("redis-server")]

MARKER_ENV = "TAKEOVER_TEST_HANG_MARKER"
QUEUE = "redis_queues:LuaQueue"


def _env(**extra: str) -> dict[str, str]:
    return server_child_env(db.REDIS_SERVER_ENV, **extra)


def servers_of(pid: int) -> list[psutil.Process]:
    """The live (not zombie) redis-servers started by the takeover process ``pid``."""
    return live_servers("redis-server", lambda p: owner_of(p.cmdline()) == pid)


def folders_of(procs: list[psutil.Process]) -> list[Path]:
    """Each server's own folder (its data folder's parent: ``--dir FOLDER/data``)."""
    out = []
    for p in procs:
        out.append(Path(p.cwd()).parent)  # redis-server chdirs to --dir
    return out


def wait_gone(pid: int, folders: list[Path]) -> list[psutil.Process]:
    return wait_servers_gone(lambda: servers_of(pid), folders)


def _hang(argv: list[str], tmp_path: Path, servers: int) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A takeover command whose queue's claim blocks, once ``servers`` of its redis-servers are up."""
    marker = tmp_path / "hung"
    proc = subprocess.Popen([sys.executable, "-m", "takeover", *argv], cwd=REPO,
                            env=_env(**{MARKER_ENV: str(marker)}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 90
    while (not marker.exists() or len(servers_of(proc.pid)) < servers) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=30)
    procs = servers_of(proc.pid)
    assert len(procs) >= servers, "the command's private servers are running"
    return proc, procs


HUNG = {
    # the command's server alone
    "scenarios": (["scenarios", "--db", "redis", "--queue", "redis_queues:ClaimHangs", "--step-timeout", "100"], 1),
    # the command's server and the run's own, one of them frozen by a pause now and then
    "stress": (["stress", "--db", "redis", "--queue", "redis_queues:ClaimHangs", "--profile", "smoke", "--no-faults",
                "--duration", "30", "--tasks", "5", "--db-pause-rate", "2"], 2),
}


@pytest.mark.parametrize(("how", "command"), [
    ("ctrl-c", "scenarios"), ("sigkill", "scenarios"), ("sigkill", "stress"),
    pytest.param("ctrl-c", "stress", marks=pytest.mark.nightly),  # a run's start: ~10 s on a loaded machine
])  # fmt: skip
def test_the_private_servers_are_gone_after_ctrl_c_and_after_takeover_is_killed(how: str, command: str,
                                                                                tmp_path: Path):
    argv, servers = HUNG[command]
    if command == "stress":
        argv = [*argv, "--out", str(tmp_path / "run")]
    proc, procs = _hang(argv, tmp_path, servers)
    folders = folders_of(procs)
    assert all(f.name.startswith("takeover-redis-") for f in folders), folders
    try:
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C on a terminal sends: the whole group
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 130, err
        else:
            proc.kill()  # takeover alone: no finally of its own runs; the watchdogs must do it all
            proc.communicate(timeout=30)
        assert wait_gone(proc.pid, folders) == [], "no redis-server is left"
        assert not any(f.exists() for f in folders), "their folders are removed"
    finally:
        for p in servers_of(proc.pid):
            p.kill()
        if proc.poll() is None:
            proc.kill()


def _stress(out: Path, *extra: str, timeout: float = 150) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "takeover", "stress", "--db", "redis", "--queue", QUEUE, "--profile", "smoke",
         "--tasks", "20", "--seed", "3", "--out", str(out), *extra],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc, json.loads((out / "summary.json").read_text())


def _records(out: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, (out / "history.jsonl").read_text().splitlines()) if r.get("f") == kind]


def test_each_server_fault_happens_and_is_recorded_with_its_start_and_end(tmp_path: Path):
    """A restart (SIGKILL, a start that replays the AOF), a freeze (SIGSTOP, SIGCONT) and connection kills (CLIENT
    KILL of a worker's connection), without --hosts, on the run's own server with the run's persistence, and the
    queue keeps every acknowledged promise."""
    out = tmp_path / "run"
    proc, summary = _stress(out, "--no-faults", "--duration", "4", "--tasks", "60", "--db-restart-rate", "0.5",
                            "--db-pause-rate", "0.5", "--conn-kill-rate", "2", "--redis-persistence", "everysec")
    assert summary["valid"] is True, proc.stdout[-3000:]
    config = json.loads((out / "config.json").read_text())
    assert config["db"] == "redis" and config["redis_persistence"] == "everysec"
    assert config["command"].endswith("--db redis") and "--redis-persistence everysec" in config["command"]
    assert summary["config"]["redis_persistence"] == "everysec" and "persistence everysec" in \
        (out / "report.md").read_text()
    assert not (out / "queue.sqlite").exists()
    assert "redis persistence: everysec" in proc.stdout
    for kind in ("db_restart", "db_pause", "conn_kill"):
        records = _records(out, kind)
        starts = [r for r in records if r["type"] == "invoke"]
        ends = [r for r in records if r["type"] == "ok"]
        assert starts and len(ends) == len(starts), (kind, records)
    kills = [r for r in _records(out, "conn_kill") if r["type"] == "ok"]
    assert any(int(r["value"]) >= 1 for r in kills), f"a kill ended a worker's connection: {kills}"
    assert all(r["worker"].startswith("w") and "host" not in r for r in kills)
    assert summary["counts"]["lost"] == 0 if "lost" in summary["counts"] else True


def test_a_freeze_ends_on_time_while_the_coordinator_waits_on_the_frozen_server(tmp_path: Path):
    """The coordinator's loop may itself be inside a call to the frozen server (its register_many): the freeze
    must end at its drawn time all the same, not when that call gives up (a 0.9 s pause once lasted 7.5 s)."""
    from types import SimpleNamespace

    from takeover._internal.config import RunConfig
    from takeover._internal.history import HistoryWriter
    from takeover._internal.run.net_faults import DB_PAUSE, NetworkFaults

    with PrivateRedis("none") as private:
        faults = NetworkFaults(RunConfig(seed=1, lease=0.4, db_pause_rate=1.0), SimpleNamespace(server=private),
                               HistoryWriter(tmp_path / "history.jsonl", 0), dict)  # fmt: skip
        client = redis_db.connect(private.url, socket_timeout=8)
        started = time.monotonic()
        faults._db_pause(faults.rngs[DB_PAUSE])
        client.ping()  # the loop's own call, waiting on the frozen server: nothing calls tick() meanwhile
        waited = time.monotonic() - started
        client.close()
        faults.stop()
    start, end = _records(tmp_path, DB_PAUSE)
    drawn = float(start["value"])
    assert (start["type"], end["type"]) == ("invoke", "ok")
    assert drawn <= waited < drawn + 2.0, (drawn, waited)
    assert end["time"] - start["time"] < drawn + 1.0, (start, end)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A private server for the in-process tests below: its URL stands for a user's own server."""
    with PrivateRedis("none") as s:
        yield s.url


def _keys(url: str) -> int:
    client = redis_db.connect(url)
    try:
        return int(client.dbsize())
    finally:
        client.close()


def test_a_users_database_that_is_not_empty_is_refused_in_one_line_and_left_alone(server: str, tmp_path: Path):
    url = redis_db.with_database(server, 7)
    client = redis_db.connect(url)
    client.set("someone:else", "theirs")
    client.close()
    proc = subprocess.run([sys.executable, "-m", "takeover", "scenarios", "--db", url, "--queue", QUEUE], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not empty (1 keys)" in lines[0], lines
    assert _keys(url) == 1, "nothing of the user's was touched"


def test_a_users_database_is_emptied_afterwards_unless_kept(server: str, capsys: pytest.CaptureFixture[str]):
    url = redis_db.with_database(server, 8)
    with db.serve(url):
        results = run_scenarios(QUEUE)
    assert all(r.ok for r in results)
    assert _keys(url) == 0
    with db.serve(url, keep=True) as host, host.database(Path("."), "run") as got:
        assert got == url
        client = redis_db.connect(got)
        client.set("left", "1")
        client.close()
    assert _keys(url) == 1 and f"kept database {url}" in capsys.readouterr().err
    redis_db.flush(url)


def test_every_queue_of_a_command_gets_an_empty_database_of_its_own(tmp_path: Path):
    with db.serve("redis") as host:
        assert isinstance(host, db.RedisHost) and host.private
        with host.database(tmp_path, "a") as a, host.database(tmp_path, "b") as b:
            assert a != b and _keys(a) == 0 and _keys(b) == 0
            client = redis_db.connect(a)
            client.set("x", "1")
            client.close()
        with host.database(tmp_path, "c") as c:
            assert _keys(c) == 0
        assert all(r.ok for r in run_scenarios(QUEUE))


def test_a_restart_without_persistence_is_named_as_the_cause_of_the_vanished_tasks(tmp_path: Path):
    """--redis-persistence none: the restart empties the server. The run is INVALID (acknowledged tasks are gone),
    and the diagnosis says why in words, with cause db_restart, instead of blaming the queue's logic."""
    out = tmp_path / "run"
    proc, summary = _stress(out, "--no-faults", "--duration", "3", "--redis-persistence", "none",
                            "--db-restart-rate", "0.5")
    assert proc.returncode == 1 and summary["valid"] is False
    restarts = [r for r in _records(out, "db_restart") if r["type"] == "invoke"]
    assert restarts, "the run had a restart"
    patterns = {d["pattern"] for d in summary["diagnosis"]}
    assert patterns == {"vanished_on_restart"}, summary["diagnosis"]
    sentence = summary["diagnosis"][0]["sentence"]
    assert "the server restarted without persistence" in sentence and "tasks vanished" in sentence
    assert "the server restarted without persistence" in proc.stdout
    rows = (out / "violations.csv").read_text().splitlines()
    assert len(rows) > 1 and all(",vanished_on_restart," in r and ",db_restart," in r for r in rows[1:])


@pytest.mark.nightly  # a stress run of 3 s (~15 s under load); test_each_server_fault_happens... restarts with AOF too
def test_with_persistence_a_restart_loses_nothing(tmp_path: Path):
    out = tmp_path / "run"
    proc, summary = _stress(out, "--no-faults", "--duration", "3", "--db-restart-rate", "0.5")
    assert [r for r in _records(out, "db_restart") if r["type"] == "ok"], "the server came back"
    assert summary["valid"] is True, proc.stdout[-3000:]


@pytest.mark.nightly  # two runs of 200 tasks: 107 s at load 15 (the SIGKILL test below records power losses too)
@pytest.mark.needs_package("fuse3")
def test_a_power_loss_takes_back_acknowledged_writes_with_everysec_and_none_with_always(tmp_path: Path):
    """The run's server keeps its files on the power-loss layer: everysec answers before it syncs, so a power loss
    takes acknowledged claims and finishes back (attributed to the power loss); always syncs before it answers."""
    found = {}
    for persistence in ("everysec", "always"):
        out = tmp_path / persistence
        proc, summary = _stress(out, "--no-faults", "--duration", "4", "--tasks", "200", "--seed", "1",
                                "--redis-persistence", persistence, "--power-loss-rate", "0.5")
        losses = [r for r in _records(out, "power_loss") if r["type"] == "ok"]
        assert losses and all(r["detail"] == "server" for r in losses), losses
        found[persistence] = (summary, sum(int(r["dropped_bytes"]) for r in losses), proc.stdout)
    everysec, dropped, stdout = found["everysec"]
    assert everysec["valid"] is False and dropped > 0, stdout[-3000:]
    assert {d["pattern"] for d in everysec["diagnosis"]} == {"power_loss"}
    assert "appendfsync everysec" in everysec["diagnosis"][0]["sentence"]
    always, dropped, stdout = found["always"]
    assert always["valid"] is True and dropped == 0, stdout[-3000:]


@pytest.mark.needs_package("fuse3")
def test_sigkill_of_takeover_during_power_losses_leaves_no_server_or_mount(tmp_path: Path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "takeover", "stress", "--db", "redis", "--queue", QUEUE, "--profile", "smoke",
         "--no-faults", "--duration", "60", "--tasks", "500", "--power-loss-rate", "2", "--out", str(out)],
        cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not ((out / "history.jsonl").exists()
                                                   and '"power_loss"' in (out / "history.jsonl").read_text()):
            time.sleep(0.1)
        losses = _records(out, "power_loss")
        assert losses and losses[0]["detail"] == "server", "a power loss of the server's machine began"
        folders = folders_of(servers_of(proc.pid))
        assert folders, "the run's servers are up"
        proc.kill()
        proc.wait(timeout=30)
        assert wait_gone(proc.pid, folders) == []
        deadline = time.monotonic() + 20
        while str(out) in Path("/proc/mounts").read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert str(out) not in Path("/proc/mounts").read_text(), "the power-loss layer is unmounted"
    finally:
        for p in servers_of(proc.pid):
            p.kill()
        if proc.poll() is None:
            proc.kill()


def test_bench_on_redis_measures_the_queue_against_its_bare_scripts_and_each_persistence(tmp_path: Path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "takeover", "bench", "--db", "redis", "--quick", "--out", str(out)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["db"] == "redis" and "frozen_holder" not in doc
    assert [r["name"] for r in doc["results"]] == ["queue_vs_raw"] and list(doc["measurements"]) == ["queue_vs_raw"]
    rates = doc["redis_persistence"]
    assert list(rates) == ["always", "everysec", "none"]
    assert all(r["pairs"] == 100 and r["pairs_per_s"] > 0 for r in rates.values())
    assert "redis persistence: the reference queue's claim+finish per second: always" in proc.stdout


@pytest.mark.nightly  # a tuning's three runs: about a minute
@pytest.mark.timeout(240)
def test_a_tuning_on_redis_runs_every_run_on_its_own_server_under_the_scaled_server_faults(tmp_path: Path):
    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 30, "p99": 40, "max": 50}))
    out = tmp_path / "tune"
    proc = subprocess.run([sys.executable, "-m", "takeover", "tune", "--task-times", str(times), "--db", "redis",
                           "--target", "200", "--budget", "1", "--time-scale", "33", "--db-restart-rate", "0.005",
                           "--conn-kill-rate", "0.005", "--out", str(out)],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=220)  # fmt: skip
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr
    cells = sorted((out / "cells").glob("*"))
    assert cells
    for cell in cells:
        config = json.loads((cell / "config.json").read_text())
        assert config["db"] == "redis" and config["redis_persistence"] == "always"
        assert config["db_restart_rate"] == round(0.005 * config["task_time"]["scale"], 6)


@pytest.mark.parametrize(("queue", "valid"), [
    ("redis_queues:Retrying", False),
    pytest.param("takeover.queues.redis_lease:RedisLeaseQueue", True, marks=pytest.mark.nightly),
])  # fmt: skip
def test_a_reply_lost_from_the_server_shows_whether_a_retried_call_is_safe(queue: str, valid: bool, tmp_path: Path):
    """The relay loses the server's answer on a worker's connection: the command ran, redis-py sends it again.
    A finish that is not safe to run twice is refused on its retry (finish_retried, cause db_lost_reply); the
    reference queue answers a retry from the first run's recorded answer and stays VALID."""
    out = tmp_path / "run"
    proc, summary = _stress(out, "--queue", queue, "--no-faults", "--duration", "4", "--tasks", "60", "--seed", "1",
                            "--db-lost-reply-rate", "3")
    lost = [r for r in _records(out, "db_lost_reply") if r["type"] == "ok"]
    assert lost and all(int(r["value"]) > 0 and r["worker"].startswith("w") for r in lost), lost
    assert summary["valid"] is valid, proc.stdout[-3000:]
    if not valid:  # its claim is not safe to retry either: a generation a lost answer bumped may show as skipped
        assert "finish_retried" in {d["pattern"] for d in summary["diagnosis"]}, summary["diagnosis"]
        rows = [r for r in (out / "violations.csv").read_text().splitlines()[1:] if ",finish_retried," in r]
        assert rows and all(",db_lost_reply," in r for r in rows)


@pytest.mark.needs_package("iptables", "iproute2")
@pytest.mark.skipif(os.geteuid() != 0, reason="--hosts needs root (network namespaces)")
def test_on_hosts_the_server_is_on_the_bridge_and_every_network_fault_reaches_it(tmp_path: Path):
    out = tmp_path / "run"
    proc, summary = _stress(out, "--no-faults", "--duration", "5", "--tasks", "60", "--hosts", "2",
                            "--partition-rate", "0.5", "--conn-kill-rate", "1", "--db-pause-rate", "0.3",
                            "--db-restart-rate", "0.3", "--seed", "2")
    assert summary["valid"] is True, proc.stdout[-3000:]
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert {r["host"] for r in history if r["f"] == "spawn"} == {"h1", "h2"}
    done = {r["f"] for r in history if r["type"] == "ok" and r["f"] in ("partition", "conn_kill", "db_pause",
                                                                          "db_restart")}  # fmt: skip
    assert done == {"partition", "conn_kill", "db_pause", "db_restart"}, done
    kills = [r for r in history if r["type"] == "ok" and r["f"] == "conn_kill"]
    assert any(int(r["value"]) >= 1 for r in kills) and all(r["host"] in ("h1", "h2") for r in kills)
    config = json.loads((out / "config.json").read_text())
    assert config["hosts"] == 2 and config["placement"] == {"w0": "h1", "w1": "h2", "w2": "h1"}
