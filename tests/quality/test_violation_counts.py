"""Exact violation counts, which the known-verdict cases do not pin (they need only one or more)."""

from __future__ import annotations

import io
import json

from takeover._internal.pipeline import check_and_report
from tests.quality.builder import Run


def test_a_claim_both_duplicate_and_inverted_counts_once(tmp_path) -> None:
    """w2 is given generation 1 again after w3's generation 2 returned: one bad claim, one violation."""
    r = Run()
    r.register("a")
    for p in (1, 2, 3):
        r.spawn(p, f"w{p}")
    r.claim(1, 0, "a", 1)
    r.work(3, 6, "a", 2, status="rejected")
    r.claim(2, 12, "a", 1)
    r.snap(("a", "running", 1, 17.0))
    folder = r.write(tmp_path / "run")
    check_and_report(folder, out=io.StringIO(), reports=False)
    inv = json.loads((folder / "summary.json").read_text())["invariants"]["generation_monotonic"]
    assert inv["valid"] is False
    assert inv["violations"] == 1, inv
