"""``takeover bench --detection --shard I/N`` with real runs: two shards merged give the unsharded bench's table.

The joining itself, without runs, is tested in tests/unit/test_detection_shard.py. Here the tiniest bench
(``--quick``: one reliably caught planted bug and the reference queue, one seed, both modes, 3 s runs) is made
whole and in two shards side by side, and the merged ``bench.json`` must hold the same runs, caught counts and
verdicts. Real runs: nightly (--durations 132 s at load 8.4 on 2 cores; the whole bench alone 44 s at load 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.processes import start_takeover, takeover

pytestmark = [pytest.mark.slow, pytest.mark.nightly, pytest.mark.timeout(420)]

BENCH = ("bench", "--quick", "--only", "detection")


def _verdicts(fig: dict[str, Any]) -> tuple[object, ...]:
    """What a sharded bench must give as the unsharded one does: the cells, caught counts and verdicts (not the
    time target's: a median first violation is a timing, which differs between any two benches)."""
    bugs = {n: (b["runs"], b["caught"], b["random_only"]["runs"], b["random_only"]["caught"], b["caught_pass"])
            for n, b in fig["bugs"].items()}  # fmt: skip
    runs = {n: [(r["mode"], r["seed"], r["caught"]) for r in b["per_run"]] for n, b in fig["bugs"].items()}
    ref = {k: (v["runs"], v["valid"]) for k, v in fig["reference"].items()}
    verdicts = (fig["pass"]["caught"], fig["pass"]["reference"])
    return bugs, runs, ref, verdicts, fig["total_runs"], fig["random_only"]["total_runs"]


def test_a_detection_bench_merged_from_two_shards_gives_the_unsharded_table(tmp_path: Path) -> None:
    whole = takeover(*BENCH, "--out", str(tmp_path / "whole.json"), timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]
    procs = [start_takeover(*BENCH, "--detection-jobs", "1", "--shard", f"{i}/2", "--out", str(tmp_path / f"s{i}"))
             for i in (1, 2)]  # fmt: skip
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    assert not (tmp_path / "s1" / "bench.json").exists()  # a shard's figures alone would be misread
    merged = takeover("merge", str(tmp_path / "s2"), str(tmp_path / "s1"), "--out", str(tmp_path / "m"))
    assert merged.returncode == 0, merged.stderr[-2000:]
    assert "StealsLiveLeases" in merged.stdout and "detection power" in merged.stdout
    a = json.loads((tmp_path / "whole.json").read_text())["detection"]
    b = json.loads((tmp_path / "m" / "bench.json").read_text())["detection"]
    assert _verdicts(b) == _verdicts(a)
    assert b["sharded"]["shards"] == 2 and sum(p["runs"] for p in b["sharded"]["per_shard"]) == 4
