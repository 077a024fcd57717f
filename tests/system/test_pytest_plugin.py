"""The pytest plugin as a user's test suite meets it: registered by the package (the ``pytest11`` entry
point), the ``takeover`` fixture, ``--takeover-duration``, ``--takeover-seeds``, the marker, the failure
message, JUnit properties, run folders kept only for failures, and every process reaped when a test
times out.

Each test runs an inner pytest session on a small test file (pytester). The API itself is in
tests/unit/test_api.py; a failing stress run's message, its kept folder, ``--takeover-duration`` and the
JUnit properties of a run, from a fresh install outside the repository, in
tests/system/test_user_project.py.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.helpers.processes import reap_stragglers, wait_no_stragglers
from tests.helpers.queues import child_env

pytest_plugins = ["pytester"]

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


def test_a_passing_check_keeps_its_model_coverage_in_the_junit_properties(pytester: pytest.Pytester) -> None:
    """The run folder of a passing test is removed; its coverage stays in junit.xml (a stored run, checked)."""
    stored = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "ref-valid"
    for name in ("config.json", "history.jsonl", "ledger.sqlite", "snapshot.json"):
        (pytester.path / "run").mkdir(exist_ok=True)
        (pytester.path / "run" / name).write_bytes((stored / name).read_bytes())
    pytester.makepyfile(test_q="""
        def test_stored(takeover):
            result = takeover.check("run")
            assert result.coverage["reached"] >= 5
    """)
    result = pytester.runpytest("--junitxml=junit.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    (case,) = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    summary = json.loads((pytester.path / "run" / "summary.json").read_text())
    model = summary["coverage"]["model"]
    assert props["takeover.check.coverage"] == f"{model['reached']}/{model['possible']} cells reached"
    assert "finish_done/running/holder/inside 118" in props["takeover.check.coverage.cells"]
    assert props["takeover.check.coverage.unreached_important"].split(", ") == model["unreached_important"]


def test_bad_plugin_options_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass\n")
    result = pytester.runpytest("--takeover-seeds", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--takeover-seeds must be a positive integer, got 0*"])
    result = pytester.runpytest("--takeover-db", "mysql")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--takeover-db: --db must be sqlite, postgres, redis, a postgresql:// URL or a redis:// URL, got 'mysql'*"]
    )


@pytest.mark.needs_package("postgresql")
def test_takeover_db_is_the_database_of_every_call_that_does_not_name_one(pytester: pytest.Pytester) -> None:
    """``--takeover-db postgres``: the scenarios run on a private PostgreSQL server against the PostgreSQL
    reference queue, and a stress call of a SQLite-only queue is refused with the database named (before any
    server starts); a call that names its own db keeps it."""
    pytester.makepyfile(test_q="""
        import pytest
        from takeover.errors import ContractError

        def test_scenarios_on_postgres(takeover):
            result = takeover.scenarios()
            assert result.queue == "takeover.queues.postgres_lease:PostgresLeaseQueue", result.queue

        def test_a_sqlite_queue_is_refused(takeover):
            with pytest.raises(ContractError, match="takes only sqlite databases .*, not postgres"):
                takeover.stress("takeover.queues.sqlite_lease:SQLiteLeaseQueue")

        def test_a_call_that_names_its_db_keeps_it(takeover):
            result = takeover.scenarios(db="sqlite")
            assert result.queue == "takeover.queues.sqlite_lease:SQLiteLeaseQueue", result.queue
    """)
    result = pytester.runpytest("--takeover-db", "postgres", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def _runs(basetemp: Path, test: str) -> list[Path]:
    """The run folders a test of the inner session left (pytest adds a ``<name>current`` link beside each)."""
    return [p for p in basetemp.glob(f"{test}*/takeover/stress-*") if not p.parents[1].is_symlink()]


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
        result = pytester.runpytest_subprocess("--timeout", "5", "--timeout-method", method, "-p",
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
        left = wait_no_stragglers(base, timeout=20, under=True)
        reap_stragglers(base, under=True)  # leave nothing for the next test, whatever this one concludes
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


def test_explore_fails_a_departing_queue_with_its_shrunk_sequence(pytester: pytest.Pytester) -> None:
    """``takeover.explore`` in a test: the reference passes; a departure fails the test with the shrunk
    sequence in words and leaves its scenario file under the test's tmp_path, named in the JUnit properties."""
    pytester.makepyfile(test_q="""
        def test_reference(takeover):
            takeover.explore(examples=10)

        def test_departure(takeover):
            takeover.explore("spec_departures:StaleFinishQueue", examples=20)
    """)
    result = pytester.runpytest("--junitxml=junit.xml", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: takeover explore failed (seed 1):",
                                 "*DEPARTED from the spec: *", "*the queue answered True; the spec says False*"])
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_departure"].iter("property")}
    assert props["takeover.explore.verdict"] == "FAIL" and props["takeover.explore.scenario_file"].endswith(
        "explore-1/explore.json")
    assert Path(props["takeover.explore.scenario_file"]).is_file()  # a failed test keeps its files
