"""The words every check report shares: the verdict's name and the remedy / heartbeat / reconciliation
lines. One place, so the terminal, report.md and report.html never call the same run two things."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from takeover._internal.store import VIOLATIONS_CSV

if TYPE_CHECKING:  # the reports import no part of the checker at run time
    from takeover.summary_types import AimedCoverage, ClockCoverage, DiagnosisJson, Summary

# What each aimed fault steers the workers into, and the promise that window tests (docs/explanation/model.md,
# the aimed faults' table).
AIMED_MEANING = {
    "expire_and_return": "S2: a holder's finish after its lease ran out, before any takeover (finish_within_lease)",
    "stale_return": "S3: a stale generation's finish while a newer one holds the task (no_stale_commit)",
    "claim_stampede": "claims racing for one fresh task at the same instant (lease_exclusive, generation_monotonic)",
    "duplicate_register": "a known task registered again by several producers at once: nothing may change "
                          "(state_matches_history, generation_monotonic, no_reclaim_after_terminal)",
    "freeze_in_call": "a queue call frozen between two of its own statements while another worker takes the task "
                      "over: check-then-act (no_stale_commit, lease_exclusive, state_matches_history)",
    "stale_heartbeat": "a stale holder's heartbeat (extend) while a newer generation holds the task (lease_exclusive)",
    "lease_edge": "a finish just before, just after or up to 0.3 s past its lease's end, before any takeover "
                  "(finish_within_lease)",
    "aim_unreached": "a situation of the spec the run had not reached yet (model coverage), built on purpose: the "
                     "call a correct queue refuses there (every invariant)",
}


def clock_brief(summary: Summary) -> str | None:
    """The clock faults in words (None when the run had none): the skews and the jumps, the largest of each."""
    clock: ClockCoverage | None = summary["coverage"].get("clock")
    if clock is None:
        return None
    skew = f" (up to {clock['skew_abs_max']:g} s either way)" if clock["skew_abs_max"] is not None else ""
    jump = f" (up to {clock['jump_abs_max']:g} s either way)" if clock["jump_abs_max"] is not None else ""
    return (f"clock faults: {clock['skewed']} worker incarnation(s) with a skewed clock{skew}, "
            f"{clock['jumps']} clock jump(s){jump}")


def plain(value: Any) -> str:
    """A value from summary.json as a person reads it in a table cell: no JSON brackets or quotes.

    Why: examples and sections hold lists and small dicts (a kill's phases, a task's accepted
    finishes as ``[generation, outcome, process]``), and a cell showing ``[[1, "done", 3]]`` or
    ``{"phase": {...}}`` makes the reader parse JSON. Lists read as comma-separated values, a list of
    lists as tuples, a dict as ``key value`` pairs (nested dicts as ``key: ...``), a missing value
    as a dash.
    """
    if hasattr(value, "tolist"):  # a numpy scalar or array from the in-memory summary: its plain value
        value = value.tolist()
    if value is None or (isinstance(value, float) and math.isnan(value)) or value in ({}, []):
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        nested = any(isinstance(v, dict) for v in value.values())
        return ("; " if nested else ", ").join(
            f"{k}: {plain(v)}" if isinstance(v, dict) else f"{k} {plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(f"({plain(v)})" if isinstance(v, list | tuple) else plain(v) for v in value)
    return str(value)


def verdict_word(summary: Summary) -> str:
    if summary["valid"] is False:
        return "INVALID"
    if summary["valid"] == "unknown":
        return "INCONCLUSIVE"
    return "VALID (duplicates fail this run)" if summary["failed_on_duplicates"] else "VALID"


def gate_line(summary: Summary) -> str | None:
    """The duplicate gate's verdict in one line (takeover._internal.checker.gate); None when no gate was asked for."""
    g = summary.get("duplicate_gate")
    if not g:
        return None
    if g.get("note"):
        return f"duplicate gate: {g['note']}"
    if g["failed"]:
        return "duplicate gate FAILED: " + "; ".join(g["reasons"])
    cap = f", cap {g['max_per_1000']:g}" if g["max_per_1000"] is not None else ""
    return (f"duplicate gate passed: {g['promised']} that remedy {g['remedy']} and the lease promise to prevent; "
            f"{g['per_1000']:g} per 1000 tasks{cap}")


