"""``takeover replay RUN_DIR --issue``: a bug report a library's maintainer can act on.

Why a report of its own: the replay's scenario file speaks the queue contract (claim, finish,
generation), which a maintainer of the library has no reason to know. The report says the same
thing in the library's terms and in plain words: which versions, which database, the shrunk
sequence of calls as the library's own API calls (where the adapter names them), what a correct
queue answers at each step against what the library answered, and the one command that shows it
again. It is written from the scenario file the replay just wrote, replayed once more here, so the
report shows what the library does today, not what a stress run saw.

The adapter hook, all optional class attributes of the queue (``MODULE:ATTR``):

* ``library``: the library's distribution name (``"litequeue"``); its installed version is read
  with :mod:`importlib.metadata`.
* ``library_calls``: ``{contract call: the library's calls}``, keys ``register``, ``claim``,
  ``finish:done``, ``finish:uncertain``, ``extend``, ``resolve:done``, ``resolve:pending``,
  ``exit_and_reopen`` and ``snapshot`` (how the state shown is read).
* ``library_states``: ``{contract state: the library's name for it}`` (``{"done": "DONE"}``).

Without them the report names the contract's calls and states, which still reads on its own.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import re
import shlex
import sqlite3
from pathlib import Path
from typing import Any

from takeover._internal import db, store
from takeover._internal.replay.judge import judge
from takeover._internal.replay.model import SPEC
from takeover._internal.scenario.file import validate_scenarios
from takeover._internal.scenario.replay import run_scenarios
from takeover._internal.scenario.results import ReplayedScenario, StepResult
from takeover.contract import load_queue_factory
from takeover.version import __version__

ISSUE_FILE = "issue.md"  # beside the scenario file, without a path

# Each promise in words a library's maintainer reads without knowing takeover: (what went wrong, the rule).
PROMISES: dict[str, tuple[str, str]] = {
    "no_stale_commit": (
        "a worker's completion takes effect after its job was handed to another worker",
        "Once a job has been handed out again, the earlier holder no longer holds it: its completion must be "
        "refused (and must not change the job), however late it arrives.",
    ),
    "finish_within_lease": (
        "a completion is accepted from a worker that does not hold the job",
        "A completion must be accepted only from the worker the job was last handed to, and only before its "
        "lease (visibility timeout) runs out; after that the job may already be running elsewhere.",
    ),
    "single_finish": (
        "a job is completed twice",
        "A job is completed once: a second completion, from anyone, must be refused.",
    ),
    "no_reclaim_after_terminal": (
        "a finished job is handed out again",
        "A job that was completed (succeeded, or failed for good) must never be handed to a worker again.",
    ),
    "lease_exclusive": (
        "a job is handed to a second worker while the first one's lease still runs",
        "While a worker's lease on a job runs, no other worker may be handed that job.",
    ),
    "generation_monotonic": (
        "the hand-outs of a job are not counted one after the other",
        "Each hand-out of a job is the next one (1, 2, 3, ...): a hand-out never repeats or skips a number.",
    ),
    "state_matches_history": (
        "the job's stored state is not what its accepted completions say",
        "The state the queue stores must be the outcome of the completion it accepted last, and only that.",
    ),
    "no_lost_task": (
        "a job that should be handed out is not",
        "A waiting job, or one whose holder's lease ran out, must be handed to the next worker that asks.",
    ),
    SPEC: (
        "the queue answers differently from the lease rules",
        "Every call must answer as the lease rules below say.",
    ),
}

RULES = (
    "The lease rules the report holds the library to (the common contract of a lease-based queue: "
    "SQS's visibility timeout, a job lock with a heartbeat): a worker that is handed a job holds it for "
    "a lease of L seconds; after that the job may be handed to another worker; a completion counts only "
    "from the current holder, within its lease; a completed job stays completed."
)


def _version(distribution: str | None) -> str:
    if not distribution:
        return "unknown"
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _home(distribution: str | None) -> str:
    """The library's home page, from its package metadata (empty when it names none)."""
    if not distribution:
        return ""
    try:
        meta = importlib.metadata.metadata(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""
    for value in meta.get_all("Project-URL") or []:
        label, _, url = value.partition(",")
        if label.strip().lower() in ("source", "repository", "homepage", "home", "github"):
            return url.strip()
    return str(meta["Home-page"] or "") if "Home-page" in meta else ""


def database_version() -> str:
    """The database the replay ran on, with its version."""
    host = db.current()
    if isinstance(host, db.PostgresHost):
        from takeover._internal.db import postgres

        try:
            with postgres.connect(host.admin_url) as conn:
                version = conn.execute("SHOW server_version").fetchone()[0]
        except Exception:  # noqa: BLE001 - the report still says which database
            version = "(version unknown)"
        return f"PostgreSQL {version}"
    if isinstance(host, db.RedisHost):
        from takeover._internal.db import redis

        try:
            version = redis.connect(host.url).info("server")["redis_version"]
        except Exception:  # noqa: BLE001 - the report still says which database
            version = "(version unknown)"
        return f"Redis {version}"
    return f"SQLite {sqlite3.sqlite_version} (Python's sqlite3 module)"


class Vocabulary:
    """The library's names for the contract's calls and states (the adapter's hook), or the contract's."""

    def __init__(self, factory: Any) -> None:
        self.library: str | None = getattr(factory, "library", None)
        # An ``exec:`` adapter's library is no Python distribution: its hello names the version (and home).
        self.version: str | None = getattr(factory, "library_version", None)
        self.home: str | None = getattr(factory, "library_home", None)
        self.calls: dict[str, str] = dict(getattr(factory, "library_calls", None) or {})
        self.states: dict[str, str] = dict(getattr(factory, "library_states", None) or {})

    @property
    def named(self) -> bool:
        return bool(self.calls)

    def call(self, spec: dict[str, Any], lease: float) -> str:
        kind = spec["step"]
        key = f"{kind}:{spec['outcome']}" if kind in ("finish", "resolve") else kind
        own = self.calls.get(key) or self.calls.get(kind)
        lease_s = f"{float(spec.get('lease', lease)):g}"
        contract = {
            "register": "enqueue the job",
            "claim": f"ask for a job, lease {lease_s} s",
            "finish": f"complete the job as {spec.get('outcome')}",
            "extend": f"extend the lease by {lease_s} s",
            "resolve": f"settle the failed job as {spec.get('outcome')}",
            "exit_and_reopen": "the worker process exits; the queue is opened again",
            "external_action": "the worker performs the job's side effect",
        }.get(kind, kind)
        return f"{contract}: {own.replace('{lease}', lease_s)}" if own else contract

    def state(self, state: Any) -> str:
        if state is None:
            return "-"
        own = self.states.get(str(state))
        return f"{own} ({state})" if own else str(state)


def _who(spec: dict[str, Any]) -> str:
    kind = spec["step"]
    if kind == "register":
        return "producer"
    if kind == "resolve":
        return "operator"
    actor = spec.get("actor")
    holder = f" (hand-out {spec['with_generation']})" if "with_generation" in spec else ""
    return f"worker {actor}{holder}" if actor else f"a worker{holder}"


def _answer(kind: str, value: Any) -> str:
    if kind == "claim":
        return "nothing" if value is None else f"the job, hand-out {value}"
    if kind in ("finish", "resolve"):
        return {True: "accepted", False: "refused"}.get(value, repr(value))
    if kind == "extend":
        return "refused" if value is None else f"lease until t={value:g}"
    return "-" if value is None else str(value)


def _row(step: StepResult, words: Vocabulary, lease: float) -> str:
    spec, obs = step.spec, step.observed
    kind = spec["step"]
    got = f"{_answer(kind, obs.get('returns'))}; {words.state(obs.get('state'))}"
    want = f"{_answer(kind, spec.get('returns'))}; {words.state(spec.get('state'))}"
    if obs.get("raised") is not None or step.errors:
        got = "raised: " + "; ".join(step.errors or [str(obs.get("raised"))])
    mark = "**differs**" if not step.ok else "same"
    cells = [str(step.index), f"{float(spec['t']):g}", _who(spec), words.call(spec, lease), got, want, mark]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _departure(result: ReplayedScenario, lease: float) -> tuple[str, int, str] | None:
    """The promise this scenario was shrunk for (its id names it, as ``takeover replay`` writes it),
    the step where it first breaks, and the replay's words for it; the first departure otherwise."""
    outcome = judge(result, lease)
    if not outcome.departures:
        return None
    own = str(result.spec["id"]).rsplit("-", 1)[0] if str(result.spec["id"]) not in PROMISES else result.spec["id"]
    hit = outcome.first(own) if own in PROMISES else None
    if hit is not None:
        return own, hit.index, hit.what
    first = outcome.departures[0]
    return next((i for i in first.invariants if i != SPEC), first.invariants[0]), first.index, first.what


# The replay's words for a departure, in the words of the report (no generations, claims or snapshots).
_PLAIN = (
    (re.compile(r"\bfinish of generation (\d+)"), r"the completion by hand-out \1"),
    (re.compile(r"\bgeneration (\d+) was claimed"), r"hand-out \1 was made"),
    (re.compile(r"\bno claim was given that generation"), "the job was never handed out that often"),
    (re.compile(r"\bgeneration (\d+)'s"), r"hand-out \1's"),
    (re.compile(r"\bat generation (\d+)"), r"after hand-out \1"),
    (re.compile(r"\bgeneration (\d+)"), r"hand-out \1"),
    (re.compile(r"\bsnapshot shows\b"), "the stored state is"),
    (re.compile(r"\bno accepted finish explains it"), "no accepted completion explains it"),
    (re.compile(r"\bthe last was\b"), "the last accepted was"),
    (re.compile(r"\bclaim at\b"), "hand-out at"),
    (re.compile(r"\bthe task\b"), "the job"),
)


def plain(what: str) -> str:
    for pattern, words in _PLAIN:
        what = pattern.sub(words, what)
    return what


def _embedded(raw: dict[str, Any]) -> str:
    """The scenario file as the report carries it: what runs, one step a line, without the replay's notes."""
    steps = []
    out = {k: v for k, v in raw.items() if k not in ("source", "scenarios")}
    for sc in raw["scenarios"]:
        body = {k: v for k, v in sc.items() if k not in ("heading", "steps")}
        lines = [json.dumps({k: v for k, v in st.items() if k != "why"}, ensure_ascii=False) for st in sc["steps"]]
        steps.append((body, lines))
    head = json.dumps(out, ensure_ascii=False)[:-1]
    parts = []
    for body, lines in steps:
        inner = json.dumps(body, ensure_ascii=False)[:-1]
        parts.append("  " + inner + ', "steps": [\n    ' + ",\n    ".join(lines) + "\n  ]}")
    return head + ', "scenarios": [\n' + ",\n".join(parts) + "\n]}"


def issue_markdown(queue: str, scenario_file: Path, run_dir: Path | None = None) -> str:
    """The bug report for every scenario of ``scenario_file`` (as ``takeover replay`` writes it), each
    replayed once more on ``queue`` in this process (on the database :func:`takeover._internal.db.current` serves)."""
    raw = store.read_json(scenario_file, "a scenario file")
    doc = validate_scenarios(raw, str(scenario_file))
    factory = load_queue_factory(queue)
    results = run_scenarios(queue, doc=doc)
    words = Vocabulary(factory)  # after the replay: an exec: adapter names its library in its hello
    name = words.library or queue
    version = words.version or _version(words.library)
    named = f"{name} {version}" if words.library else f"`{queue}`"
    sections: list[tuple[str, list[str]]] = []
    for result in results:
        lease = float(result.spec.get("lease_seconds", doc["lease_seconds"]))
        found = _departure(result, lease)
        if found is None:
            continue
        key, index, what = found
        wrong, rule = PROMISES.get(key, PROMISES[SPEC])
        body = [
            f"Lease (visibility timeout): {lease:g} s. Times are seconds on a clock the reproduction sets for every "
            "call; all calls run one after another in one process, on one job, on a fresh database.",
            "",
            f"| step | t | who | call ({named}) | answered; state after | a correct queue answers; state | |",
            "|---|---|---|---|---|---|---|",
            *(_row(s, words, lease) for s in result.steps if not s.skipped),
            "",
            f"**Expected** (step {index}): {rule}",
            "",
            f"**Actual** (step {index}): {plain(what)}.",
        ]
        sections.append((f"{wrong} ({key})", body))
    if not sections:
        return ""
    home = words.home or _home(words.library)
    title = sections[0][0] if len(sections) == 1 else f"{len(sections)} departures from the lease rules"
    command = f"takeover scenarios --file {scenario_file.name} --queue {shlex.quote(queue)}"
    host = db.current()
    if host.kind in (db.POSTGRES, db.REDIS):
        command += f" --db {host.kind}"
    lines = [
        f"# {named}: {title}",
        "",
        f"- **Library**: {named}" + (f" ({home})" if home else "") + ("" if words.library else
                                                                     " (the adapter names no library)"),
        f"- **Database**: {database_version()}",
        f"- **Python**: {platform.python_version()} on {platform.system()}",
        f"- **Found with**: takeover {__version__}, a harness that runs lease-based queues with real worker "
        "processes, kills, pauses and lost replies, and checks every answer against the lease rules; the "
        f"failing run was shrunk to the fewest calls that still show it"
        + (f" (run `{run_dir.name}`)" if run_dir is not None else "") + ".",
        "",
        RULES,
        "",
    ]
    if not words.named:
        lines += ["(The adapter names no calls of the library: the steps say what was asked, in the lease "
                  "rules' words.)", ""]
    for heading, body in sections:
        lines += [f"## {heading[0].upper()}{heading[1:]}", "", *body, ""]
    extra = (f"{name}=={version}" if words.library and not words.version
             and version not in ("unknown", "not installed") else "")
    setup = ([f"In a clone of takeover's repository, after `make` (its `make js` installs {named}, pinned in "
              "adapters/js/package-lock.json, and the adapter the command names):"] if words.version else
             ["In a fresh virtual environment (Python 3.11 or later):"])
    pip = "pip install /path/to/takeover" + (f" '{extra}'" if extra else "") + "   # a clone of takeover's repository"
    install = [] if words.version else [pip]
    lines += [
        "## Reproduce",
        "",
        *setup,
        "",
        "```sh",
        *install,
        f"cat > {scenario_file.name} <<'EOF'",
        _embedded(raw),
        "EOF",
        f"{command}   # exits 1 and marks the step that differs",
        "```",
        "",
        "The file above is the whole reproduction: each step's `t`, `actor` and call, and what a correct queue "
        "answers (`returns`, `state`). "
        + (f"takeover starts a private {db.NAMES[host.kind]} server for it and removes it afterwards."
           if host.kind in (db.POSTGRES, db.REDIS) else "It runs on a temporary SQLite file."),
        "",
    ]
    return "\n".join(lines)


def write_issue(queue: str, scenario_file: Path, out: Path, run_dir: Path | None = None) -> Path | None:
    """Write the report to ``out``; None (and nothing written) when no scenario departs any more."""
    text = issue_markdown(queue, scenario_file, run_dir)
    if not text:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
