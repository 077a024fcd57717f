"""``python -m takeover.benchmarks.detection`` end to end: real stress runs of a planted bug, the
figures bench.json keeps, and nothing left behind.

StealsLiveLeases is the bug used: it hands out a lease that a slow or paused holder still has, so
``lease_exclusive`` breaks within a second or two of any run (tests/system/test_soak.py relies on
it too). One seed of 3 s, aimed and random-only, and the reference queue beside them (four runs,
two at a time) keep the test near 30 s; the figures are asserted for their shape and for what this
bug makes certain (caught, at a moment inside the run), never for speed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from takeover._internal.checker.patterns import PATTERNS
from tests.helpers.processes import REPO, child_env


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.timeout(150)
def test_detection_catches_a_reliable_bug_beside_random_faults_and_the_reference(tmp_path):
    env = {**child_env(), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "takeover.benchmarks.detection", "--bugs", "StealsLiveLeases", "--seeds", "1",
         "--seconds", "3", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=140, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(proc.stdout)
    assert (fig["seeds"], fig["seconds"], fig["profile"], fig["modes"]) == (1, 3, "stress", ["aimed", "random"])
    assert list(fig["bugs"]) == ["StealsLiveLeases"]
    bug = fig["bugs"]["StealsLiveLeases"]
    assert bug["expected"] == ["lease_exclusive"] and bug["time_target"] == "median_first_violation_s"
    assert (bug["runs"], bug["caught"], bug["caught_fraction"]) == (1, 1, 1.0)
    (run,) = bug["per_run"]
    assert run["mode"] == "aimed" and "lease_exclusive" in run["violated"] and not run["at_end"], run
    assert run["first_invariant"] == "lease_exclusive"
    # A moment of the faulted phase, counted from its start record: before the run ended.
    assert 0 <= run["first_violation_s"] < run["wall_s"], run
    assert bug["median_first_violation_s"] == run["first_violation_s"]
    # From the violation to the defect: the run's diagnosis names the planted one (a lease handed out early).
    assert bug["defect"] == PATTERNS["lease_exclusive"]["lease_stolen"].defect
    assert bug["defect"] in run["defects"] and bug["diagnosis_names_defect"] == 1, run["defects"]
    assert bug["diagnosis_names_only_defect"] == int(run["defects"] == [bug["defect"]])
    # The same seed with every aimed fault at 0: its history has no aimed fault at all.
    rnd = bug["random_only"]
    assert rnd["runs"] == 1 and rnd["per_run"][0]["mode"] == "random" and rnd["per_run"][0]["aimed"] == {}
    assert fig["caught_runs"] == 1 and fig["total_runs"] == 1
    assert fig["bugs_per_minute"] == pytest.approx(1 / fig["run_minutes"], rel=0.05)
    assert fig["random_only"]["total_runs"] == 1 and "bugs_per_minute" in fig["gain"]
    assert fig["targets"] == {"caught_fraction": ">= 0.95", "median_first_violation_s": "<= 3"}
    # The false-alarm check: the reference queue over the same seed, in both modes.
    for mode in ("aimed", "random_only"):
        ref = fig["reference"][mode]
        assert (ref["runs"], ref["valid"], ref["invalid"]) == (1, 1, []), ref
    assert fig["pass"]["reference"] is True
    # The runs' folders went into a temp dir that is gone.
    assert not list(tmp_path.glob("takeover-detection-*")), list(tmp_path.iterdir())


def test_unknown_bug_is_one_line_exit_2():
    proc = subprocess.run([sys.executable, "-m", "takeover.benchmarks.detection", "--bugs", "NoSuchBug"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, env=child_env(), check=False)
    assert proc.returncode == 2
    assert "NoSuchBug" in proc.stderr and "Traceback" not in proc.stderr
