"""The pytest plugin as a user's test suite meets it: registered by the package (the ``pytest11`` entry
point), the ``takeover`` fixture, ``--takeover-duration``, ``--takeover-seeds``, the marker, the failure
message, JUnit properties, run folders kept only for failures, and every process reaped when a test
times out.

Each test runs an inner pytest session on a small test file (pytester). The API itself is in
tests/unit/test_api.py and tests/system/test_api.py; a fresh install outside the repository in
tests/system/test_user_project.py.
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import psutil
import pytest

from takeover.run.lifeline import RUN_ENV
from tests.helpers.queues import child_env

pytest_plugins = ["pytester"]

PLANTED = "takeover.queues.planted:StealsLiveLeases"


def test_the_package_registers_the_plugin() -> None:
    (ep,) = [ep for ep in entry_points(group="pytest11") if ep.name == "takeover"]
    assert ep.value == "takeover.pytest_plugin"


def test_scenarios_seeds_marker_and_junit_properties(pytester: pytest.Pytester) -> None:
    """No stress run here: the scenarios are quick, and they show every part of the plugin but the run."""
    pytester.makepyfile(test_q="""
        def test_reference(takeover):
            takeover.scenarios()

        def test_departure(takeover):
            takeover.scenarios("spec_departures:StaleFinishQueue")

        def test_not_using_the_fixture():
            pass
    """)
    result = pytester.runpytest("--takeover-seeds", "2", "-m", "takeover", "--junitxml=junit.xml", "-p",
                                "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=2, deselected=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: takeover scenarios failed:",
        "*scenarios that depart from the spec on spec_departures:StaleFinishQueue: S3*",
        "*S3 step 6 (t=32 A finish)*",
        "*see every step with: takeover scenarios --queue spec_departures:StaleFinishQueue",
    ])
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert set(cases) == {"test_reference[seed1]", "test_reference[seed2]", "test_departure[seed1]",
                          "test_departure[seed2]"}
    props = {p.get("name"): p.get("value") for p in cases["test_departure[seed1]"].iter("property")}
    assert props == {"takeover.scenarios.verdict": "FAIL", "takeover.scenarios.departures": "S3"}


def test_bad_plugin_options_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass\n")
    result = pytester.runpytest("--takeover-seeds", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--takeover-seeds must be a positive integer, got 0*"])


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_failing_run_fails_the_test_with_its_verdict_reproduce_line_and_folder(pytester: pytest.Pytester) -> None:
    """A planted bug fails its test with a readable message and keeps its run folder; the passing run's
    folder is removed. --takeover-duration sets the run's length."""
    pytester.makepyfile(test_runs=f"""
        def test_buggy(takeover):
            takeover.stress("{PLANTED}", profile="smoke", seed=1)

        def test_reference(takeover):
            result = takeover.stress("takeover.queues.sqlite_lease:SQLiteLeaseQueue", profile="smoke", seed=1,
                                     no_faults=True)
            assert result.valid is True and (result.run_dir / "summary.json").is_file()
    """)
    result = pytester.runpytest_subprocess("--takeover-duration", "1.5", "--junitxml=junit.xml", "-p",
                                           "no:cacheprovider", "--basetemp", str(pytester.path / "tmp"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*AssertionError: takeover stress failed (exit 1):",
        "*INVALID: */takeover/stress-1",
        "*lease_exclusive: VIOLATED*",
        f"*reproduce with: takeover stress --profile smoke --queue {PLANTED} --workers 3 * --duration 1.5 * --seed 1 *",
        "*run folder: */test_buggy0/takeover/stress-1",
    ])
    (buggy,) = _runs(pytester.path / "tmp", "test_buggy")
    assert json.loads((buggy / "summary.json").read_text())["valid"] is False, "a failure keeps its evidence"
    assert json.loads((buggy / "config.json").read_text())["duration"] == 1.5
    assert not _runs(pytester.path / "tmp", "test_reference"), "a pass keeps nothing"
    case = next(c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "test_buggy")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["takeover.stress.verdict"] == "INVALID" and props["takeover.stress.exit_code"] == "1"
    assert props["takeover.stress.violations"].startswith("lease_exclusive ")
    assert props["takeover.stress.run_dir"] == str(buggy)


def _runs(basetemp: Path, test: str) -> list[Path]:
    """The run folders a test of the inner session left (pytest adds a ``<name>current`` link beside each)."""
    return [p for p in basetemp.glob(f"{test}*/takeover/stress-*") if not p.parents[1].is_symlink()]


def _stragglers(root: Path) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(RUN_ENV, "").startswith(str(root)):
                out.append(p)
        except psutil.Error:
            pass
    return out


def _gone(root: Path, within: float = 20.0) -> list[psutil.Process]:
    """The run's processes still alive after waiting up to ``within`` seconds for them to go."""
    deadline = time.monotonic() + within
    while (left := _stragglers(root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for p in left:  # leave nothing behind for the next test, whatever this one concludes
        p.kill()
    return left


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_test_that_times_out_leaves_no_process_behind(pytester: pytest.Pytester, method: str) -> None:
    """pytest-timeout's signal method raises in the test (the run is stopped as Ctrl-C stops it); its
    thread method ends the whole pytest process (the run dies with it)."""
    pytester.makepyfile(test_long="""
        def test_long(takeover):
            takeover.stress("takeover.queues.sqlite_lease:SQLiteLeaseQueue", profile="smoke", duration=120, seed=1)
    """)
    base = pytester.path / "tmp"
    try:
        result = pytester.runpytest_subprocess("--timeout", "8", "--timeout-method", method, "-p",
                                               "no:cacheprovider", "--basetemp", str(base), timeout=150)
        assert result.ret != 0
        (run_dir,) = _runs(base, "test_long")
        history = (run_dir / "history.jsonl").read_text().splitlines()
        assert len(history) > 10, "the timeout came while the run was under way"
        if method == "signal":
            result.stdout.fnmatch_lines(["*Timeout*"])
            records = [json.loads(line) for line in history]
            assert {"f": "run", "value": "interrupted"}.items() <= next(
                (r for r in records if r.get("value") == "interrupted"), {}).items(), "stopped as Ctrl-C stops it"
    finally:
        left = _gone(base)
    assert left == [], f"processes left behind: {left}"


def test_the_plugin_module_imports_no_part_of_takeover_until_used() -> None:
    """Every pytest session in an environment with takeover loads the plugin: it must cost nothing."""
    import subprocess
    import sys

    code = ("import sys, takeover.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m.startswith('takeover')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['takeover', 'takeover.pytest_plugin']"