def feature_lines(summary: Summary) -> list[str]:
    """What the remedy, the heartbeats and reconciliation did: for the terminal, report.md and report.html."""
    lines = []
    rem = summary.get("remedy")
    if rem:
        lines.append(f"remedy {rem['name']}: performed {rem['performed']}, deduplicated {rem['deduplicated']}, "
                     f"refused {rem['refused']} (of {rem['requests']} requests)")
    hb = summary.get("heartbeat")
    if hb and hb.get("interval"):
        ex = hb["extends"]
        state = "in effect" if hb.get("in_effect") else "NOT in effect"
        lines.append(f"heartbeat every {hb['interval']:g}s: {state}; extends ok {ex['ok']}, lost {ex['lost']}, "
                     f"indeterminate {ex['indeterminate']}" + (f" - {hb['note']}" if hb.get("note") else ""))
    rc = summary.get("reconcile")
    if rc:
        lines.append(f"reconciled: {rc['done']} uncertain -> done, {rc['pending']} -> pending (retry), "
                     f"{rc['rejected']} rejected, {rc['indeterminate']} indeterminate")
    return lines + power_loss_lines(summary) + network_lines(summary)


def network_lines(summary: Summary) -> list[str]:
    """Where the workers ran and what the network did to them (runs with hosts)."""
    net = summary.get("network")
    if not net:
        return []
    where = ", ".join(f"{w} on {h}" for w, h in net["placement"].items())
    faults = ", ".join(f"{k} {n}" for k, n in net["faults"].items())
    shapes = ", ".join(f"{k} {n}" for k, n in net["partitions"].items())
    lost = f"; packets lost to --net-loss: {net['lost_packets']}" if "lost_packets" in net else ""
    return [f"hosts {net['hosts']}: {where}; network faults: {faults}" + (f" (partitions: {shapes})" if shapes else "")
            + lost] + [f"network: {story}" for story in net["stories"]]


def power_loss_lines(summary: Summary) -> list[str]:
    """Which promises the power losses broke, in plain words, and their cost per power loss."""
    pl = summary.get("power_loss")
    if not pl:
        return []
    head = f"power losses: {pl['losses']}"
    if not pl["violations"]:
        return [f"{head}; every acknowledged answer survived them (no promise broken)"]
    per = pl["per_loss"]
    return [f"{head}; promises broken across them: {'; '.join(pl['broken'])}",
            f"per power loss: {per['reclaims']} reclaim(s) of finished tasks, {per['reused_generations']} "
            f"generation(s) handed out twice, {per['duplicates']} duplicate side effect(s)"]


def missed_why(aimed: AimedCoverage) -> str:
    """How many of an aimed fault's windows were missed, and why: ``2: <reason> (1); <reason> (1)``."""
    if not aimed["missed"]:
        return "0"
    return f"{aimed['missed']}: " + "; ".join(f"{why} ({n})" for why, n in aimed["reasons"].items())


def frozen_lines(aimed: dict[str, AimedCoverage]) -> list[str]:
    """Where freeze_in_call stopped workers inside their calls, one line a place, with the statement's text."""
    kind = aimed.get("freeze_in_call")
    frozen = kind.get("frozen") if kind is not None else None
    if not frozen:
        return []
    return ["", "Workers frozen inside a queue call (`freeze_in_call`), before the statement shown:", "",
            *(f"- {where} ({p['count']}x): `{p['statement'].replace('`', chr(39))}`" for where, p in frozen.items())]


def aimed_brief(summary: Summary) -> str | None:
    """The aimed faults on one line for the terminal (None when the run had none): hits of windows."""
    aimed = summary["coverage"].get("aimed")
    if not aimed:
        return None
    return "aimed faults (windows hit): " + ", ".join(f"{k} {a['hit']}/{a['total']}{_by_state(a)}"
                                                      for k, a in aimed.items())


