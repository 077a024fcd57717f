"""``--cluster`` against a real dask cluster: a scheduler and two workers started as the user starts them
(``dask scheduler``, ``dask worker``: the CLI entry points), each worker in a working folder of its own.

The same tiny sweep gives the same runs and verdicts here as on the cluster in two shards, merged;
a worker SIGKILLed mid-run loses its run, which runs once more on the other worker and is reported so;
Ctrl-C cancels the remote runs and leaves no process on any worker. Runs are the tiny grid's (seconds).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.processes import child_env, run_together, start_takeover, takeover, wait_no_stragglers

distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.xdist_group("fanout-cluster")]

# Two runs: the tiny grid's two distributions at one lease and one mode.
SWEEP = ("sweep", "--grid", "workloads/sweep-tiny", "--lease", "0.25", "--mode", "none")


class Cluster:
    """A dask scheduler and two dask workers, separate processes in separate folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, tuple[subprocess.Popen, Path]] = {}  # name -> (process, its scratch folder)
        sched_dir = root / "scheduler"
        sched_dir.mkdir()
        self.file = sched_dir / "scheduler.json"
        self._start(["dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0",
                     "--scheduler-file", str(self.file)], sched_dir)
        deadline = time.monotonic() + 60
        while not self.file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        for name in ("w1", "w2"):
            self.add_worker(name)
        with distributed.Client(self.address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)

    def heal(self) -> None:
        """Two live workers again: a test that SIGKILLed one (the sweep's) leaves the module's cluster with one,
        and the next test that counts on two slots (the soak's two segments at once) would see one run after
        the other. A dead worker is replaced by a new one in a folder of its own."""
        for name, (proc, _) in list(self.workers.items()):
            if proc.poll() is not None:
                del self.workers[name]
                self.add_worker(f"{name}-{len(self.procs)}")
        with distributed.Client(self.address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)

    def _start(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        bin_dir = Path(os.sys.executable).parent
        proc = subprocess.Popen([str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, env=env or child_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def add_worker(self, name: str) -> None:
        folder = self.root / name
        scratch = folder / "tmp"
        scratch.mkdir(parents=True)
        env = {**child_env(), "TMPDIR": str(scratch)}
        proc = self._start(["dask", "worker", self.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                            "--name", name, "--local-directory", str(folder)], folder, env)
        self.workers[name] = (proc, scratch)

    def runs_on(self, name: str) -> list[psutil.Process]:
        """The remote runs (their ``takeover stress`` processes) a worker has under way."""
        proc, _ = self.workers[name]
        try:
            return psutil.Process(proc.pid).children()
        except psutil.NoSuchProcess:
            return []

    def wait_running(self, names: tuple[str, ...], timeout: float = 90) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = [n for n in names if self.runs_on(n)]
            if busy:
                return busy
            time.sleep(0.1)
        return []

    def leftovers(self) -> list[psutil.Process]:
        """Every process of a remote run still alive on any worker, and what is in their scratch folders."""
        left = [p for name in self.workers for p in self.runs_on(name)]
        for _, scratch in self.workers.values():
            left += wait_no_stragglers(scratch, timeout=15, under=True)
        return left

    def close(self) -> None:
        for proc in self.procs:
            for p in _tree(proc.pid):
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
            proc.wait(timeout=10)
        for _, scratch in self.workers.values():
            for p in wait_no_stragglers(scratch, timeout=0, under=True):
                p.kill()


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return []


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def cluster(module_cluster: Cluster) -> Cluster:
    """The module's cluster with two live workers at the start of every test."""
    module_cluster.heal()
    return module_cluster


def _rows(out: Path) -> list[dict]:
    with open(out / "sweep.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _config(run_dir: str) -> dict:
    config = json.loads((Path(run_dir) / "config.json").read_text())
    config.pop("out")
    return config


def test_ctrl_c_cancels_every_remote_run_and_leaves_no_process_on_a_worker(cluster, tmp_path):
    out = tmp_path / "sweep"
    proc = start_takeover(*SWEEP, "--cluster", cluster.address, "--out", str(out))
    try:
        assert cluster.wait_running(tuple(cluster.workers)), "no remote run started"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-2000:]
        assert not cluster.leftovers()
        left = [p for n in cluster.workers for p in cluster.workers[n][1].iterdir()]
        assert not left, "scratch folders removed"
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.nightly
def test_a_sweep_sharded_on_the_cluster_with_a_worker_killed_equals_the_local_sweep(cluster, tmp_path):
    """Shard 1/2 and 2/2 on the cluster at once, one of their runs losing its worker (SIGKILL) mid-run;
    merged, they are the local unsharded sweep: the same runs (configs, reproduce lines) and verdicts."""
    shards = [start_takeover(*SWEEP, "--shard", f"{i}/2", "--cluster", cluster.address,
                             "--out", str(tmp_path / f"shard{i}")) for i in (1, 2)]  # fmt: skip
    try:
        busy = cluster.wait_running(tuple(cluster.workers))
        assert busy, "no remote run started"
        victim, scratch = cluster.workers[busy[0]]
        os.kill(victim.pid, signal.SIGKILL)
        local = takeover(*SWEEP, "--out", str(tmp_path / "local"), timeout=150)
        assert local.returncode == 0, local.stderr[-2000:]
        outs = [p.communicate(timeout=150) for p in shards]
        assert [p.returncode for p in shards] == [0, 0], [o[1][-2000:] for o in outs]
    finally:
        for p in shards:
            if p.poll() is None:
                p.kill()
    assert not wait_no_stragglers(scratch, timeout=15, under=True), "the killed worker's run died with it"
    ran = [r for i in (1, 2) for r in json.loads((tmp_path / f"shard{i}" / "fanout.json").read_text())["runs"]]
    assert sorted(r["attempts"] for r in ran) == [1, 2], ran
    rerun = next(r for r in ran if r["attempts"] == 2)
    assert "rerun once" in rerun["note"] and "lost mid-run" in rerun["note"]
    assert any("rerun once" in out + err for out, err in outs)  # on its progress line
    merged = takeover("merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stderr
    on_cluster, here = _rows(tmp_path / "merged"), _rows(tmp_path / "local")
    verdicts = [[(r["cell"], r["seed"], r["valid"], r["exit_code"]) for r in rows] for rows in (on_cluster, here)]
    assert verdicts[0] == verdicts[1] and len(verdicts[0]) == 2  # each run counted once
    for a, b in zip(on_cluster, here, strict=True):  # the same run: its config and reproduce line
        assert _config(a["run_dir"]) == _config(b["run_dir"])
        assert Path(a["run_dir"]).parent == tmp_path / "merged" / "cells"
    assert not cluster.leftovers()




def _soak_segments(folder: Path) -> list[tuple]:
    soak = json.loads((folder / "soak.json").read_text())
    return [(s["name"], s["seed"], s["duration"], s["command"], s["verdict"]) for s in soak["segments"]]


@pytest.mark.nightly
def test_a_soak_on_the_cluster_equals_two_soak_shards_merged_and_the_local_soak(cluster, tmp_path):
    """One 3 s segment per slot: the cluster's two slots make seg-0001 (seed 1) and seg-0002 (seed 2) at
    once, as shards 1/2 and 2/2 do side by side; the local soak makes seg-0001 alone, the same run."""
    soak = ("soak", "--profile", "smoke", "--minutes", "0.05", "--checkpoint", "3", "--no-replay")
    shards = [(*soak, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}" / "soak")) for i in (1, 2)]
    procs, outs = run_together([(*soak, "--cluster", cluster.address, "--sample", "1", "--out",
                              str(tmp_path / "remote" / "soak")), (*soak, "--out", str(tmp_path / "local" / "soak")),
                             *shards], timeout=200)  # fmt: skip
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err[-2000:] for _, err in outs]
    merged = takeover("merge", str(tmp_path / "s1" / "soak"), str(tmp_path / "s2" / "soak"), "--out",
                      str(tmp_path / "merged"))  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr
    remote = _soak_segments(tmp_path / "remote" / "soak")
    assert [s[:3] for s in remote] == [("seg-0001", 1, 3.0), ("seg-0002", 2, 3.0)]
    assert remote == _soak_segments(tmp_path / "merged")  # same runs (reproduce lines) and verdicts
    assert remote[:1] == _soak_segments(tmp_path / "local" / "soak")
    assert all(s[4] == "valid" for s in remote)
    with open(tmp_path / "remote" / "soak" / "resources.csv", newline="") as fh:  # the panel's line, sampled
        shown = [row["segment"] for row in csv.DictReader(fh)]
    assert any("0 done, 2 running" in line for line in shown), shown  # as the runs ran, not as submitted
    assert not cluster.leftovers()


@pytest.mark.nightly
def test_a_hunt_on_the_cluster_finds_the_violation_the_local_hunt_finds(cluster, tmp_path):
    hunt = ("hunt", "--queue", "takeover.queues.planted:NoBumpOnTakeover", "--profile", "smoke", "--run-seconds",
            "3", "--budget", "120")  # fmt: skip
    procs, outs = run_together([(*hunt, "--cluster", cluster.address, "--out", str(tmp_path / "remote")),
                             (*hunt, "--out", str(tmp_path / "local"))], timeout=200)
    assert [p.returncode for p in procs] == [1, 1], [err[-2000:] for _, err in outs]
    remote, local = (json.loads((tmp_path / d / "hunt.json").read_text()) for d in ("remote", "local"))
    assert remote["verdict"] == local["verdict"] == "invalid"
    assert all("generation_monotonic" in doc["found"]["violated"] for doc in (remote, local))
    assert remote["found"]["command"].startswith("takeover stress ") and Path(remote["found"]["run_dir"]).is_dir()
    assert not cluster.leftovers()


@pytest.mark.nightly
@pytest.mark.timeout(420)
def test_a_tune_on_the_cluster_gives_the_local_answer(cluster, tmp_path):
    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 22, "p99": 24, "max": 25}))
    tune = ("tune", "--task-times", str(times), "--queue", "queue_without_extensions:BareQueue", "--target", "200",
            "--time-scale", "100", "--budget", "4")  # fmt: skip
    procs, outs = run_together([(*tune, "--cluster", cluster.address, "--out", str(tmp_path / "remote")),
                             (*tune, "--out", str(tmp_path / "local"))], timeout=360)
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    remote, local = (json.loads((tmp_path / d / "tuning.json").read_text()) for d in ("remote", "local"))
    assert remote["lease"] == local["lease"] == 25.0 and remote["resolved"] and local["resolved"]
    assert [(e["search"], e["value"], e["state"]) for e in remote["evidence"]] == \
        [(e["search"], e["value"], e["state"]) for e in local["evidence"]]
    ran = json.loads((tmp_path / "remote" / "fanout.json").read_text())["runs"]
    assert len(ran) == remote["runs"] and all(r["worker"].startswith("tcp://") for r in ran)
    assert not cluster.leftovers()
