"""The Python API in this process: queues named by their class, options under their Python names, the
scenarios and the check as results, and bad input as one-line errors.

What needs real runs is in tests/system: ``takeover.stress`` with worker processes and a queue class from
a folder only the caller has on its path in test_user_project.py, interrupts and timeouts in
test_pytest_plugin.py.
"""

from __future__ import annotations

import argparse
import json

import pytest

import takeover
from takeover import api
from takeover.errors import UsageError
from takeover.options import RUN_OPTIONS
from takeover.queues.planted import StealsLiveLeases
from takeover.queues.sqlite_lease import SQLiteLeaseQueue
from tests.quality.cases import CASES


class _Outer:
    class Nested(SQLiteLeaseQueue):
        pass


def _factory(db_path: str) -> SQLiteLeaseQueue:
    return SQLiteLeaseQueue(db_path)


def test_no_api_name_is_also_a_module_so_the_package_needs_no_guard() -> None:
    """Importing a submodule sets it on its package: a module named as an API function would replace it."""
    import pkgutil
    import types

    import takeover.explorer.core  # noqa: F401 - the package that explores, imported on purpose
    import takeover.scenario_replay  # noqa: F401 - the module that replays the scenarios

    modules = {m.name for m in pkgutil.iter_modules(takeover.__path__)}
    assert {"explorer", "scenario_replay", "api"} <= modules
    assert not modules & set(takeover.__all__)
    assert type(takeover) is types.ModuleType  # a plain package: no attribute guard
    assert takeover.explore is api.explore and callable(takeover.explore)
    assert takeover.scenarios is api.scenarios and takeover.stress is api.stress and takeover.check is api.check
    assert takeover.RunResult is api.RunResult


def test_a_queue_is_named_by_module_and_qualname() -> None:
    assert api.queue_name("myq:Q") == "myq:Q"
    assert api.queue_name(StealsLiveLeases) == "takeover.queues.planted:StealsLiveLeases"
    assert api.queue_name(_factory) == f"{__name__}:_factory"


def test_a_queue_that_workers_cannot_import_by_name_is_one_line() -> None:
    class Local(SQLiteLeaseQueue):
        pass

    cases = [
        (Local, "is defined inside a function, so worker processes cannot import it by name"),
        (lambda db: SQLiteLeaseQueue(db), "is defined inside a function"),
        (_Outer.Nested, "is nested in a class"),
        (42, "queue must be 'MODULE:ATTR', a class or a factory function, got 42"),
    ]
    for queue, words in cases:
        with pytest.raises(UsageError, match=words) as caught:
            api.queue_name(queue)
        assert "\n" not in str(caught.value)
    main_class = type("Script", (SQLiteLeaseQueue,), {"__module__": "__main__"})
    with pytest.raises(UsageError, match=r"defined in the script being run \(__main__\)"):
        api.queue_name(main_class)
    renamed = type("Renamed", (SQLiteLeaseQueue,), {"__module__": __name__})
    with pytest.raises(UsageError, match="cannot be imported by that name"):
        api.queue_name(renamed)


def test_every_command_option_is_a_keyword_and_nothing_else_is() -> None:
    """The keywords come from the stress parser, which is built from the table of run options: a new
    option is a new keyword without an edit here."""
    names = api.stress_options()
    assert {o.dest for o in RUN_OPTIONS} - {"queue"} <= set(names)
    assert {"no_faults", "reconcile", "fail_on_duplicates", "max_duplicates_per_1000"} <= set(names)
    assert names["task_time_mean"] == "--task-time-mean"
    assert api._argv({"duration": 2.0, "slow_rate": 1e-07, "swarm": True, "no_faults": False, "seed": 3,
                      "kill_rate": None}) == ["--duration", "2", "--slow-rate", "1e-07", "--swarm", "--seed", "3"]


