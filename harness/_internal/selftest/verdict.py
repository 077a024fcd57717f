"""A selftest's judgement: which invariant a planted bug's run violated first, whether its runs reached the
model-coverage cells it needs, the line printed for each bug and each reference seed, and the verdict.

Why apart from the runs (takeover._internal.selftest.runs): ``takeover merge`` ends a sharded selftest with the same
lines and verdict, from the rows the shards wrote, without running anything.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from takeover.exit_codes import ExitCode

if TYPE_CHECKING:  # the selftest reads the summaries its runs wrote; it never runs the checker itself
    from takeover.summary_types import Summary

# The example field that holds the time of the violating operation itself, per invariant. The
# examples also name earlier operations that are not wrong on their own (the accepted finish before a
# reclaim, the previous claim before a repeated generation): taking the earliest time of any field
# dated a RegisterReplaces run's reclaim at 13 s by the first, legitimate finish at 2 s.
VIOLATING_AT = {"finish_within_lease": "now", "no_stale_commit": "finish_at",
                "no_reclaim_after_terminal": "reclaimed_at", "generation_monotonic": "claimed_at",
                "lease_exclusive": "granted_now", "single_finish": "finished_at"}


def first_violation(summary: Summary, names: tuple[str, ...]) -> float | None:
    """The earliest time of a violating operation among the examples of the violated ``names``
    (:data:`VIOLATING_AT`; another invariant's examples by every ``*_at``/``now`` field). A list of
    times is every accepted finish of one task (single_finish's ``finished_at``): the repeat exists
    from its second."""
    times = [t for n in names if summary["invariants"][n]["valid"] is False
             for ex in summary["invariants"][n]["examples"] for k, v in ex.items()
             if (k == VIOLATING_AT[n] if n in VIOLATING_AT else k.endswith(("_at", "now")))
             for t in (sorted(v)[1:2] if isinstance(v, list) else [v])
             if isinstance(t, int | float) and not isinstance(t, bool)]
    return min(times) if times else None


def has_fault(summary: Summary, kind: str) -> bool:
    """Did the run ask for fault ``kind`` (config.json ``faults``, a rate above 0)?"""
    rate = (summary["config"].get("faults") or {}).get(kind)
    return isinstance(rate, int | float) and rate > 0


def unreached_cells(name: str, summary: Summary, needs: dict[str, tuple[str, ...]] | None = None) -> list[str] | None:
    """The cells bug ``name`` needs (``needs``: name -> cells, by default the planted bugs'
    NEEDS_CELLS) when the run reached none of them: it could not have shown the bug, caught or not;
    None when it reached one, or when its summary has no model coverage (checked before it existed)."""
    from takeover._internal.coverage_space import unreached_needs
    from takeover.queues.planted import NEEDS_CELLS
    from takeover.queues.planted_redis import NEEDS_CELLS as REDIS_NEEDS_CELLS  # the Redis idioms' own

    table = {**REDIS_NEEDS_CELLS, **NEEDS_CELLS} if needs is None else needs
    model = summary["coverage"].get("model")
    if model is None or name not in table:
        return None
    return unreached_needs({name: table[name]}, model["cells"]).get(name)


def row_line(row: dict[str, Any]) -> str:
    """A planted bug's line: caught, or MISSED (with the fault its runs lacked), and NEVER REACHED for
    each run that reached none of the cells it needs."""
    name, expected = row["queue"], row["expected"]
    if row["caught"]:
        at = row["first_violation_at"]
        # Violations seen only in the final snapshot (or over the whole run) have no moment.
        when = f"first violation at t={at} s" if at is not None else "caught at the final check"
        line = (f"caught  {name:<24} seed {row['seed']}, run {row['seconds']} s, {when}; "
                f"violated: {', '.join(row['violated'])}")
    else:
        why = (f"; its runs had no {row['absent_fault']} fault, the only kind that can expose it"
               if "absent_fault" in row else "")
        line = f"MISSED  {name:<24} after {row['tries']} run(s); expected {', '.join(expected)}{why}"
    for seed, cells in row.get("unreached", {}).items():
        more = f" (or any of {len(cells) - 1} more)" if len(cells) > 1 else ""
        line += (f"\nNEVER REACHED {name:<18} seed {seed}: the run never reached cell {cells[0]}{more}, "
                 f"which planted bug {name} needs")
    return line


def cells_failed(row: dict[str, Any]) -> bool:
    """A planted bug's runs fail on its cells: none of them reached one, or the run that caught it did
    not (then its declared cells are wrong). A run that missed both the bug and its cells is what the
    next seed is for, as a run that missed the bug alone: its line says NEVER REACHED all the same."""
    unreached = row.get("unreached") or {}
    return bool(unreached) and (len(unreached) >= row["tries"] or (row["caught"] and row["seed"] in unreached))


def passed(results: list[dict[str, Any]], refs: list[dict[str, Any]]) -> bool:
    """Every planted bug caught, its runs having reached its cells (:func:`cells_failed`); the reference
    valid on every seed."""
    return (all(r["caught"] and not cells_failed(r) for r in results)
            and all(r["valid"] is True for r in refs))


def ref_line(ref: dict[str, Any]) -> str:
    """A reference seed's line: passed, or FAILED with the invariants that did not hold."""
    word = "passed" if ref["valid"] is True else "FAILED"
    return (f"{word:<7} reference queue, seed {ref['seed']}, run {ref['seconds']} s"
            + (f"; not holding: {', '.join(ref['not_holding'])}" if ref["not_holding"] else ""))


def conclude(doc: dict[str, Any], as_json: bool) -> ExitCode:
    """The selftest's last lines (or the whole result as JSON) and its exit code; ``takeover merge`` ends a
    selftest's shards with this too."""
    out, results, refs, duration = sys.stdout, doc["planted"], doc["reference"], doc["duration"]
    if as_json:
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        caught = sum(r["caught"] for r in results)
        unreached = [r["queue"] for r in results if cells_failed(r)]
        if unreached:
            out.write(f"selftest: FAILED: runs on {', '.join(unreached)} never reached the cells those bugs need\n")
        out.write(f"selftest: {caught}/{len(results)} planted bugs caught, reference "
                  f"{'passed' if all(r['valid'] is True for r in refs) else 'FAILED'} on {len(refs)} seed(s); "
                  f"profile {doc['profile']}, {'its own' if duration is None else f'{duration:g} s'} faulted phase "
                  f"per run; runs in {doc['runs']}\n")
    return ExitCode.VALID if doc["ok"] else ExitCode.VIOLATED
