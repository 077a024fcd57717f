"""A sweep's ending: the recommendation from its rows, sweep.md and sweep.html, the table on stdout, the
violations and warnings on stderr, and the exit code; the same for ``takeover sweep`` and for ``takeover
merge`` of its shards.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.sweep.recommend import recommend
from takeover.exit_codes import ExitCode


def conclude(out: Path, meta: dict[str, Any], rows: list[dict[str, Any]], violations: list[dict[str, Any]]) -> ExitCode:
    """The recommendation from the rows, sweep.md and sweep.html, the table on stdout; the sweep's exit code.
    ``takeover merge`` ends a sweep's shards with this too (takeover._internal.sweep.merge)."""
    from takeover._internal.sweep.report import recommendation_markdown, write_sweep_report  # matplotlib: only now

    rec = recommend(rows, float(meta["target"]))
    written = write_sweep_report(out, meta, rec, violations)
    print(f"wrote {', '.join([store.SWEEP_CSV, *written])} in {out}")
    if violations:
        print(f"INVARIANTS VIOLATED in {len(violations)} run(s): "
              + "; ".join(f"{v['cell']} seed {v['seed']} ({v['violated']})" for v in violations[:5]),
              file=sys.stderr)
    if rec is not None:
        # The table on stdout, its warnings once, on stderr (sweep.md holds both).
        print("\n".join(recommendation_markdown(meta, rec)).rstrip())
        for line in rec.warnings:
            print(f"warning: {line}", file=sys.stderr)
    if meta["interrupted"]:
        print("takeover sweep: interrupted; finished cells are kept and reported", file=sys.stderr)
        return ExitCode.INTERRUPTED
    return ExitCode.VIOLATED if violations else ExitCode.VALID
