"""``--shard I/N`` and ``takeover merge`` with real runs: two shards merged give the unsharded command's result.

The tune and the selftest here; the soak's shards are compared with a soak on a real dask cluster in
tests/system/test_fanout.py (N shards are what a soak on N slots makes). The joining itself, without runs, is
tested in tests/unit/test_shard_merge.py. Each command is run on its tiniest config, but these are real runs
(a minute or two each on 2 cores): nightly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.processes import run_together, takeover

pytestmark = [pytest.mark.slow, pytest.mark.nightly, pytest.mark.timeout(420)]

# A queue without extend(): only the fixed-lease search, on a 4-point ladder (20, 25, 30, 40 s) whose answer
# is far from either side of the target (20 s loses most tasks, 25 s about 1 in 50 of a target of 200 per
# 1000), so two tunings of it agree.
TUNE = ("tune", "--queue", "queue_without_extensions:BareQueue", "--target", "200", "--time-scale", "100",
        "--budget", "4")  # fmt: skip


def _both(*commands: tuple[str, ...], timeout: float = 360) -> list[tuple[int, str, str]]:
    """Run the commands side by side; each one's exit code, stdout and stderr."""
    procs, outs = run_together(list(commands), timeout)
    return [(p.returncode, o, e) for p, (o, e) in zip(procs, outs, strict=True)]


def _evidence(folder: Path) -> tuple[object, ...]:
    data = json.loads((folder / "tuning.json").read_text())
    points = [(e["search"], e["value"], e["state"]) for e in data["evidence"]]
    return data["lease"], data["heartbeat"], data["resolved"], points


def test_a_tuning_merged_from_two_shards_gives_the_unsharded_answer(tmp_path: Path) -> None:
    times = tmp_path / "times.json"
    times.write_text(json.dumps({"p50": 20, "p90": 22, "p99": 24, "max": 25}))
    spec = ("--task-times", str(times))
    shards = _both(*[(*TUNE, *spec, "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}")) for i in (1, 2)])
    assert [code for code, _, _ in shards] == [0, 0], [err[-2000:] for _, _, err in shards]
    whole = takeover(*TUNE, *spec, "--out", str(tmp_path / "whole"), timeout=360)
    assert whole.returncode == 0, whole.stderr[-2000:]
    merged = takeover("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert _evidence(tmp_path / "m") == _evidence(tmp_path / "whole")
    assert _evidence(tmp_path / "m")[0] == 25.0
    assert "recommended lease: 25 s" in merged.stdout and "recommended lease: 25 s" in whole.stdout
    data = json.loads((tmp_path / "m" / "tuning.json").read_text())
    assert data["command"] == json.loads((tmp_path / "whole" / "tuning.json").read_text())["command"]
    for row in data["evidence"]:  # every run the path read is in the merged folder
        assert row["runs"] >= 1
    assert len(list((tmp_path / "m" / "cells").iterdir())) == data["runs"]


def test_a_selftest_merged_from_two_shards_gives_the_unsharded_verdict(tmp_path: Path) -> None:
    quick = ("selftest", "--quick", "--json")
    results = _both(*[(*quick, "--shard", f"{i}/2", "--keep", str(tmp_path / f"s{i}")) for i in (1, 2)],
                    (*quick, "--keep", str(tmp_path / "whole")))  # fmt: skip
    assert [code for code, _, _ in results] == [0, 0, 0], [err[-2000:] for _, _, err in results]
    merged = takeover("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"))
    assert merged.returncode == 0, merged.stdout + merged.stderr
    one, whole = (json.loads((tmp_path / d / "selftest.json").read_text()) for d in ("m", "whole"))
    assert [(r["queue"], r["caught"]) for r in one["planted"]] == [(r["queue"], r["caught"]) for r in whole["planted"]]
    assert [(r["seed"], r["valid"]) for r in one["reference"]] == [(r["seed"], r["valid"]) for r in whole["reference"]]
    assert one["ok"] is whole["ok"] is True
    shard_bugs = [[r["queue"] for r in json.loads((tmp_path / f"s{i}" / "selftest.json").read_text())["planted"]]
                  for i in (1, 2)]  # fmt: skip
    assert shard_bugs == [["NoBumpOnTakeover"], ["StealsLiveLeases"]]  # one planted bug each
    assert "2/2 planted bugs caught, reference passed on 1 seed(s)" in merged.stdout