@pytest.mark.parametrize(("options", "message"), [
    ({"durations": 3}, "takeover.stress() got an unknown option 'durations' (did you mean duration?)"),
    ({"swarm": "yes"}, "swarm is a flag: True or False, got 'yes'"),
    ({"lease": 0}, "lease must be a positive number, got 0.0"),
    ({"workers": "many"}, "takeover.stress(): argument --workers: invalid int value: 'many'"),
    ({"remedy": "magic"}, "takeover.stress(): argument --remedy: invalid choice: 'magic'"),
])  # fmt: skip
def test_bad_options_are_one_line_and_start_nothing(options, message, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as caught:
        api.stress("takeover.queues.sqlite_lease:SQLiteLeaseQueue", **options)
    assert str(caught.value).startswith(message)
    assert list(tmp_path.iterdir()) == [], "no run folder for bad input"


def test_a_queue_that_breaks_the_contract_is_refused_before_a_folder_exists(tmp_path) -> None:
    with pytest.raises(UsageError, match="has no method close"):
        api.stress("spec_departures:NoCloseQueue", out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_scenarios_pass_on_the_reference_queue_and_fail_on_a_departure(scenario_scratch) -> None:
    good = takeover.scenarios()
    assert good.ok and good.exit_code == 0 and good.failures == []
    assert [s.id for s in good.scenarios] == ["S1", "S2", "S3", "S4", "S5"]
    assert good.queue == "takeover.queues.sqlite_lease:SQLiteLeaseQueue"
    assert "All 5 scenario(s) match the spec" in good.transcript and good.json["ok"] is True
    bad = takeover.scenarios("spec_departures:StaleFinishQueue", only=["S3"])
    assert not bad.ok and bad.exit_code == 1
    assert [s.id for s in bad.scenarios] == ["S3"]
    lines = bad.message().splitlines()
    assert lines[0] == "scenarios that depart from the spec on spec_departures:StaleFinishQueue: S3"
    assert any(line.startswith("S3 step") for line in lines)
    assert lines[-1] == "see every step with: takeover scenarios --queue spec_departures:StaleFinishQueue"


def test_scenarios_of_a_file_run_where_the_file_says(tmp_path, scenario_scratch) -> None:
    """The file's own queue is the default, as with ``takeover scenarios --file``."""
    from takeover.scenario_replay import load_spec

    spec = load_spec()
    doc = {"lease_seconds": spec["lease_seconds"], "queue": "spec_departures:StaleFinishQueue",
           "scenarios": [{k: v for k, v in spec["scenarios"][2].items() if k not in ("heading",)}]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc))
    result = takeover.scenarios(file=path)
    assert result.queue == "spec_departures:StaleFinishQueue" and not result.ok
    assert takeover.scenarios("takeover.queues.sqlite_lease:SQLiteLeaseQueue", file=str(path)).ok
    with pytest.raises(UsageError, match="lang must be one of en, zh"):
        takeover.scenarios(lang="fr")


def test_check_returns_the_verdict_the_command_gives(tmp_path) -> None:
    folder = CASES["lease_granted_twice"][0]().write(tmp_path / "run")
    result = takeover.check(folder)
    assert (result.valid, result.exit_code, result.ok) == (False, 1, False)
    assert result.violations == {"lease_exclusive": result.summary["invariants"]["lease_exclusive"]["violations"]}
    assert result.verdict == "INVALID" and result.command == "takeover stress --profile hand --seed 1"
    lines = result.message().splitlines()
    assert lines[0] == f"INVALID: {folder}" and "  lease_exclusive: VIOLATED (1)" in lines
    assert lines[-2:] == [f"reproduce with: {result.command}", f"run folder: {folder}"]
    rows = result.violation_rows()
    assert rows and all(r["invariant"] == "lease_exclusive" for r in rows)
    dup = CASES["killed_finish_that_did_not_happen"][0]().write(tmp_path / "dup")
    assert takeover.check(dup).ok
    capped = takeover.check(dup, max_duplicates_per_1000=1)
    assert (capped.valid, capped.exit_code, capped.verdict) == (True, 1, "VALID (duplicates fail this run)")
    with pytest.raises(UsageError, match="nope"):
        takeover.check(tmp_path / "nope")


def test_a_diagnosis_in_the_summary_goes_into_the_message(tmp_path) -> None:
    folder = CASES["lease_granted_twice"][0]().write(tmp_path / "run")
    result = takeover.check(folder)
    summary = {**result.summary, "diagnosis": ["task t1 was handed to w2 while w1 still held it"]}
    with_diagnosis = api.RunResult(**{**result.__dict__, "summary": summary})
    assert "diagnosis:\n  task t1 was handed to w2 while w1 still held it" in with_diagnosis.message()
    assert "\ndiagnosis:" not in result.message()


def test_the_api_module_is_documented_and_typed() -> None:
    for fn in (api.stress, api.check, api.scenarios):
        assert fn.__doc__ and fn.__annotations__["return"] in ("RunResult", "ScenarioResult")
    assert isinstance(api._stress_parser(), argparse.ArgumentParser)
