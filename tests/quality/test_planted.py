"""Test the tester: short real stress runs must catch planted bugs and pass the reference queue."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.checker import INVARIANTS
from harness.queues.planted import PLANTED


def test_planted_queues_cover_every_invariant() -> None:
    covered = {name for expected in PLANTED.values() for name in expected}
    assert covered == set(INVARIANTS)


@pytest.mark.timeout(400)
def test_quick_selftest_catches_planted_bugs_and_passes_the_reference(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "harness", "selftest", "--quick", "--seeds", "2", "--json",
                          "--keep", str(tmp_path)], capture_output=True, text=True, timeout=390)
    result = json.loads(out.stdout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert result["ok"] is True
    for row in result["planted"]:
        assert row["caught"], row
        assert set(row["violated"]) & set(row["expected"])
    assert [r["valid"] for r in result["reference"]] == [True]