def _by_state(aimed: AimedCoverage) -> str:
    """duplicate_register's windows per task state, `` (running 1/1, uncertain 0/1)``; empty for other kinds."""
    states = aimed.get("by_state")
    if not states:
        return ""
    return " (" + ", ".join(f"{s} {w['hit']}/{w['total']}" for s, w in states.items()) + ")"


@dataclass(frozen=True)
class Defect:
    """Every pattern of the diagnosis that points at one defect: one item in each report."""

    defect: str
    scenario: str
    sentence: str  # the sentence of its most frequent pattern
    entries: list[DiagnosisJson]
    confirmed_by: str | None  # the first confirmation any of its patterns got
    replay_task: str | None  # the task `takeover replay --task` shows it on, where one process can


def defects(summary: Summary) -> list[Defect]:
    """The diagnosis grouped by defect, most violations first: a stale finish shows as
    ``no_stale_commit``, ``finish_within_lease`` and ``state_matches_history`` at once, and the
    reader needs the one defect, with every invariant it broke beside it."""
    groups: dict[str, list[DiagnosisJson]] = {}
    for entry in summary.get("diagnosis", []):
        if isinstance(entry, dict) and "defect" in entry:  # a summary of another version may hold other shapes
            groups.setdefault(entry["defect"], []).append(entry)
    out = []
    for defect, entries in groups.items():
        lead = max(entries, key=lambda e: e["count"])
        out.append(Defect(defect, lead["scenario"], lead["sentence"], entries,
                          next((e["confirmed_by"] for e in entries if e.get("confirmed_by")), None),
                          lead["replay_task"] or next((e["replay_task"] for e in entries if e["replay_task"]), None)))
    return sorted(out, key=lambda d: -sum(e["count"] for e in d.entries))


def seen_as(d: Defect) -> str:
    """Where a defect showed: ``no_stale_commit 1, state_matches_history 1 (stale_overwrite)``."""
    return ", ".join(f"{e['invariant']} {e['count']} ({e['pattern']}, {e['task_count']} task(s))" for e in d.entries)


def replay_command(summary: Summary, task: str) -> str:
    """The command that replays one task's calls in one process (``takeover replay``)."""
    return f"takeover replay {shlex.quote(str(summary['run_dir']))} --task {shlex.quote(task)}"


def notes(summary: Summary, d: Defect) -> list[tuple[str, str]]:
    """What each report says under a defect's sentence, as (words, command): where it showed, the
    spec's confirmation, and the command that replays it (empty where there is none)."""
    out = [(f"seen as: {seen_as(d)}", "")]
    # A mid-run probe's sentence says how soon the table went back on an answer: shown beside the lead
    # sentence (often a later consequence, with more violations), not only in summary.json.
    probe = next((e for e in d.entries if e["pattern"].startswith("probe_") and e["sentence"] != d.sentence), None)
    if probe is not None:
        out.append((f"seen mid-run: {probe['sentence']}", ""))
    if d.confirmed_by:
        out.append((f"confirmed by the spec: {d.confirmed_by}", ""))
    if d.replay_task:
        out.append(("confirm it in one process: ", replay_command(summary, d.replay_task)))
    else:
        out.append(("one process cannot replay it (a race, a task passed over among others, a power loss): see the "
                    f"tasks in {VIOLATIONS_CSV}", ""))
    return out


def diagnosis_lines(summary: Summary) -> list[str]:
    """The diagnosis as plain lines for the terminal: per defect its sentence, then its notes indented."""
    lines: list[str] = []
    for d in defects(summary):
        lines.append(d.sentence)
        lines += [f"  {words}{command}" for words, command in notes(summary, d)]
    return lines


def anchor(task: str) -> str:
    """The id of a task's section in report.html: ``task-`` and the task id, with anything outside
    [A-Za-z0-9.-] (``_`` included, so no two ids meet) spelled as ``_``, its code point in hex and
    ``_``: any id makes a valid fragment of its own."""
    return "task-" + re.sub(r"[^A-Za-z0-9.-]", lambda m: f"_{ord(m.group()):x}_", task)
