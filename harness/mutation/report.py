"""The mutation score from the outcomes: mutate.json's figures, the console table, the docs' tables
(docs/benchmarks.md, "Mutation score").

The score is the share of non-equivalent mutants killed: ``killed / (mutants run - equivalent)``.
Mutants killed by a crash (they do not import, cannot be opened, or raise on every call) count as
killed, since no queue with them would pass a test, but they say nothing of takeover's checks, so
they are also counted apart and the score without them is given beside it (``score_checked``).
The time to kill is the killing stage's time to its verdict: the stage's wall time for the crash,
scenarios and explore stages, the time from the run's start to its first violation for stress.
"""

from __future__ import annotations

import statistics
from typing import Any

from takeover.mutation.generate import CONCURRENCY_OPERATORS
from takeover.mutation.runner import CRASH, EQUIVALENT, EXPLORE, KILLED, STAGES, SURVIVED, Outcome


def figures(outcomes: list[Outcome]) -> dict[str, Any]:
    """The score and its parts over the outcomes so far."""
    killed = [o for o in outcomes if o.verdict == KILLED]
    survived = [o for o in outcomes if o.verdict == SURVIVED]
    equivalent = [o for o in outcomes if o.verdict == EQUIVALENT]
    crashed = [o for o in killed if o.stage == CRASH]
    judged = len(outcomes) - len(equivalent)
    checked = judged - len(crashed)
    times = [o.time_to_kill_s for o in killed if o.time_to_kill_s is not None]
    by_stage = {s: sum(1 for o in killed if o.stage == s) for s in STAGES}
    median_by_stage = {}
    for s in STAGES:
        ts = [o.time_to_kill_s for o in killed if o.stage == s and o.time_to_kill_s is not None]
        median_by_stage[s] = round(statistics.median(ts), 3) if ts else None
    # By operator, not by which stage happened to kill them (which made "explore kills every logic mutant" true
    # by definition): a concurrency mutant weakens a transaction or a row lock (CONCURRENCY_OPERATORS), and shows
    # only when two calls overlap; every other non-equivalent mutant is a logic mutant, that one sequence of
    # calls shows. Explore must kill every logic mutant alone (it also runs on those the scenarios killed first);
    # it kills the concurrency ones with its overlapping steps, counted apart. A crash says nothing of either.
    judged_ = [o for o in outcomes if o.verdict != EQUIVALENT and o.stage != CRASH]
    logic = [o for o in judged_ if o.mutant.operator not in CONCURRENCY_OPERATORS]
    concurrency = [o for o in judged_ if o.mutant.operator in CONCURRENCY_OPERATORS]

    def by_explore(group: list[Outcome]) -> list[Outcome]:
        return [o for o in group if o.stages.get(EXPLORE, {}).get("killed")]

    return {
        "mutants": len(outcomes),
        "logic_mutants": len(logic),
        "logic_killed_by_explore": len(by_explore(logic)),
        "logic_missed_by_explore": [o.mutant.id for o in logic if o not in by_explore(logic)],
        "concurrency_mutants": len(concurrency),
        "concurrency_killed_by_explore": len(by_explore(concurrency)),
        "concurrency_missed_by_explore": [o.mutant.id for o in concurrency if o not in by_explore(concurrency)],
        "killed": len(killed),
        "survived": len(survived),
        "equivalent": len(equivalent),
        "crash": len(crashed),
        "killed_by_stage": by_stage,
        "score": round(len(killed) / judged, 4) if judged else None,
        "score_checked": round((len(killed) - len(crashed)) / checked, 4) if checked else None,
        "median_time_to_kill_s": round(statistics.median(times), 3) if times else None,
        "median_time_to_kill_by_stage_s": median_by_stage,
        "survivors": [o.mutant.id for o in survived],
        "equivalents": {o.mutant.id: o.reason for o in equivalent},
        "equivalence_table_wrong": [o.mutant.id for o in outcomes if o.table_wrong],
    }


def print_table(doc: dict[str, Any], width: int = 120) -> None:
    """Survivors and equivalents row by row (with what each changed), then the score line."""
    import sys

    from rich.console import Console
    from rich.table import Table

    f = doc["figures"]
    console = Console(file=sys.stdout, width=max(width, 120))
    rows = [m for m in doc["mutants"] if m["verdict"] != KILLED or m.get("equivalence_table_wrong")]
    if rows:
        table = Table(title=f"mutants of {doc['queue']} not killed")
        for col in ("mutant", "verdict", "what", "reason / stress verdict"):
            table.add_column(col, overflow="fold")
        for m in rows:
            why = m.get("reason") or m.get("detail") or ""
            if m.get("equivalence_table_wrong"):
                why = f"listed as equivalent but killed by {m['stage']}: {m['detail']}"
            table.add_row(m["id"], m["verdict"], m["what"], why)
        console.print(table)
    stages = ", ".join(f"{s} {n}" for s, n in f["killed_by_stage"].items() if n)
    console.print(score_line(doc), markup=False, highlight=False)
    console.print(f"killed by stage: {stages or 'none'}; median time to kill {_s(f['median_time_to_kill_s'])}",
                  markup=False, highlight=False)


