"""``--shard I/N`` and ``takeover merge`` for tune, soak and selftest, in this process and without runs.

What is tested here is the joining, which is where a sharded result could drift from the unsharded one:
the tuning's search walked over the shards' runs gives the answer the unsharded search gives from runs
with the same outcomes (an oracle stands in for the runs, as in tests/unit/test_tune.py); a soak's and a
selftest's shards put back in the unsharded order, with the unsharded verdict and exit code. The commands
themselves, with real runs, merged against the unsharded command, are in tests/system/test_shard_merge.py
(nightly).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from takeover._internal import store
from takeover._internal.fanout.merge import write_shard
from takeover._internal.task_times import parse_task_times
from takeover._internal.tune.driver import Tuning
from takeover._internal.tune.plan import Plan
from takeover._internal.tune.result import tuning_json
from takeover._internal.tune.shard import SHARDED, ShardTuning, points, replay
from takeover.cli import main

# -- tune ---------------------------------------------------------------------------------------------------


TIMES = Path(__file__).resolve().parents[2] / "examples" / "task-times-light.csv"


def _plan(**kw: Any) -> Plan:
    values: dict[str, Any] = {"spec": str(TIMES), "target": 20.0, "budget_s": 1e9, "scale": 250.0,
                              "times": parse_task_times('{"p50": 20, "p90": 30, "p99": 40, "max": 50}', "f"),
                              "scale_derived": False, "latency_s": 0.001, "queue": "q:Q", "has_extend": True}
    values.update(kw)
    return Plan(**values)


def _outcome(lease: float, fraction: float, runs_before: int) -> int:
    """Lease-caused duplicates in a run of 300 tasks: many below 40 s (fixed) or 25 s (heartbeat), none
    above; at 40 s fixed the first run is undecided (6 in 300 straddles 20 per 1000) and the second decides;
    the heartbeat interval holds up to 0.5 of the lease."""
    if fraction == 0:
        return 0 if lease > 40 else (6 if runs_before == 0 else 0) if lease == 40 else 60
    return 0 if lease >= 25 and fraction <= 0.5 else 60


def _row(cfg: Any, k: int, tasks: int) -> dict[str, Any]:
    return {"valid": True, "violated": "", "tasks": tasks, "dup_lost_lease": k, "dup_s5": 0, "dup_extra": k,
            "heartbeat_fraction": cfg.heartbeat / cfg.lease if cfg.heartbeat else 0.0, "remedy": cfg.remedy,
            "wasted_work_s": 0.1, "wasted_attempts_pct": 1.0, "recovery_p50": cfg.lease / 2,
            "recovery_p99": cfg.lease, "run_dir": cfg.out, "seed": cfg.seed, "cell": "c"}  # fmt: skip


def _feed(tuning: Tuning) -> None:
    """Make every run the tuning asks for, with :func:`_outcome` as its result."""
    seen: dict[tuple[float, float], int] = {}
    for cell, _seed, cfg in tuning.runs():
        point = (round(cfg.lease * cfg.task_time.scale, 6), cell.mode.heartbeat)
        tuning.on_row(_row(cfg, _outcome(*point, seen.get(point, 0)), tuning.plan.tasks_per_run))
        seen[point] = seen.get(point, 0) + 1


def test_a_tuning_merged_from_two_shards_gives_the_unsharded_answer(tmp_path: Path) -> None:
    plan = _plan()
    whole = Tuning(plan, tmp_path / "whole")
    _feed(whole)
    shards = [ShardTuning(plan, tmp_path / f"s{i}", (i, 2)) for i in (1, 2)]
    for shard in shards:
        _feed(shard)
    made = [m for shard in shards for m in shard.made]
    assert sorted(m["point"] for m in made if m["rep"] == 0) == list(range(len(points(plan))))  # each point once
    merged = replay(plan, tmp_path / "merged", made)

    assert merged.recommended() == whole.recommended() == (25.0, 0.5)
    assert merged.resolved() and whole.resolved()
    a, b = (tuning_json(t, command="c", interrupted=False, elapsed_s=0) for t in (whole, merged))
    for key in ("lease", "heartbeat", "heartbeat_fraction", "duplicates_per_1000", "duplicates_per_1000_upper",
                "alternatives", "resolved"):
        assert a[key] == b[key], key
    searched = [e for e in a["evidence"] if e["search"] != "remedies"]
    assert [(e["search"], e["value"], e["runs"], e["state"]) for e in b["evidence"]] == \
        [(e["search"], e["value"], e["runs"], e["state"]) for e in searched]
    # The path read the same runs, point by point, in the same order (only their seeds are the shards').
    key = [(r["phase"], r["lease_prod"], r["heartbeat_fraction"]) for r in whole.rows if r["phase"] in
           ("fixed", "heartbeat", "fraction")]
    assert [(r["phase"], r["lease_prod"], r["heartbeat_fraction"]) for r in merged.rows] == key
    assert b["searches"]["remedies"]["stopped"] == SHARDED and "scale" not in b["searches"]


def test_a_point_no_shard_decided_stops_its_search_on_the_budget(tmp_path: Path) -> None:
    plan = _plan(has_extend=False)
    shard = ShardTuning(plan, tmp_path / "s1", (1, 2))
    _feed(shard)
    merged = replay(plan, tmp_path / "merged", shard.made)  # shard 2's points missing
    assert merged.phases["fixed"].stopped == "budget" and not merged.resolved()


def test_tune_shard_needs_an_explicit_time_scale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    times = tmp_path / "t.json"
    times.write_text('{"p50": 20, "p90": 30, "p99": 40, "max": 50}')
    assert main(["tune", "--task-times", str(times), "--shard", "1/2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--shard needs --time-scale" in err[0]


# -- soak ---------------------------------------------------------------------------------------------------


def _segment(root: Path, name: str, seed: int, verdict: str, kind: str = "segment") -> dict[str, Any]:
    (root / name).mkdir(parents=True)
    (root / name / "summary.json").write_text("{}")
    return {"name": name, "kind": kind, "seed": seed, "queue": "q:Q", "duration": 3.0, "elapsed": 5.0,
            "interrupted": False, "mix": {}, "verdict": verdict, "exit_code": 1 if verdict == "invalid" else 0,
            "registered": 10, "finished": 10, "faults": {"kills": 1, "pauses": 2, "lost_replies": 0, "slow": 0},
            "duplicate_tasks": 1, "extra_actions": 1,
            "violations": {"no_lost_task": 2} if verdict == "invalid" else {}, "inconclusive": [],
            "history_lines": 100, "command": f"takeover stress --seed {seed}", "run_dir": str(root / name)}


def _soak_shard(root: Path, shard: tuple[int, int], segments: list[dict[str, Any]],
                replays: list[dict[str, Any]]) -> None:
    from takeover._internal.soak.merge import write_soak_shard

    root.mkdir(parents=True, exist_ok=True)
    soak = {"status": "finished", "verdict": "valid", "started": 1.0, "elapsed": 9.0, "minutes": 0.05,
            "checkpoint": 3.0, "command": "takeover soak", "seed_bank": "bank.json",
            "config": {"seed": 1, "out": str(root)}, "segments": segments, "replays": replays, "banked": [],
            "skipped_replays": [], "resources": {"samples": 2, "warnings": [], "peak": {"rss_mb": 50.0 * shard[0]}}}
    store.write_soak_summary(root, soak)
    write_soak_shard(root, shard, soak)


def test_a_soak_merged_from_its_shards_is_in_segment_order_with_the_soak_verdict(tmp_path: Path) -> None:
    one, two = tmp_path / "s1", tmp_path / "s2"
    _soak_shard(one, (1, 2), [_segment(one, "seg-0001", 1, "valid"), _segment(one, "seg-0003", 3, "valid")],
                [_segment(one, "replay-01", 7, "valid", "replay")])
    _soak_shard(two, (2, 2), [_segment(two, "seg-0002", 2, "invalid")], [])
    assert main(["merge", str(two), str(one), "--out", str(tmp_path / "m")]) == 1
    merged = store.read_soak_summary(tmp_path / "m")
    assert merged is not None
    assert [(s["name"], s["seed"], s["verdict"]) for s in merged["segments"]] == \
        [("seg-0001", 1, "valid"), ("seg-0002", 2, "invalid"), ("seg-0003", 3, "valid")]
    assert [s["name"] for s in merged["replays"]] == ["replay-01"]
    assert (merged["verdict"], merged["exit_code"], merged["shards"]) == ("invalid", 1, 2)
    assert merged["totals"]["segments"] == 3 and merged["totals"]["violations"] == 2
    assert merged["totals"]["kills"] == 4 and merged["resources"]["peak"] == {"rss_mb": 100.0}
    assert (tmp_path / "m" / "seg-0002" / "summary.json").is_file()
    assert merged["segments"][1]["run_dir"] == str(tmp_path / "m" / "seg-0002")


def test_soak_shards_of_two_different_soaks_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one, two = tmp_path / "s1", tmp_path / "s2"
    _soak_shard(one, (1, 2), [], [])
    _soak_shard(two, (2, 2), [], [])
    doc = json.loads((two / "shard.json").read_text())
    doc["order"] = ["another soak"]
    (two / "shard.json").write_text(json.dumps(doc))
    assert main(["merge", str(one), str(two), "--out", str(tmp_path / "m")]) == 2
    assert "another soak" in capsys.readouterr().err


def test_a_soak_shard_makes_every_nth_segment_and_replay() -> None:
    from itertools import islice

    from takeover._internal.soak.driver import SoakOptions

    opts = SoakOptions(base=None, out=Path("x"), minutes=1, bank=Path("b"), shard=(2, 3))  # type: ignore[arg-type]
    assert list(islice(opts.segment_indices(), 3)) == [1, 4, 7]
    assert [n for n in range(1, 8) if opts.mine(n)] == [2, 5]


# -- selftest -----------------------------------------------------------------------------------------------


def _selftest_shard(root: Path, shard: tuple[int, int], planted: list[dict[str, Any]], refs: list[dict[str, Any]],
                    order: list[str]) -> None:
    root.mkdir(parents=True)
    for row in planted:
        (root / f"{row['queue']}-s1").mkdir()
        row["run_dir"] = str(root / f"{row['queue']}-s1")
    doc = {"ok": True, "profile": "smoke", "duration": 3.0, "planted": planted, "reference": refs, "runs": str(root)}
    (root / "selftest.json").write_text(json.dumps(doc))
    write_shard(root, "selftest", shard, order, {"profile": "smoke", "duration": 3.0})


def _caught(name: str) -> dict[str, Any]:
    return {"queue": name, "expected": ["lease_exclusive"], "caught": True, "tries": 1, "seed": 1, "seconds": 4.0,
            "violated": ["lease_exclusive"], "first_violation_at": 1.5}


def test_a_selftest_merged_from_its_shards_lists_the_bugs_in_order(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    order = ["A", "B", "C", "reference-s1", "reference-s2"]
    _selftest_shard(tmp_path / "s1", (1, 2), [_caught("A"), _caught("C")],
                    [{"seed": 2, "valid": True, "exit": 0, "seconds": 4.0, "not_holding": []}], order)
    missed = {"queue": "B", "expected": ["lease_exclusive"], "caught": False, "tries": 3, "violated": [],
              "seconds": 4.0}
    _selftest_shard(tmp_path / "s2", (2, 2), [missed],
                    [{"seed": 1, "valid": True, "exit": 0, "seconds": 4.0, "not_holding": []}], order)
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m")]) == 1
    out = capsys.readouterr().out
    merged = json.loads((tmp_path / "m" / "selftest.json").read_text())
    assert [r["queue"] for r in merged["planted"]] == ["A", "B", "C"]
    assert [r["seed"] for r in merged["reference"]] == [1, 2] and merged["ok"] is False
    assert "MISSED  B" in out and "selftest: 2/3 planted bugs caught, reference passed on 2 seed(s)" in out
    assert (tmp_path / "m" / "A-s1").is_dir()


def test_selftest_shard_needs_a_folder_to_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--quick", "--shard", "1/2"]) == 2
    assert "--shard needs --keep DIR" in capsys.readouterr().err


def test_the_merged_soak_joins_the_seed_banks_beside_its_shards(tmp_path: Path) -> None:
    from takeover._internal.config import RunConfig
    from takeover._internal.soak import seedbank

    dirs = [tmp_path / f"job{i}" / "soak" for i in (1, 2)]
    for i, d in enumerate(dirs, 1):
        _soak_shard(d, (i, 2), [], [])
        for seed in (i, 3):  # seed 3 failed in both jobs' banks (replayed by one, banked before): once
            seedbank.bank(d.parent / "seed-bank.json", RunConfig(seed=seed).to_dict(), violated=["x"], run_dir="r")
    assert main(["merge", *map(str, dirs), "--out", str(tmp_path / "m")]) == 3  # no segment: nothing tested
    joined = seedbank.load(tmp_path / "m" / "seed-bank.json")
    assert sorted(e["seed"] for e in joined) == [1, 2, 3]
    assert store.read_soak_summary(tmp_path / "m")["seed_bank"] == str(tmp_path / "m" / "seed-bank.json")


def test_a_violation_in_a_run_the_search_did_not_read_is_still_the_merged_answer(tmp_path: Path) -> None:
    """A queue bug found by any shard is never dropped: no recommendation, the violation instead."""
    plan = _plan(has_extend=False)
    shards = [ShardTuning(plan, tmp_path / f"s{i}", (i, 2)) for i in (1, 2)]
    for shard in shards:
        _feed(shard)
    made = [m for shard in shards for m in shard.made]
    read = {r["seed"] for r in replay(plan, tmp_path / "m1", made).rows}
    unread = next(m for m in made if m["row"]["seed"] not in read)
    unread["row"] = {**unread["row"], "valid": False, "violated": "lease_exclusive", "lease": 0.2}
    merged = replay(plan, tmp_path / "m2", made)
    data = tuning_json(merged, command="c", interrupted=False, elapsed_s=0)
    assert data["lease"] is None and [v["lease"] for v in data["violations"]] == [50.0]


# -- damaged shard files (issue 34): one line, exit 2, nothing merged -------------------------------------------


def _hunt_shards(tmp_path: Path) -> list[Path]:
    dirs = []
    for i in (1, 2):
        d = tmp_path / f"h{i}"
        d.mkdir()
        write_shard(d, "hunt", (i, 2), [], {"command": "takeover hunt"})
        store.write_hunt_summary(d, {"status": "finished", "verdict": "valid", "elapsed_s": 1.0, "found": None,
                                     "runs": [{"run": i, "verdict": "valid", "run_dir": str(d / f"run-{i}")}]})
        dirs.append(d)
    return dirs


def _damage_shard(d: Path, text: str) -> None:
    (d / "shard.json").write_text(text)


def _damage_hunt(d: Path, text: str) -> None:
    (d / store.HUNT_FILE).write_text(text)


@pytest.mark.parametrize(("damage", "words"), [
    (lambda d: _damage_shard(d, (d / "shard.json").read_text()[:25]), "shard.json is not valid JSON: not JSON"),
    (lambda d: _damage_shard(d, json.dumps({"command": "hunt", "shard": [2, 2], "meta": {}})),
     "its key 'order' is missing"),
    (lambda d: _damage_shard(d, json.dumps({"command": "hunt", "shard": [2], "order": [], "meta": {}})),
     "its 'shard' must be [I, N]"),
    (lambda d: _damage_shard(d, json.dumps({"command": "hunt", "shard": [2, 2], "order": {}, "meta": {}})),
     "its 'order' must be a list, not an object"),
    (lambda d: _damage_shard(d, "[" * 100_000), "nested too deeply"),
    (lambda d: _damage_shard(d, "[]"), "must hold a shard's record (command, shard [I, N], order, meta), not a list"),
    (lambda d: _damage_hunt(d, json.dumps({"status": "finished", "runs": "all of them"})),
     "its 'runs' must be a list, not text"),
    (lambda d: _damage_hunt(d, json.dumps({"status": "finished", "runs": [{"seed": 1}]})),
     "every run must be an object with 'run'"),
    (lambda d: _damage_hunt(d, '{"status": "finished", "runs": [1' + "0" * 5000 + "]}"),
     "Exceeds the limit (4300 digits)"),
], ids=["truncated", "no-order", "short-shard", "order-object", "nested", "a-list", "runs-text", "run-row",
        "huge-int"])
def test_a_damaged_shard_folder_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       damage: Any, words: str) -> None:
    one, two = _hunt_shards(tmp_path)
    damage(two)
    out = tmp_path / "m"
    assert main(["merge", str(one), str(two), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("takeover: error: ") and str(two) in err, err
    assert words in err and len(err) < 300, err
    assert not out.exists() or not any(out.iterdir())


def test_undamaged_hunt_shards_merge(tmp_path: Path) -> None:
    """The other side of the test above: the same two shards, undamaged, merge (the damage is what fails)."""
    one, two = _hunt_shards(tmp_path)
    assert main(["merge", str(one), str(two), "--out", str(tmp_path / "m")]) == 0
    assert [r["run"] for r in store.read_json_object(tmp_path / "m" / store.HUNT_FILE)["runs"]] == [1, 2]
