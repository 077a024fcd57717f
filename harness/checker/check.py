"""``check_run_dir``: load, check, count, write ``summary.json`` and the reports, print, exit code."""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from takeover.checker.counts import counts, coverage, duplicates, warnings
from takeover.checker.facts import Facts, build_facts
from takeover.checker.invariants import InvariantResult, check_invariants
from takeover.checker.load import load_run
from takeover.checker.remedies import describe as describe_features
from takeover.checker.remedies import feature_sections
from takeover.checker.verdict import combine, exit_code, inconclusive_reason

SUMMARY_FILE = "summary.json"
CONFIG_KEYS = ("queue", "seed", "profile", "workers", "tasks", "duration", "lease", "remedy", "heartbeat",
               "faults", "command")


def analyse(run_dir: str | Path, *, fail_on_duplicates: bool = False) -> tuple[dict[str, Any], Facts,
                                                                                dict[str, InvariantResult]]:
    """The whole check without writing anything: the summary dict, the facts, the invariants."""
    # The cyclic GC off while checking: loading the snapshot and the ledger allocates a few hundred
    # thousand lists and tuples, and each burst of allocations set off collections that walked every
    # live object (a fifth of their load time). The check makes next to no cycles; the collector
    # is back on, in its previous state, as soon as it returns.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyse(run_dir, fail_on_duplicates=fail_on_duplicates)
    finally:
        if was_enabled:
            gc.enable()


def _analyse(run_dir: str | Path, *, fail_on_duplicates: bool) -> tuple[dict[str, Any], Facts,
                                                                         dict[str, InvariantResult]]:
    started = time.perf_counter()
    run = load_run(run_dir)
    fx = build_facts(run)
    results = check_invariants(fx)
    cnt = counts(fx)
    dup = duplicates(fx)
    cov = coverage(fx)
    warn = warnings(fx, cov, dup)
    why = inconclusive_reason(cnt, run.stats.lines)
    valid = combine(results, why)
    dup_fail = bool(fail_on_duplicates and dup.get("tasks"))
    code = exit_code(valid, dup_fail)
    summary: dict[str, Any] = {
        "valid": valid,
        "exit_code": code,
        "inconclusive": why,
        "interrupted": fx.interrupted,
        "fail_on_duplicates": fail_on_duplicates,
        "failed_on_duplicates": dup_fail,
        "run_dir": str(run.run_dir),
        "config": {k: run.config[k] for k in CONFIG_KEYS if k in run.config},
        "invariants": {name: r.to_json() for name, r in results.items()},
        "duplicates": {k: v for k, v in dup.items() if k != "task_list"},
        "counts": cnt,
        "coverage": cov,
        "warnings": warn,
        **feature_sections(fx),
        "history": {"lines": run.stats.lines, "torn_tail": run.stats.torn_tail,
                    "corrupt_lines": run.stats.corrupt_lines,
                    "corrupt_examples": list(run.stats.corrupt_examples)},
        "check_seconds": round(time.perf_counter() - started, 3),
    }
    summary["_dup_tasks"] = dup.get("task_list", [])
    return summary, fx, results


def check_run_dir(run_dir: str | Path, *, fail_on_duplicates: bool = False, out: TextIO = sys.stdout,
                  reports: bool = True, as_json: bool = False) -> int:
    """Check a stored run, write summary.json and the reports into it, print, return the exit code."""
    summary, fx, results = analyse(run_dir, fail_on_duplicates=fail_on_duplicates)
    dup_tasks = summary.pop("_dup_tasks")
    folder = Path(run_dir)
    written = [SUMMARY_FILE]
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=_json_default) + "\n")
    if reports:
        from takeover.reports import write_reports

        written += write_reports(folder, summary, fx, results, dup_tasks)
    if as_json:
        out.write(json.dumps(summary, indent=2, default=_json_default) + "\n")
    else:
        out.write(short_summary(summary, written))
    out.flush()
    return int(summary["exit_code"])


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def verdict_word(summary: dict[str, Any]) -> str:
    if summary["valid"] is False:
        return "INVALID"
    if summary["valid"] == "unknown":
        return "INCONCLUSIVE"
    return "VALID (duplicates fail this run)" if summary["failed_on_duplicates"] else "VALID"


def short_summary(summary: dict[str, Any], written: list[str]) -> str:
    """A few lines for the terminal: the verdict first, then what broke, then where to read more."""
    lines = [f"{verdict_word(summary)}: {summary['run_dir']}"]
    if summary["inconclusive"]:
        lines.append(f"  inconclusive: {summary['inconclusive']}")
    for name, inv in summary["invariants"].items():
        if inv["valid"] is not True:
            state = "VIOLATED" if inv["valid"] is False else "unknown"
            lines.append(f"  {name}: {state} ({inv['violations']})" + (f" - {inv.get('note')}" if inv.get(
                "note") else ""))
            if inv["examples"]:
                lines.append(f"    e.g. {json.dumps(inv['examples'][0], default=_json_default)}")
    ok = sum(1 for inv in summary["invariants"].values() if inv["valid"] is True)
    lines.append(f"  invariants: {ok}/{len(summary['invariants'])} hold")
    c, d = summary["counts"], summary["duplicates"]
    by = ", ".join(f"{k} {v}" for k, v in d.get("by_cause", {}).items())
    final = c.get("final_states")
    final_text = f" final {', '.join(f'{k} {v}' for k, v in final.items())};" if final else ""
    lines.append(f"  tasks {c['tasks']}:{final_text} acknowledged done {c['acknowledged']}, uncertain "
                 f"{c['uncertain']} (recovered {c['recovered']}), lost {c['lost']}; takeovers {c['takeovers']}, "
                 f"stale finishes refused {c['finishes']['rejected_stale']}")
    lines.append(f"  duplicate side effects: {d.get('tasks')} task(s), {d.get('extra_actions')} extra "
                 f"action(s)" + (f" ({by})" if by else ""))
    lines += [f"  {line}" for line in describe_features(summary)]
    for w in summary["warnings"]:
        lines.append(f"  warning: {w}")
    lines.append(f"  wrote {', '.join(written)} in {summary['run_dir']}")
    return "\n".join(lines) + "\n"
