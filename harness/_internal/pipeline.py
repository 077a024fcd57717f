"""From a run folder to a verdict on the terminal: check -> summary.json -> reports -> console.

Why one function: ``takeover stress``, ``check``, ``reconcile`` and ``soak`` (and each sweep cell)
all end a run the same way, and the order matters. ``summary.json`` is written first, so a report
that fails to draw still leaves the verdict in the folder; the console line comes last and names
every file that was written. The data only flows one way here: the checker reads the folder and
returns a :class:`~takeover._internal.checker.CheckResult`, the reports render that result, and nothing
downstream reaches back into the checker.

Confirming the diagnosis is the one step that runs the queue, and so lives here, not in the checker:
right after a run (``confirm``, what ``takeover stress`` asks for) the queue is importable, and the
spec's five scenarios take a fraction of a second on it. ``takeover check`` re-checks a folder from
the folder alone, on a machine that may not have the queue, and runs nothing; it keeps what the run's
own check confirmed, read back from the folder (``store.read_confirmations``), so a re-check (a newer
checker's, say) loses nothing the run found. Both ways go through ``check_and_report`` and note the
confirmations on the diagnosis in one place (``_note``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from takeover._internal import store
from takeover._internal.checker import CheckResult, analyse
from takeover.reports import write_reports
from takeover.reports.console import short_summary

if TYPE_CHECKING:
    from takeover.summary_types import Summary

# Each scenario call's deadline while confirming: a queue that hangs costs this once per scenario,
# not the ten seconds `takeover scenarios` allows.
CONFIRM_STEP_TIMEOUT = 2.0


def check_and_report(run_dir: str | Path, *, fail_on_duplicates: bool = False,
                     max_duplicates_per_1000: float | None = None, reports: bool = True,
                     as_json: bool = False, out: TextIO | None = None, confirm: bool = False) -> CheckResult:
    """Check a stored run, write ``summary.json`` and ``violations.csv`` (and, with ``reports``,
    report.md, report.html and junit.xml) into it, print the short summary (or, with ``as_json``,
    summary.json) on ``out`` when one is given, and return the result; its ``exit_code`` is the
    command's. The duplicate options are the gate of :mod:`takeover._internal.checker.gate`. With
    ``confirm`` (a run just made, its queue importable here), :func:`confirm_diagnosis` runs and is the only
    authority: what it no longer finds is not noted. Without it, the confirmations an earlier check of the
    folder noted are kept (a re-check runs no scenario)."""
    folder = Path(run_dir)
    # An earlier check's, read before summary.json is written again.
    confirmed = {} if confirm else store.read_confirmations(folder)
    result = analyse(run_dir, fail_on_duplicates=fail_on_duplicates, max_duplicates_per_1000=max_duplicates_per_1000)
    if confirm:
        confirmed = confirm_diagnosis(result.summary)
    _note(result.summary, confirmed)
    written = [store.write_summary(folder, result.summary), store.write_violations(folder, result.violations)]
    if reports:
        written += write_reports(folder, result)
    if out is not None:
        out.write(store.dump_summary(result.summary) if as_json else short_summary(result.summary, written))
        out.flush()
    return result


def confirm_diagnosis(summary: Summary, step_timeout: float = CONFIRM_STEP_TIMEOUT) -> dict[tuple[str, str], str]:
    """Replay the spec's five scenarios against the run's queue and find, for each pattern of the
    diagnosis, the scenario step where the queue departs from the spec in the way that breaks the
    same invariant (by the spec's model, takeover._internal.replay.model): its own scenario first, else
    any. Returned by the pattern's (scenario, invariant), the only two things the choice depends on.

    Nothing is noted where no scenario departs that way: most defects need an interleaving the five
    scenarios do not contain (a race, a late finish nobody took over), which is what ``takeover
    replay`` is for. A queue that cannot be loaded here, or fails in a way the scenarios cannot
    judge, confirms nothing and stops nothing: the verdict stands on the run folder."""
    entries = summary.get("diagnosis")
    queue = summary["config"].get("queue")
    found: dict[tuple[str, str], str] = {}
    if not entries or not isinstance(queue, str):
        return found
    from takeover._internal.replay.judge import judge
    from takeover._internal.scenario.replay import load_spec, run_scenarios

    try:
        spec = load_spec()
        results = run_scenarios(queue, step_timeout=step_timeout, doc=spec)
        outcomes = [(r.id, judge(r, float(spec["lease_seconds"]))) for r in results]
    except Exception:  # noqa: BLE001 - confirming is a bonus: an unloadable or broken queue confirms nothing
        return found
    for entry in entries:
        ranked = sorted(outcomes, key=lambda o: o[0] != entry["scenario"])
        for sid, outcome in ranked:
            step = outcome.first(entry["invariant"])
            if step is not None:
                text = f"spec scenario {sid} departs at step {step.index}: {step.what}"
                found[entry["scenario"], entry["invariant"]] = text
                break
    return found


def _note(summary: Summary, confirmed: dict[tuple[str, str], str]) -> None:
    """Put each pattern's confirmation (``confirmed_by``) on the diagnosis, found now or by the run."""
    for entry in summary.get("diagnosis") or ():
        text = confirmed.get((entry["scenario"], entry["invariant"]))
        if text:
            entry["confirmed_by"] = text
