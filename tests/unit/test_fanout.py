"""The fan-out seam's bad input, in this process: every mistake one line and exit 2, before anything runs."""

from __future__ import annotations

import sys

import pytest

from takeover._internal.fanout.merge import write_shard
from takeover._internal.sweep.runner import shard_of
from takeover.cli import main


def _sweep(tmp_path, *extra: str) -> list[str]:
    return ["sweep", "--grid", "workloads/sweep-tiny", "--out", str(tmp_path / "out"), *extra]


def test_cluster_without_dask_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as where the extra takeover[cluster] is missing
    assert main(_sweep(tmp_path, "--cluster", "local:2")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'takeover[cluster]'" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("address", ["local:0", "local:x", "10.0.0.1:8786", "tcp://host", "tcp://:8786"])
def test_a_malformed_cluster_address_is_one_line_and_exit_2(tmp_path, capsys, address) -> None:
    assert main(_sweep(tmp_path, "--cluster", address)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--cluster" in err[0] and address in err[0]


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1", "a/b", "1/0"])
def test_a_bad_shard_is_one_line_and_exit_2(tmp_path, capsys, shard) -> None:
    assert main(_sweep(tmp_path, "--shard", shard)) == 2
    assert "--shard" in capsys.readouterr().err


def test_the_shards_split_the_runs_once_each_in_order() -> None:
    runs = list(range(7))
    parts = [shard_of(runs, (i, 3)) for i in (1, 2, 3)]
    assert parts == [[0, 3, 6], [1, 4], [2, 5]] and shard_of(runs, None) == runs


def test_merge_refuses_what_is_not_the_n_shards_of_one_sweep(tmp_path, capsys) -> None:
    order = ["a-s1", "b-s1", "c-s1"]
    for name, shard, own in (("s1", (1, 3), order), ("s2", (2, 3), order), ("x", (3, 3), ["other-s1"])):
        (tmp_path / name).mkdir()
        write_shard(tmp_path / name, "sweep", shard, own, {})
    (tmp_path / "plain").mkdir()
    for dirs, says in ((["s1", "s2"], "missing [3]"), (["s1", "s1", "s2"], "missing [3]; repeated [1]"),
                       (["s1", "s2", "x"], "another sweep"), (["s1", "plain"], "not a shard's folder")):
        assert main(["merge", *[str(tmp_path / d) for d in dirs], "--out", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "m").exists()


def test_merged_hunt_shards_stop_at_the_lowest_violating_run(tmp_path, capsys) -> None:
    from takeover._internal import store

    def row(run: int, verdict: str) -> dict:
        return {"run": run, "seed": run, "mode": "aimed", "verdict": verdict, "kept": True, "violated": {},
                "run_dir": str(tmp_path / f"s{(run - 1) % 2 + 1}" / f"seed-{run}"), "command": f"takeover stress {run}"}

    shards = {1: [row(1, "valid"), row(3, "violated")], 2: [row(2, "valid"), row(4, "violated")]}
    for i, rows in shards.items():
        folder = tmp_path / f"s{i}"
        for r in rows:
            (folder / f"seed-{r['run']}").mkdir(parents=True)
        found = {**rows[-1], "violated": {"generation_monotonic": 1}, "detected_after_s": 1.0}
        store.write_hunt_summary(folder, {"status": "finished", "runs": rows, "found": found, "elapsed_s": 5.0})
        write_shard(folder, "hunt", (i, 2), [], {"queue": "q:Q"})
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m")]) == 1
    merged = store.read_hunt_summary(tmp_path / "m")
    assert merged is not None
    assert [(r["run"], r["verdict"]) for r in merged["runs"]] == [(1, "valid"), (2, "valid"), (3, "violated")]
    assert merged["found"]["run"] == 3 and merged["verdict"] == "invalid" and merged["exit_code"] == 1
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["hunt.json", "seed-1", "seed-2", "seed-3"]
    assert "first at run 3" in capsys.readouterr().out
