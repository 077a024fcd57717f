"""``takeover bench --detection --shard I/N`` and its ``takeover merge``, without runs.

What is tested here is the split and the joining, where a sharded detection bench could drift from the
unsharded one: the shards make every run of the bench once, and the figures merged from the shards' rows are
the figures the unsharded bench computes from the same rows; folders that are not the N shards of one bench
are refused. Real runs (a tiny bench in two shards, merged, against the unsharded bench) are in
tests/system/test_detection_shard.py (nightly).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from takeover._internal.fanout.merge import write_shard
from takeover._internal.sweep.runner import shard_of
from takeover.benchmarks.detection import MODES, REFERENCE, figures, run_key, run_order
from takeover.benchmarks.detection_shard import RUNS_DIR, write_detection_shard
from takeover.cli import main

BUGS = ["FinishIgnoresGeneration", "StealsLiveLeases"]


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_the_shards_make_every_run_of_the_bench_once(n: int) -> None:
    order = run_order(BUGS, 3, MODES, reference=True)
    assert len(order) == 3 * 3 * 2 and len(set(order)) == len(order)
    shards = [shard_of(order, (i, n)) for i in range(1, n + 1)]
    assert sorted(r for s in shards for r in s) == sorted(order)
    assert sum(map(len, shards)) == len(order)


def _row(queue: str, mode: str, seed: int, tmp: Path) -> dict[str, Any]:
    """A judged run, its outcome a function of its cell (the same whichever shard makes it)."""
    caught = queue == BUGS[0] or (queue == BUGS[1] and seed == 1 + (mode == "random"))
    row: dict[str, Any] = {"queue": queue, "seed": seed, "mode": mode, "exit": int(caught), "caught": caught,
                           "violated": ["lease_exclusive"] if caught else [],
                           "first_violation_s": 0.5 * seed if caught else None,
                           "first_invariant": "lease_exclusive" if caught else None, "at_end": False,
                           "wall_s": 10.0 + seed, "aimed": {}}  # fmt: skip
    if queue == REFERENCE:
        false_alarm = mode == "random" and seed == 2
        row.update(valid=not false_alarm, not_holding={"no_lost_task": []} if false_alarm else {})
        if false_alarm:  # a kept run folder: the evidence, moved into the shard's folder, copied to the merged one
            folder = tmp / "made" / run_key((queue, mode, seed))
            folder.mkdir(parents=True)
            (folder / "summary.json").write_text("{}")
            row["run_dir"] = str(folder)
    else:
        row["defects"] = []
    return row


def _made(rows: list[dict[str, Any]], seconds: float = 3.0) -> dict[str, Any]:
    return {"config": {"bugs": BUGS, "seeds": 3, "seconds": seconds, "profile": "stress", "modes": list(MODES),
                       "reference": True, "hosts": 0},
            "jobs": 2, "rows": rows, "load_avg": {"before": [1.0, 1.0, 1.0], "after": [2.0, 2.0, 2.0]},
            "elapsed_s": 60.0}  # fmt: skip


def _shards(tmp: Path, n: int, seconds: float = 3.0) -> list[Path]:
    order = run_order(BUGS, 3, MODES, reference=True)
    folders = []
    for i in range(1, n + 1):
        mine = shard_of(order, (i, n))
        rows = [_row(q, m, s, tmp) for q, m, s in reversed(mine)]  # in the order they happened to finish
        write_detection_shard(tmp / f"s{i}", (i, n), _made(rows, seconds), quick=False)
        folders.append(tmp / f"s{i}")
    return folders


def test_two_shards_merged_give_the_unsharded_figures(tmp_path: Path) -> None:
    whole = figures(_made([_row(q, m, s, tmp_path / "w") for q, m, s in run_order(BUGS, 3, MODES, True)]))
    one, two = _shards(tmp_path, 2)
    assert main(["merge", str(two), str(one), "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "bench.json").read_text())["detection"]

    kept = tmp_path / "m" / RUNS_DIR / "reference-random-s2"
    assert (kept / "summary.json").is_file()  # the false alarm's folder came with its shard
    assert merged["reference"]["random_only"]["invalid"][0]["run_dir"] == str(kept)
    assert merged["sharded"]["shards"] == 2 and [p["runs"] for p in merged["sharded"]["per_shard"]] == [9, 9]
    for fig in (whole, merged):  # where the runs were, and how the bench was timed, are the only differences
        for key in ("runs_dir", "sharded", "load_avg", "elapsed_s"):
            fig.pop(key, None)
        fig["reference"]["random_only"]["invalid"][0].pop("run_dir")
    assert merged == whole
    assert [b["caught"] for b in merged["bugs"].values()] == [3, 1]  # the rows' outcomes, counted once each


def test_merge_refuses_what_is_not_the_n_shards_of_one_bench(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    one, two = _shards(tmp_path / "a", 2)
    (other,) = _shards(tmp_path / "b", 1)
    slow = _shards(tmp_path / "c", 2, seconds=10.0)[1]
    selftest = tmp_path / "selftest"
    selftest.mkdir()
    write_shard(selftest, "selftest", (2, 2), ["X"], {})
    cases = {"missing [2]": [one], "repeated [1]": [one, one, two], "another bench --detection": [one, other],
             "seconds differ": [one, slow], "another selftest": [one, selftest]}
    for i, (words, dirs) in enumerate(cases.items()):
        assert main(["merge", *map(str, dirs), "--out", str(tmp_path / f"m{i}")]) == 2, words
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (words, err)
        assert not (tmp_path / f"m{i}" / "bench.json").exists()
    runs = json.loads((two / "detection-runs.json").read_text())
    (two / "detection-runs.json").write_text(json.dumps({**runs, "rows": runs["rows"][1:]}))
    assert main(["merge", str(one), str(two), "--out", str(tmp_path / "cut")]) == 2
    assert "did not finish" in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["--shard", "1/2", "--out", "d"], "give --detection"),
    (["--only", "detection", "--only", "queue_vs_raw", "--shard", "1/2", "--out", "d"], "no other --only"),
    (["--detection", "--shard", "1/2"], "--shard needs --out DIR"),
    (["--detection", "--shard", "3/2", "--out", "d"], "--shard: must be I/N"),
])  # fmt: skip
def test_bench_shard_refuses_bad_input_in_one_line(argv: list[str], words: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and not (tmp_path / "d").exists()
