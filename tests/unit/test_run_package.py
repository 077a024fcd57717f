"""The run package's source never names the workload, the checker or the reports (a function-local
import included), and the progress model does not import the coordinator.

Why, and the tests that need a process (importing the whole package, a run with a worker entry
point of the caller's own): tests/system/test_run_package.py.
"""

from __future__ import annotations

from tests.helpers.imports import RUN_PACKAGE, foreign_to_the_runner, imported_modules


def test_no_module_of_the_run_package_names_the_workload_the_checker_or_the_reports() -> None:
    modules = sorted(RUN_PACKAGE.glob("*.py"))
    assert {p.stem for p in modules} >= {"coordinator", "supervision", "effectors", "nemesis", "service", "ledger",
                                         "phases", "lifeline", "queue_caller", "progress"}  # fmt: skip
    found = {p.name: foreign_to_the_runner(imported_modules(p)) for p in modules}
    assert not {name: bad for name, bad in found.items() if bad}


def test_the_progress_model_does_not_import_the_coordinator() -> None:
    names = imported_modules(RUN_PACKAGE / "progress.py")
    assert not {n for n in names if n.startswith(("takeover.run.coordinator", "takeover.run.supervision"))}
