"""``python -m takeover.benchmarks.detection`` end to end: real stress runs of a planted bug, the
figures bench.json keeps, and nothing left behind.

StealsLiveLeases is the bug used: it hands out a lease that a slow or paused holder still has, so
``lease_exclusive`` breaks within a second or two of any run (tests/system/test_soak.py relies on
it too). Two seeds of 3 s keep the test near 25 s; the figures are asserted for their shape and
for what this bug makes certain (caught every time, at a moment inside the run), never for speed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.processes import REPO, child_env


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_detection_catches_a_reliable_bug_in_every_run(tmp_path):
    env = {**child_env(), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "takeover.benchmarks.detection", "--bugs", "StealsLiveLeases", "--seeds", "2",
         "--seconds", "3", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=110, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(proc.stdout)
    assert (fig["seeds"], fig["seconds"], fig["profile"]) == (2, 3, "stress")
    assert list(fig["bugs"]) == ["StealsLiveLeases"]
    bug = fig["bugs"]["StealsLiveLeases"]
    assert bug["expected"] == ["lease_exclusive"]
    assert (bug["runs"], bug["caught"], bug["caught_fraction"]) == (2, 2, 1.0)
    assert [r["seed"] for r in bug["per_run"]] == [1, 2]
    for r in bug["per_run"]:
        assert "lease_exclusive" in r["violated"] and not r["at_end"], r
        # A moment of the run: after its first record, before the run (faults, drain, check) ended.
        assert 0 <= r["first_violation_s"] < r["wall_s"], r
    times = sorted(r["first_violation_s"] for r in bug["per_run"])
    assert bug["median_first_violation_s"] == pytest.approx(sum(times) / 2, abs=1e-3)
    assert fig["caught_runs"] == 2 and fig["total_runs"] == 2
    assert fig["bugs_per_minute"] == pytest.approx(2 / fig["run_minutes"], rel=0.05)
    assert fig["targets"] == {"caught_fraction": ">= 0.95", "median_first_violation_s": "<= 3"}
    # The runs' folders went into a temp dir that is gone.
    assert not list(tmp_path.glob("takeover-detection-*")), list(tmp_path.iterdir())


def test_unknown_bug_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "takeover.benchmarks.detection", "--bugs", "NoSuchBug"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=child_env(), check=False)
    assert proc.returncode == 2
    assert "NoSuchBug" in proc.stderr and "Traceback" not in proc.stderr
