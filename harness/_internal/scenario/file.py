"""Scenario files: the spec's table format (``harness/data/scenarios.json``) for anyone's own scenarios.

Why a checked format: ``takeover scenarios --file`` runs tables written by people (and the
regression scenarios ``takeover replay`` writes). A typo in a hand-written table (``retruns``, a
generation written as ``"1"``, a step named ``claimed``) must be one line naming the scenario, the
step and the key, not a traceback in the middle of a replay, nor a silently ignored expectation.

The format, as the spec's own file has it (every key of the spec's file is accepted):

* top level: ``scenarios`` (a non-empty list); optional ``lease_seconds`` (the lease every claim
  asks for; 30, the spec's, when absent), ``title`` (text, or ``{"en": ..., "zh": ...}``) and
  ``queue`` (``MODULE:ATTR``, the queue the scenarios run on when ``--queue`` is not given).
* a scenario: ``id`` (unique text), ``title`` and ``steps`` (a non-empty list); optional
  ``heading``, ``task`` (the task id the steps act on, ``"task"`` when absent: some queues behave
  differently for some ids), ``lease_seconds`` and ``final_ledger_actions``.
* a step: ``t`` (a number: the logical clock, passed as ``now``) and ``step`` (one of
  :data:`~takeover._internal.scenario.engine.STEP_KINDS`); ``actor`` (the worker name claims pass; required by
  ``claim``); what the step does: ``outcome`` and ``with_generation`` (finish: done/uncertain;
  resolve: done/pending; extend: ``with_generation``), ``lease`` (claim, extend: this step's lease),
  ``response_lost`` (external_action); and what a correct queue must answer, each optional (only
  the keys present are compared): ``returns``, ``state``, ``generation``, ``lease_until``,
  ``ledger_actions``; and the texts ``label`` and ``why``.
* ``batch`` (register, optional): true registers through the optional ``register_many`` (a batch of the
  scenario's one task).
* two calls at once (``takeover explore`` writes them): a register, claim, finish, extend or resolve step
  with ``pause_before_statement`` (an integer from 1) starts on a second queue object opened on the same
  database and stops before that statement of its own; the next step (one such call) runs in the gap;
  then a ``resume`` step lets the paused call finish. The paused step's ``returns`` is its answer, the
  resume step's ``state``, ``generation`` and ``lease_until`` the snapshot after both. The expectations
  are those of the paused call taking effect first; when the two calls were under way at once, the resume
  step's optional ``gap_first`` (``paused_returns``, ``gap_returns``, ``state``, ``generation``,
  ``lease_until``: the other order's, written from the spec's model) passes too.
* several tasks in one scenario (``takeover explore`` writes them for a departure no one task's steps
  show): the scenario's ``tasks`` (distinct ids) names them; a step's ``task`` is the one it acts on (the
  scenario's ``task`` when absent), and on a claim the one it must hand out (an expectation: the spec lets a
  claim take any claimable task, so it is written only where one is claimable); a step's ``snapshot``
  (``{task: [state, generation, lease_until]}``) is every task's row after it, compared as a whole. A file
  without these keys reads as it always did.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from takeover._internal import store
from takeover._internal.scenario.engine import LANGS, PAUSABLE, RESOLUTIONS, STEP_KINDS, TASK_ID
from takeover.contract import OUTCOMES, STATES
from takeover.errors import UsageError

DEFAULT_LEASE = 30.0  # the spec's lease, for a file that does not name one
_SHOWN = 80  # characters of a bad value quoted in an error

_TOP_KEYS = {"scenarios", "lease_seconds", "title", "source", "claimable", "finish_accepted", "queue"}
_SCENARIO_KEYS = {"id", "title", "steps", "heading", "task", "tasks", "lease_seconds", "final_ledger_actions"}
_STEP_KEYS = {"t", "step", "actor", "outcome", "with_generation", "lease", "response_lost", "generation",
              "returns", "state", "lease_until", "ledger_actions", "label", "why", "pause_before_statement",
              "batch", "gap_first", "task", "snapshot"}
_GAP_FIRST_KEYS = {"paused_returns", "gap_returns", "state", "generation", "lease_until"}
# What each kind needs beyond t and step.
_NEEDS: dict[str, tuple[str, ...]] = {
    "claim": ("actor",),
    "finish": ("outcome", "with_generation"),
    "extend": ("with_generation",),
    "resolve": ("outcome", "with_generation"),
}


class _Where:
    """Where in the file a problem is, for the one-line error."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> UsageError:
        return UsageError(f"{self.source}: {where}{': ' if where else ''}{problem}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    """A finite number that a float holds: an integer of 400 digits is text of a number, not a clock."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past a float's range
        return False


def _shown(value: object) -> str:
    """A value quoted in an error, cut short: the error stays one readable line whatever the file holds."""
    try:
        text = repr(value)
    except RecursionError:
        return "a value nested too deeply to show"
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _text(value: object, what: str, where: str, w: _Where) -> dict[str, str]:
    """A text in one language or in several: always returned as ``{lang: text}`` for every language,
    so the transcript (which prints ``label[lang]``) reads a hand-written file as it reads the spec's."""
    if isinstance(value, str):
        return dict.fromkeys(LANGS, value)
    if isinstance(value, dict) and value and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        first = next(iter(value.values()))
        return {lang: value.get(lang, value.get("en", first)) for lang in LANGS} | value
    raise w.fail(where, f"'{what}' must be text or {{\"en\": text, ...}}, got {_shown(value)}")


def _unknown(obj: dict[str, Any], allowed: set[str], where: str, w: _Where) -> None:
    extra = sorted(k for k in obj if k not in allowed)
    if extra:
        raise w.fail(where, f"unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _lease(value: object, what: str, where: str, w: _Where) -> float:
    if not _is_number(value) or float(value) <= 0:  # type: ignore[arg-type]
        raise w.fail(where, f"'{what}' must be a positive number of seconds, got {_shown(value)}")
    return float(value)  # type: ignore[arg-type]


def _label(step: dict[str, Any]) -> str:
    label = _what(step)
    if "pause_before_statement" in step:
        label += f", paused before its statement {step['pause_before_statement']}"
    return label


def _what(step: dict[str, Any]) -> str:
    """The label a step without one gets: what it does, in the spec's words."""
    kind = step["step"]
    if kind == "finish":
        return f"finish {step['outcome']} (generation {step['with_generation']})"
    if kind == "resolve":
        return f"resolve to {step['outcome']} (generation {step['with_generation']})"
    if kind == "extend":
        return f"extend (generation {step['with_generation']})"
    if kind == "external_action":
        return "external action, reply lost" if step.get("response_lost") else "external action"
    if kind == "exit_and_reopen":
        return "worker exits, connection reopened"
    if kind == "resume":
        return "the paused call resumes"
    return kind


def _check_expected(step: dict[str, Any], where: str, w: _Where) -> None:
    kind = step["step"]
    if "returns" in step:
        got = step["returns"]
        good = {
            "claim": got is None or (_is_int(got) and got > 0),
            "finish": isinstance(got, bool),
            "resolve": isinstance(got, bool),
            "extend": got is None or _is_number(got),
            "external_action": got == "timeout" or (_is_int(got) and got >= 0),
        }.get(kind, got is None)
        if not good:
            want = {"claim": "a generation (an integer above 0) or null", "finish": "true or false",
                    "resolve": "true or false", "extend": "the new lease_until (a number) or null",
                    "external_action": '"timeout" or the number of actions performed'}.get(kind, "null")
            raise w.fail(where, f"'returns' of a {kind} step must be {want}, got {_shown(got)}")
    if "state" in step and step["state"] is not None and step["state"] not in STATES:
        raise w.fail(where, f"'state' must be one of {', '.join(STATES)} or null, got {_shown(step['state'])}")
    if "generation" in step and step["generation"] is not None and not (_is_int(step["generation"])
                                                                        and step["generation"] >= 0):
        raise w.fail(where, f"'generation' must be an integer of 0 or more, or null, got {_shown(step['generation'])}")
    if "lease_until" in step and step["lease_until"] is not None and not _is_number(step["lease_until"]):
        raise w.fail(where, f"'lease_until' must be a number or null, got {_shown(step['lease_until'])}")
    if "ledger_actions" in step and not (_is_int(step["ledger_actions"]) and step["ledger_actions"] >= 0):
        raise w.fail(where, f"'ledger_actions' must be an integer of 0 or more, got {_shown(step['ledger_actions'])}")


def _check_step(raw: object, where: str, w: _Where) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise w.fail(where, f"a step must be an object, got {type(raw).__name__}")
    _unknown(raw, _STEP_KEYS, where, w)
    step = dict(raw)
    for key in ("t", "step"):
        if key not in step:
            raise w.fail(where, f"missing key {_shown(key)}")
    if not _is_number(step["t"]):
        raise w.fail(where, f"'t' must be a number (the logical clock), got {_shown(step['t'])}")
    kind = step["step"]
    if kind not in STEP_KINDS:
        raise w.fail(where, f"unknown step {_shown(kind)} (choose from {', '.join(STEP_KINDS)})")
    for key in _NEEDS.get(kind, ()):
        if step.get(key) is None:
            raise w.fail(where, f"a {kind} step needs {_shown(key)}")
    step.setdefault("actor", None)
    if step["actor"] is not None and not isinstance(step["actor"], str):
        raise w.fail(where, f"'actor' must be text or null, got {_shown(step['actor'])}")
    if "with_generation" in step and not _is_int(step["with_generation"]):
        raise w.fail(where, f"'with_generation' must be an integer, got {_shown(step['with_generation'])}")
    if kind == "finish" and step["outcome"] not in OUTCOMES:
        raise w.fail(where, f"'outcome' of a finish must be one of {', '.join(OUTCOMES)}, "
                            f"got {_shown(step['outcome'])}")
    if kind == "resolve" and step["outcome"] not in RESOLUTIONS:
        raise w.fail(where, f"'outcome' of a resolve must be one of {', '.join(RESOLUTIONS)}, "
                            f"got {_shown(step['outcome'])}")
    if "lease" in step:
        step["lease"] = _lease(step["lease"], "lease", where, w)
    if "response_lost" in step and not isinstance(step["response_lost"], bool):
        raise w.fail(where, f"'response_lost' must be true or false, got {_shown(step['response_lost'])}")
    if "generation" in step and kind == "external_action" and not _is_int(step["generation"]):
        raise w.fail(where, f"'generation' must be an integer, got {_shown(step['generation'])}")
    if "batch" in step and (kind != "register" or not isinstance(step["batch"], bool)):
        raise w.fail(where, f"'batch' is true or false on a register step (register_many), got {_shown(step['batch'])}")
    if "pause_before_statement" in step:
        pause = step["pause_before_statement"]
        if not (_is_int(pause) and pause >= 1):
            raise w.fail(where, f"'pause_before_statement' must be an integer of 1 or more, got {_shown(pause)}")
        if kind not in PAUSABLE:
            raise w.fail(where, f"a {kind} step cannot be paused (only {', '.join(PAUSABLE)})")
    if "gap_first" in step:
        other = step["gap_first"]
        if kind != "resume" or not isinstance(other, dict):
            raise w.fail(where, f"'gap_first' is an object on a resume step, got {_shown(other)}")
        _unknown(other, _GAP_FIRST_KEYS, f"{where} gap_first", w)
    _check_expected(step, where, w)
    _check_tasks(step, where, w)
    step["label"] = _text(step.get("label", _label(step)), "label", where, w)
    step["why"] = _text(step.get("why", ""), "why", where, w)
    return step


def _check_tasks(step: dict[str, Any], where: str, w: _Where) -> None:
    """A step of a scenario of several tasks: ``task`` (the one it acts on; on a claim, the one it must
    hand out) and ``snapshot`` (every task's row after it, ``{task: [state, generation, lease_until]}``).
    Whether the task is one of the scenario's is checked with the scenario (:func:`_check_scenario`)."""
    if "task" in step and (not isinstance(step["task"], str) or not step["task"]):
        raise w.fail(where, f"'task' must be a non-empty task id, got {_shown(step['task'])}")
    if "task" in step and step["step"] in ("exit_and_reopen", "resume"):
        raise w.fail(where, f"the {step['step']} step acts on no task: 'task' is not allowed")
    if "snapshot" not in step:
        return
    snap = step["snapshot"]
    good = isinstance(snap, dict) and all(
        isinstance(k, str) and isinstance(row, list) and len(row) == 3 and row[0] in STATES
        and _is_int(row[1]) and row[1] >= 0 and (row[2] is None or _is_number(row[2])) for k, row in snap.items())
    if not good:
        raise w.fail(where, "'snapshot' must be {task: [state, generation, lease_until]} for every task the queue "
                            f"holds, got {_shown(snap)}")


def _check_overlaps(steps: list[dict[str, Any]], where: str, w: _Where) -> None:
    """A paused step is followed by one call and a resume; a resume ends a paused step's overlap."""
    for i, st in enumerate(steps):
        if "pause_before_statement" in st:
            ok = (i + 2 < len(steps) and steps[i + 1]["step"] in PAUSABLE
                  and "pause_before_statement" not in steps[i + 1] and steps[i + 2]["step"] == "resume")
            if not ok:
                raise w.fail(f"{where} step {i + 1}", "a paused step must be followed by one register, claim, "
                                                      "finish, extend or resolve step, then a resume step")
        elif st["step"] == "resume" and not (i >= 2 and "pause_before_statement" in steps[i - 2]):
            raise w.fail(f"{where} step {i + 1}", "a resume step must come two steps after a paused step")


def _check_scenario(raw: object, n: int, seen: set[str], w: _Where) -> dict[str, Any]:
    where = f"scenarios[{n}]"
    if not isinstance(raw, dict):
        raise w.fail(where, f"a scenario must be an object, got {type(raw).__name__}")
    if isinstance(raw.get("id"), str) and raw["id"]:
        plain = raw["id"].isprintable() and len(raw["id"]) <= _SHOWN  # else quoted: the error stays one line
        where = f"scenario {raw['id'] if plain else _shown(raw['id'])}"
    _unknown(raw, _SCENARIO_KEYS, where, w)
    for key in ("id", "title", "steps"):
        if key not in raw:
            raise w.fail(where, f"missing key {_shown(key)}")
    sc = dict(raw)
    if not isinstance(sc["id"], str) or not sc["id"].strip():
        raise w.fail(where, f"'id' must be non-empty text, got {_shown(sc['id'])}")
    if sc["id"] in seen:
        raise w.fail(where, "the id is used by an earlier scenario too")
    seen.add(sc["id"])
    if not isinstance(sc["title"], str):
        raise w.fail(where, f"'title' must be text, got {_shown(sc['title'])}")
    if "task" in sc and (not isinstance(sc["task"], str) or not sc["task"]):
        raise w.fail(where, f"'task' must be a non-empty task id, got {_shown(sc['task'])}")
    if "tasks" in sc:
        tasks = sc["tasks"]
        if not (isinstance(tasks, list) and tasks and all(isinstance(k, str) and k for k in tasks)
                and len(set(tasks)) == len(tasks)):
            raise w.fail(where, f"'tasks' must be a list of distinct non-empty task ids, got {_shown(tasks)}")
    if "lease_seconds" in sc:
        sc["lease_seconds"] = _lease(sc["lease_seconds"], "lease_seconds", where, w)
    final = sc.get("final_ledger_actions", 0)
    if not (_is_int(final) and final >= 0):
        raise w.fail(where, f"'final_ledger_actions' must be an integer of 0 or more, got {_shown(final)}")
    if not isinstance(sc["steps"], list) or not sc["steps"]:
        raise w.fail(where, "'steps' must be a non-empty list")
    sc["steps"] = [_check_step(st, f"{where} step {i}", w) for i, st in enumerate(sc["steps"], start=1)]
    _check_overlaps(sc["steps"], where, w)
    known = {sc.get("task", TASK_ID), *sc.get("tasks", ())}
    for i, st in enumerate(sc["steps"], start=1):
        for k in [st.get("task"), *st.get("snapshot", {})]:
            if k is not None and k not in known:
                raise w.fail(f"{where} step {i}", f"task {_shown(k)} is not one of the scenario's "
                                                  f"({', '.join(sorted(known))}): name it in 'tasks'")
    sc["heading"] = _text(sc.get("heading", sc["title"]), "heading", where, w)
    return sc


def validate_scenarios(doc: object, source: str) -> dict[str, Any]:
    """The checked, filled-in document (labels and headings in every language, the lease), or a
    :class:`UsageError` naming the first problem and where it is."""
    w = _Where(source)
    if not isinstance(doc, dict):
        raise w.fail("", f"the top level must be an object with a 'scenarios' list, got {type(doc).__name__}")
    _unknown(doc, _TOP_KEYS, "", w)
    if "scenarios" not in doc:
        raise w.fail("", "missing key 'scenarios'")
    if not isinstance(doc["scenarios"], list) or not doc["scenarios"]:
        raise w.fail("", "'scenarios' must be a non-empty list")
    if "queue" in doc and (not isinstance(doc["queue"], str) or doc["queue"].count(":") != 1):
        raise w.fail("", f"'queue' must be MODULE:ATTR, got {_shown(doc['queue'])}")
    out = dict(doc)
    out["lease_seconds"] = _lease(doc.get("lease_seconds", DEFAULT_LEASE), "lease_seconds", "", w)
    out["title"] = _text(doc.get("title", Path(source).name), "title", "", w)
    seen: set[str] = set()
    out["scenarios"] = [_check_scenario(sc, n, seen, w) for n, sc in enumerate(doc["scenarios"])]
    return out


def load_scenario_file(path: str | Path) -> dict[str, Any]:
    """Read and check a scenario file; every problem is a one-line :class:`UsageError` (exit 2)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read scenario file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (UTF-8 JSON expected)") from None
    try:
        doc = store.loads_json(text)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return validate_scenarios(doc, str(path))
