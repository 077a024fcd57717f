"""report.md: what a terminal user reads. The verdict first, then what broke, then the context."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from takeover._internal.store import VIOLATIONS_CSV
from takeover.reports import coverage
from takeover.reports.words import (
    AIMED_MEANING,
    clock_brief,
    defects,
    feature_lines,
    frozen_lines,
    missed_why,
    notes,
    plain,
    verdict_word,
)

if TYPE_CHECKING:  # the reports import no part of the checker at run time
    from takeover.summary_types import Percentiles, Summary

MEANING = {
    "no_stale_commit": "no finish accepted for a generation lower than one already claimed",
    "finish_within_lease": "every accepted finish was called with now < lease_until of its own claim",
    "no_reclaim_after_terminal": "no claim succeeds after a finish of that task took effect",
    "generation_monotonic": "claims of a task get distinct, increasing generations; gaps only from unknown claims",
    "lease_exclusive": "no lease granted while an earlier lease of the task was still valid",
    "single_finish": "at most one finish per task takes effect",
    "state_matches_history": "the final snapshot follows from the recorded operations",
    "no_lost_task": "after the drain every task is terminal, and none terminal without an attempted action",
    # Listed only when violated (takeover._internal.checker.well_formed): the answers the invariants are judged on.
    "answers_well_formed": "every answer had the contract's form, and every lease end was the one asked for",
}

# What each duplicate cause means (``duplicates.by_cause`` in summary.json; see
# harness/_internal/checker/duplicate_causes.py:duplicates for the exact rule). The earlier holder is the older of the
# two generations behind an extra action and the action before it.
CAUSE_MEANING = {
    "s5": "the earlier holder was killed after acting, before its finish took effect; its lease ran out and "
          "the task was taken over (S5: an idempotent service, --remedy idempotency-key, avoids it)",
    "lost_lease": "the earlier holder outlived its lease (paused or slow) and acted anyway, after its lease had "
                  "run out and the task was taken over (a longer lease or heartbeats make it rarer)",
    "other": "the earlier holder's lease was still valid when the task was handed to another worker (a double "
             "lease: a queue bug, see lease_exclusive), whichever way that holder ended; or the task was "
             "handed out again after a finish took effect, or one generation acted twice",
    "clock": "a clock fault lost the earlier holder's lease: by the clocks its lease had run out, but on the real "
             "clock it had not (the taker's clock was ahead of the holder's, or the holder's finish was refused "
             "as late by a clock that had jumped ahead); only in runs with clock faults",
}


def _cell(value: Any) -> str:
    return plain(value).replace("|", "\\|")


def _mark(valid: Any) -> str:
    return {True: "✅ holds", False: "❌ VIOLATED"}.get(valid, "❔ unknown")


def _table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    keys = list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(_cell(r.get(k, "")) for k in keys) + " |" for r in rows]
    return out


def render(summary: Summary) -> str:
    s = summary
    lines = [f"# takeover check: {verdict_word(s)}", ""]
    cfg = s.get("config", {})
    lines.append(f"Run `{s['run_dir']}` — queue `{cfg.get('queue', '?')}`, seed {cfg.get('seed', '?')}, "
                 f"profile {cfg.get('profile', '?')}, {cfg.get('workers', '?')} workers, lease "
                 f"{cfg.get('lease', '?')} s"
                 + (f", on Redis with persistence {cfg['redis_persistence']}." if cfg.get("redis_persistence")
                    else "."))
    if s["inconclusive"]:
        lines += ["", f"**Inconclusive:** {s['inconclusive']} — this run proves nothing about the queue."]
    if s["failed_on_duplicates"]:
        lines += ["", "**Failed because of duplicate side effects**: " + "; ".join(
            s.get("duplicate_gate", {}).get("reasons") or ["`--fail-on-duplicates`"]) + "."]
    lines += _diagnosis(s)
    lines += ["", "## Invariants", "", "| invariant | verdict | violations | meaning |", "|---|---|---|---|"]
    for name, inv in s["invariants"].items():
        lines.append(f"| `{name}` | {_mark(inv['valid'])} | {inv['violations']} | {MEANING.get(name, '')} |")
    for name, inv in s["invariants"].items():
        if inv["valid"] is True:
            continue
        lines += ["", f"### `{name}`: {_mark(inv['valid'])}"]
        if inv.get("note"):
            lines += ["", inv["note"]]
        if inv["examples"]:
            shown = (f"the first {len(inv['examples'])} of {inv['violations']}; every one is in `{VIOLATIONS_CSV}`"
                     if inv["violations"] > len(inv["examples"]) else f"every one is also in `{VIOLATIONS_CSV}`")
            lines += ["", f"Examples ({shown}; times in seconds since the run started; `by` = worker incarnation):",
                      ""]
            lines += _table(inv["examples"])
    d = s["duplicates"]
    lines += ["", "## Duplicate side effects (from the ledger)", ""]
    if d.get("tasks") is None:
        lines.append(f"Not counted: {d.get('note', 'no ledger')}.")
    else:
        lines.append(f"{d['tasks']} task(s) had their side effect performed more than once: "
                     f"{d['extra_actions']} extra action(s).")
        lines += ["", "| cause | extra actions | meaning |", "|---|---|---|",
                  *[f"| {c} | {d['by_cause'].get(c, 0)} | {text} |" for c, text in CAUSE_MEANING.items()
                    if c in d["by_cause"] or c != "clock"]]
        if d.get("examples"):
            lines += ["", "Each extra action against the performed action before it on the same task; "
                      "`older_lease_until` is the lease the older of the two generations held (claim or "
                      "heartbeat) when the task was taken over from it at `taken_over_at` (the next "
                      "claim's `now`): a later lease means a double lease." + (
                          " With clock faults, `real_lease_left` is what that lease had left on the real clock "
                          "at the takeover (positive: only the clocks said it had run out)."
                          if "clock" in d["by_cause"] else ""), "", *_table(d["examples"])]
    if s.get("remedy"):
        lines += ["", "## Remedy, heartbeats, reconciliation", "", *[f"- {x}" for x in feature_lines(s)]]
    c = s["counts"]
    lines += ["", "## Counts", "", "| what | value |", "|---|---|"]
    rows = [
        ("tasks registered", c["tasks"]),
        ("final states (the queue's snapshot)",
         ", ".join(f"{k} {v}" for k, v in (c.get("final_states") or {}).items()) or "no snapshot"),
        ("attempted (action requested)", c["attempted"]),
        ("acknowledged (a finish done returned True)", c["acknowledged"]),
        ("uncertain (a finish uncertain returned True)", c["uncertain"]),
        ("recovered (uncertain, yet the ledger shows it happened)", c["recovered"]),
        ("lost (done, but no action in the ledger)", c["lost"]),
        ("claims ok / empty / unknown", f"{c['claims']['ok']} / {c['claims']['empty']} / "
                                         f"{c['claims']['indeterminate']}"),
        ("finishes accepted / refused / unknown", f"{c['finishes']['accepted']} / {c['finishes']['rejected']} / "
                                                   f"{c['finishes']['indeterminate']}"),
        ("stale finishes refused by the fence", c["finishes"]["rejected_stale"]),
        ("takeovers (a task claimed from a holder whose finish was not accepted)", c["takeovers"]),
        ("orphan recovery p50 / p99 / max (s)", _trio(c["orphan_recovery_s"])),
        ("throughput (finishes accepted / s)", c["throughput_per_s"]),
        ("run length (s)", c["duration_s"]),
    ]
    lines += [f"| {k} | {_cell(v)} |" for k, v in rows]
    if c["latency_ms"]:
        lines += ["", "Operation latency (ms):", "", "| op | n | p50 | p99 | max |", "|---|---|---|---|---|"]
        lines += [f"| {f} | {v['n']} | {v['p50']} | {v['p99']} | {v['max']} |" for f, v in c["latency_ms"].items()]
    cov = s["coverage"]
    lines += ["", "## Fault coverage", "",
              f"- kills: {cov['kills']['total']} — by phase {_kv(cov['kills']['by_phase'])}; by aim "
              f"{_kv(cov['kills']['by_aim'])}",
              f"- pauses: {cov['pauses']['total']}, {cov['pauses']['past_lease']} past the holder's lease",
              f"- slow tasks: {cov['slows']['total']}, {cov['slows']['past_lease']} past the lease",
              f"- lost replies: {cov['lost_replies']['history']} in the history, "
              f"{cov['lost_replies']['ledger']} in the ledger"]
    clock = clock_brief(s)
    if clock:
        lines.append(f"- {clock}")
    if cov.get("aimed"):
        lines += ["", "Aimed faults (each steers workers into one narrow window; its freezes are among the "
                      "pauses above):", "", "| fault | window | tried | hit | missed (why) |", "|---|---|---|---|---|"]
        lines += [f"| `{kind}` | {AIMED_MEANING.get(kind, '')} | {a['total']} | {a['hit']} | "
                  f"{_cell(missed_why(a))} |" for kind, a in cov["aimed"].items()]
        lines += frozen_lines(cov["aimed"])
    lines += coverage.markdown(s)
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in s["warnings"]] or ["None."]
    hist = s["history"]
    lines += ["", f"History: {hist['lines']} records, torn last line: {hist['torn_tail']}, corrupt lines: "
                  f"{hist['corrupt_lines']}. Checked in {s['check_seconds']} s."]
    if cfg.get("command"):
        lines += ["", "## Reproduce", "", "```", str(cfg["command"]), "```"]
    return "\n".join(lines) + "\n"


def _diagnosis(s: Summary) -> list[str]:
    """The likely defects, each with where it showed and how to confirm it; nothing for a valid run."""
    found = defects(s)
    if not found:
        return []
    lines = ["", "## Diagnosis", "",
             f"What the violations point at, most first (every violation, one row each: `{VIOLATIONS_CSV}`):",
             ""]
    for d in found:
        lines.append(f"- **{d.sentence}**")
        lines += [f"  - {words}" + (f"`{command}`" if command else "") for words, command in notes(s, d)]
    return lines


def _trio(p: Percentiles) -> str:
    return "–" if not p.get("n") else f"{p['p50']} / {p['p99']} / {p['max']}"


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"