def score_line(doc: dict[str, Any]) -> str:
    f = doc["figures"]
    score = "n/a" if f["score"] is None else f"{100 * f['score']:.1f} %"
    checked = "n/a" if f["score_checked"] is None else f"{100 * f['score_checked']:.1f} %"
    return (f"mutation score {score} ({f['killed']} killed of {f['mutants'] - f['equivalent']} non-equivalent; "
            f"{f['survived']} survived, {f['equivalent']} equivalent, {f['crash']} crashed; without the crashes "
            f"{checked})")


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def markdown(docs: list[dict[str, Any]]) -> str:
    """The docs' tables from mutate.json files (docs/benchmarks.md, generated by docs/gen_reference.py): per
    queue its score, kills by stage and median time to kill; then each survivor with what its stages said,
    and the equivalent mutants grouped by reason."""
    lines = ["| queue | mutants | killed (crash / scenarios / explore / stress) | survived | equivalent | score "
             "| median time to kill |", "|---|---|---|---|---|---|---|"]
    for d in docs:
        f = d["figures"]
        k = f["killed_by_stage"]
        lines.append(f"| `{d['queue']}` | {f['mutants']} | {f['killed']} ({k['crash']} / {k['scenarios']} / "
                     f"{k['explore']} / {k['stress']}) | {f['survived']} | {f['equivalent']} | "
                     f"**{100 * (f['score'] or 0):.1f} %** | {_s(f['median_time_to_kill_s'])} |")
    lines.append("")
    for d in docs:  # explore's own share: the logic and the concurrency mutants, by operator (figures())
        f = d["figures"]
        lines.append(f"`{d['queue']}`: explore alone kills {f['logic_killed_by_explore']} of {f['logic_mutants']} "
                     f"logic mutants and {f['concurrency_killed_by_explore']} of {f['concurrency_mutants']} "
                     "concurrency mutants (a transaction or a lock weakened: its overlapping steps)." + "  ")
    lines += ["", "| survivor | what | what the stages said |", "|---|---|---|"]
    for d in docs:
        for m in d["mutants"]:
            if m["verdict"] == SURVIVED:
                lines.append(f"| `{m['id']}` | {_cell(m['what'])} | {_cell(m.get('detail') or '')} |")
    reasons: dict[str, list[str]] = {}
    for d in docs:
        for m in d["mutants"]:
            if m["verdict"] == EQUIVALENT:
                reasons.setdefault(m["reason"], []).append(m["id"])
    lines += ["", "| equivalent mutants | why no run can tell them from the unmutated queue |", "|---|---|"]
    lines += [f"| {', '.join(f'`{i}`' for i in ids)} | {_cell(why)} |" for why, ids in reasons.items()]
    return "\n".join(lines) + "\n"


def rejudge(doc: dict[str, Any], table: dict[str, str]) -> dict[str, Any]:
    """A mutate.json judged again against the equivalence table as it is now (entries added or removed since
    the run): no stage runs again; a survivor the table now lists becomes equivalent and the reverse, and the
    figures are computed anew."""
    from takeover.mutation.generate import Mutant

    outcomes = []
    for m in doc["mutants"]:
        mutant = Mutant(m["id"], doc["queue"].partition(":")[0], doc["queue"].partition(":")[2], m["site"],
                        m["operator"], m["what"], m["line"], "", m["diff"])
        o = Outcome(mutant, verdict=m["verdict"], stage=m["stage"], time_to_kill_s=m["time_to_kill_s"],
                    detail=m.get("detail", ""), stages=m.get("stages", {}), coverage=m.get("coverage_model"),
                    run_dir=m.get("run_dir"))
        if o.verdict != KILLED:
            o.verdict, o.reason = (EQUIVALENT, table[m["id"]]) if m["id"] in table else (SURVIVED, None)
        else:
            o.table_wrong = m["id"] in table
        outcomes.append(o)
    return {**doc, "figures": figures(outcomes), "mutants": [o.to_json() for o in outcomes]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":  # python -m takeover.mutation.report mutate.json ... > table.md (the docs' tables)
    import json
    import sys
    from pathlib import Path

    from takeover.mutation.equivalent import EQUIVALENT as TABLE

    sys.stdout.write(markdown([rejudge(json.loads(Path(p).read_text()), TABLE) for p in sys.argv[1:]]))
