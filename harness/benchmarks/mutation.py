"""The mutation score for ``takeover bench --detection``: mechanically generated mutants of a reference
queue run through the stages of ``takeover mutate`` (:mod:`takeover._internal.commands.mutate`), the score and the
median time to kill per database.

Why in the bench: detection power measured on the planted bugs says how well takeover catches the bugs
its authors anticipated; the share of generated mutants it kills says how well it catches the others.
The full set takes about an hour per database (a 20 s stress run for every mutant the scenarios do not
kill), so the bench runs a sample by default (``--mutants N``, drawn from seed 1, the same sample every
time) and the full set when asked (``--mutants all``); the figures say which.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from takeover._internal import db
from takeover.errors import UsageError

DEFAULT_SAMPLE = 10
SEED = 1
KEYS = ("score", "score_checked", "median_time_to_kill_s", "mutants", "killed", "survived", "equivalent", "crash",
        "logic_mutants", "logic_killed_by_explore", "concurrency_mutants", "concurrency_killed_by_explore",
        "killed_by_stage", "survivors")


def measure(database: str, sample: int | None, stress_seconds: float = 20.0,
            progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The figures of one database's reference queue; ``{"skipped": why}`` when its server cannot start."""
    from takeover.contract import reference_queue
    from takeover.mutation.generate import generate
    from takeover.mutation.measure import measure as run_mutants
    from takeover.mutation.measure import select
    from takeover.mutation.runner import STAGES

    queue = reference_queue(database)
    mutants = generate(queue)
    chosen = select(mutants, None, sample, SEED)
    try:
        with db.serve(database), tempfile.TemporaryDirectory(prefix="takeover-bench-mutants-") as tmp:
            doc = run_mutants(queue, database, chosen, Path(tmp), SEED, stress_seconds, 5.0, STAGES[1:],
                              generated=len(mutants), progress=progress is not None)
    except UsageError as exc:  # no PostgreSQL server to start here: the other database's figures still count
        return {"skipped": str(exc)}
    figures = doc["figures"]
    return {"queue": queue, "generated": len(mutants), "sampled": sample is not None and sample < len(mutants),
            "seed": SEED, "stress_seconds": stress_seconds, **{k: figures[k] for k in KEYS}}


def line(name: str, fig: dict[str, Any]) -> str:
    """One database's figures in a line of the bench's output."""
    if "skipped" in fig:
        return f"mutation score ({name}): not measured: {fig['skipped']}"
    score = "n/a" if fig["score"] is None else f"{100 * fig['score']:.1f} %"
    ttk = "n/a" if fig["median_time_to_kill_s"] is None else f"{fig['median_time_to_kill_s']:.2f} s"
    what = f"a sample of {fig['mutants']} of {fig['generated']}" if fig["sampled"] else f"all {fig['mutants']}"
    return (f"mutation score ({name}, {what} mutants): {score} (target >= 95 %), median time to kill {ttk}; "
            f"{fig['killed']} killed ({fig['crash']} by a crash), {fig['survived']} survived, "
            f"{fig['equivalent']} equivalent")
