"""The Python API in this process: queues named by their class, options under their Python names, the
scenarios and the check as results, and bad input as one-line errors.

What needs real runs is in tests/system: the reproduce line of ``takeover.stress`` runs in test_api.py,
worker processes and a queue class from a folder only the caller has on its path in test_user_project.py,
interrupts and timeouts in test_pytest_plugin.py.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import takeover
from takeover import api
from takeover._internal.config import RunConfig
from takeover._internal.options import REMEDIES, RUN_OPTIONS, STRESS_OPTIONS
from takeover._internal.stress_run import resolve
from takeover.errors import UsageError
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

    import takeover._internal.explorer.core  # noqa: F401 - the package that explores, imported on purpose
    import takeover._internal.scenario.replay  # noqa: F401 - the package of the scenarios, imported on purpose

    modules = {m.name for m in pkgutil.iter_modules(takeover.__path__)}
    modules |= {m.name for m in pkgutil.iter_modules(takeover._internal.__path__)}
    assert {"explorer", "scenario", "api"} <= modules
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
    """The keywords and the stress parser come from the same definitions (takeover._internal.options.STRESS_OPTIONS):
    a new option is a new keyword and a new flag without an edit here."""
    names = api.stress_options()
    assert {o.dest for o in RUN_OPTIONS} - {"queue"} <= set(names)
    assert {"no_faults", "reconcile", "fail_on_duplicates", "max_duplicates_per_1000", "db", "keep_db"} <= set(names)
    assert names["task_time_mean"] == "--task-time-mean"
    parser = _stress_parser()
    flags = [a.option_strings[-1] for a in parser._actions if a.option_strings and a.dest != "help"]
    assert flags == [o.flag for o in STRESS_OPTIONS]
    assert {a.dest: a.default for a in parser._actions if a.dest != "help"} == {o.dest: o.default
                                                                                 for o in STRESS_OPTIONS}
    cli, kw = vars(parser.parse_args([])), vars(api.stress_values("q:Q"))
    assert kw == {**cli, "queue": "q:Q"}  # the same defaults, every option present


def _stress_parser() -> argparse.ArgumentParser:
    from takeover._internal.commands import stress
    from takeover.cli import OneLineParser

    parser = OneLineParser(prog="takeover stress")
    stress.configure(parser)
    return parser


# A few options of each kind (int, float, choice, flag, the database's), drawn as a user writes them in Python.
_VALUES = {
    "workers": st.integers(1, 12), "tasks": st.integers(0, 400), "seed": st.integers(-5, 10**6),
    "lease": st.floats(0.05, 30, allow_nan=False), "duration": st.sampled_from([0.5, 1, 2.25, 7]),
    "kill_rate": st.floats(0, 5, allow_nan=False), "slow_rate": st.sampled_from([0, 1e-07, 0.3, 1]),
    "remedy": st.sampled_from(REMEDIES), "task_time_dist": st.sampled_from(("fixed", "uniform", "exponential")),
    "swarm": st.booleans(), "no_faults": st.booleans(), "profile": st.sampled_from(["stress", "smoke"]),
    "max_duplicates_per_1000": st.sampled_from([0, 2.5, 40]), "db": st.just("sqlite"),
}  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(_VALUES)), st.none(), max_size=6).flatmap(
    lambda keys: st.fixed_dictionaries({k: _VALUES[k] for k in keys})))
@example({"tasks": 0, "profile": "smoke"})  # refused alike: nothing to do (a draw a fresh machine's CI made)
def test_the_api_and_the_command_line_give_the_same_config(options) -> None:
    """The same inputs, as keywords and as the command line writes them: the same options, the same config,
    or the same one-line refusal (a swarm draw beside --no-faults)."""
    assume(not (options.get("swarm") and options.get("no_faults")))
    queue = "takeover.queues.sqlite_lease:SQLiteLeaseQueue"
    by_dest = {o.dest: o for o in STRESS_OPTIONS}
    argv = ["--queue", queue, *[a for k, v in options.items() for a in by_dest[k].argv(v)]]
    args = _stress_parser().parse_args(argv)
    assert vars(api.stress_values(queue, **options)) == vars(args)
    assert _config_or_refusal(lambda: api.stress_config(queue, **options)) == _config_or_refusal(lambda: resolve(args))


def _config_or_refusal(make: Callable[[], RunConfig]) -> object:
    """The config as a dict, or the one-line refusal (tasks=0 with no arrival rate: nothing to do)."""
    try:
        return make().to_dict()
    except UsageError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize(("options", "argv"), [
    ({"workers": "many"}, ["--workers", "many"]),
    ({"workers": 1.5}, ["--workers", "1.5"]),
    ({"workers": 0}, ["--workers", "0"]),
    ({"lease": -1}, ["--lease", "-1"]),
    ({"remedy": "magic"}, ["--remedy", "magic"]),
    ({"task_time_dist": "normal"}, ["--task-time-dist", "normal"]),
    ({"max_duplicates_per_1000": -1}, ["--max-duplicates-per-1000", "-1"]),
    ({"slow_rate": 2}, ["--slow-rate", "2"]),
    ({"swarm": True, "no_faults": True}, ["--swarm", "--no-faults"]),
    ({"heartbeat": 5, "lease": 2}, ["--heartbeat", "5", "--lease", "2"]),
    ({"profile": "nope"}, ["--profile", "nope"]),
])  # fmt: skip
def test_bad_input_is_the_same_one_line_from_the_api_and_the_command_line(options, argv, capsys) -> None:
    """``takeover: error: stress: X`` on the command line is ``takeover.stress(): X`` in Python (a value the
    parser refuses); a value refused once read is the same line, word for word."""
    from takeover.cli import main

    assert main(["stress", "--queue", "takeover.queues.sqlite_lease:SQLiteLeaseQueue", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(UsageError) as caught:
        api.stress_config("takeover.queues.sqlite_lease:SQLiteLeaseQueue", **options)
    said = str(caught.value)
    if said.startswith("takeover.stress(): "):
        assert err == f"takeover: error: stress: {said.removeprefix('takeover.stress(): ')}\n"
    else:
        assert err == f"takeover: error: {said}\n"


@pytest.mark.parametrize(("options", "message"), [
    ({"durations": 3}, "takeover.stress() got an unknown option 'durations' (did you mean duration?)"),
    ({"swarm": "yes"}, "swarm is a flag: True or False, got 'yes'"),
    ({"lease": 0}, "lease must be a positive number, got 0.0"),
    ({"workers": "many"}, "takeover.stress(): argument --workers: invalid int value: 'many'"),
    ({"workers": True}, "takeover.stress(): argument --workers: invalid int value: 'True'"),
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
    from takeover._internal.scenario.replay import load_spec

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
    for fn in (api.stress_values, api.stress_config, api.stress_options):
        assert fn.__doc__ and "return" in fn.__annotations__
