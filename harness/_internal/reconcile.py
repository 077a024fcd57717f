"""Reconciliation of ``uncertain`` tasks: ask the external service whether the action happened.

Why: the spec leaves ``uncertain`` terminal, so a task whose reply was lost stays unknown forever,
although the service knows the truth. The worker sends a stable idempotency key per task (the task
id), so the service can answer "did an action with this key happen?" by key, whatever remedy ran.
A task whose action happened is resolved to ``done``; one whose action never happened is put back
to ``pending`` so a retry performs it exactly once. The queue does the state change through its
optional ``resolve`` method (fenced by generation: only an ``uncertain`` task of that generation
moves), and every call is recorded in the history as a ``resolve`` operation, so the checker
judges resolved states like any other.

Where the answer comes from: the running service over its protocol (``{"op": "lookup"}``) when a
port is given, otherwise ``ledger.sqlite`` read through :meth:`takeover._internal.run.ledger.Ledger.lookup` —
the same record the service commits before it replies, so both answers are the same truth.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import answers, store
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.run.ledger import Ledger
from takeover.contract import REFERENCE_QUEUE, has_extension, open_queue, validate_snapshot
from takeover.errors import ContractError, UsageError

RECONCILER_PROCESS = 0  # the coordinator's role: it writes after the run, never concurrently with it

Lookup = Callable[[str], bool]


@dataclass
class Resolved:
    task: str
    gen: int
    happened: bool | None  # what the service said; None = it could not answer
    resolution: str | None  # done | pending | None (not attempted)
    accepted: bool | None  # what resolve() returned; None = not attempted or raised
    error: str | None = None


@dataclass
class ReconcileResult:
    run_dir: str
    source: str
    supported: bool
    uncertain: int = 0
    done: int = 0
    pending: int = 0
    rejected: int = 0
    errors: int = 0
    tasks: list[Resolved] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tasks"] = [asdict(t) for t in self.tasks]
        return data


def ledger_lookup(path: Path) -> tuple[Lookup, Callable[[], None]]:
    """Answer from ``ledger.sqlite``: the service's committed record."""
    if not path.is_file():
        raise UsageError(f"{path}: no ledger ({store.LEDGER_FILE}) in the run folder; nothing to reconcile "
                         "against")
    _check_ledger(path)
    try:
        ledger = Ledger(str(path))
    except sqlite3.Error as exc:
        raise UsageError(f"{path}: cannot open the ledger ({exc})") from None
    return ledger.lookup, ledger.close


def _check_ledger(path: Path) -> None:
    """Refuse a file that is not a service ledger, read-only, before anything is resolved.

    Why: ``Ledger`` creates its schema when it is missing, so an empty or foreign SQLite file would
    answer "never happened" for every key and send every uncertain task back to ``pending`` -- a
    retry that repeats actions which did happen. A ledger with no ``actions`` table cannot answer.
    """
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'actions'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UsageError(f"{path}: not a readable ledger ({exc})") from None
    if found is None:
        raise UsageError(f"{path}: not a service ledger (no actions table); nothing to reconcile against")


def service_lookup(port: int, timeout: float = 2.0) -> tuple[Lookup, Callable[[], None]]:
    """Answer from the running service over its line protocol.

    The protocol's replies do not name their key, so a connection on which one lookup failed (a
    timeout, a garbled line) is dropped: its late reply would otherwise be read as the answer to
    the next task's question and resolve that task the wrong way. The next lookup reconnects.
    """

    def connect() -> tuple[socket.socket, Any]:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        except OSError as exc:
            raise UsageError(f"cannot reach the service on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        sock.settimeout(timeout)
        return sock, sock.makefile("rb")

    conn: list[tuple[socket.socket, Any]] = [connect()]  # fails fast: a wrong port is bad input

    def close() -> None:
        while conn:
            sock, reader = conn.pop()
            reader.close()
            sock.close()

    def lookup(key: str) -> bool:
        if not conn:
            conn.append(connect())
        sock, reader = conn[0]
        try:
            sock.sendall((json.dumps({"op": "lookup", "key": key}) + "\n").encode())
            line = reader.readline()
            if not line:
                raise ConnectionError("service closed the connection")
            reply = json.loads(line)
            if reply.get("reply") != "ok" or not isinstance(reply.get("performed"), bool):
                raise ConnectionError(f"service cannot answer lookups: {reply}")
            return reply["performed"]
        except BaseException:
            close()  # never read another task's answer from this stream
            raise

    return lookup, close


def _load_config(run_dir: Path) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run folder")
    if not (run_dir / store.CONFIG_FILE).is_file():
        raise UsageError(f"{run_dir}: not a run folder (no {store.CONFIG_FILE})")
    return store.read_config(run_dir)


def reconcile_run(run_dir: str | Path, *, port: int | None = None, database: str | None = None) -> ReconcileResult:
    """Resolve every ``uncertain`` task of a stored run; record, re-snapshot, write reconcile.json.

    ``database`` is the run's database while it still exists (``takeover stress --reconcile`` on
    PostgreSQL); by default the SQLite file in the run folder."""
    run_dir = Path(run_dir)
    config = _load_config(run_dir)
    spec = str(config.get("queue") or REFERENCE_QUEUE)
    if database is None and config.get("db", "sqlite") != "sqlite":
        raise UsageError(f"{run_dir}: the run's queue was in a PostgreSQL database ({config['db']}), dropped when "
                         "the run ended: reconcile it during the run with takeover stress --reconcile")
    if database is None and not (run_dir / store.QUEUE_FILE).is_file():
        raise UsageError(f"{run_dir}: no {store.QUEUE_FILE} in the run folder")
    lookup, close_lookup = service_lookup(port) if port else ledger_lookup(run_dir / store.LEDGER_FILE)
    source = f"service 127.0.0.1:{port}" if port else store.LEDGER_FILE
    try:
        try:
            queue = open_queue(spec, database or str(run_dir / store.QUEUE_FILE))
        except ContractError as exc:
            raise UsageError(str(exc)) from None
        try:
            return _reconcile(run_dir, queue, spec, lookup, source)
        finally:
            queue.close()
    finally:
        close_lookup()


def _reconcile(run_dir: Path, queue: Any, spec: str, lookup: Lookup, source: str) -> ReconcileResult:
    rows = validate_snapshot(queue.snapshot(), spec)
    uncertain = [(r[0], r[2]) for r in rows if r[1] == "uncertain"]
    result = ReconcileResult(str(run_dir), source, has_extension(queue, "resolve"), uncertain=len(uncertain))
    if not result.supported:
        result.tasks = [Resolved(t, g, None, None, None, "the queue has no resolve()") for t, g in uncertain]
        _write_record(run_dir, result)
        return result
    if not uncertain:  # nothing to resolve: the history, snapshot and earlier record stay as they are
        _write_record(run_dir, result)
        return result
    hist = HistoryWriter(run_dir / store.HISTORY_FILE, RECONCILER_PROCESS)
    try:
        for task, gen in uncertain:
            result.tasks.append(_resolve_one(queue, hist, lookup, task, gen, spec))
    finally:
        hist.close()
    for item in result.tasks:
        if item.accepted:
            if item.resolution == "done":
                result.done += 1
            else:
                result.pending += 1
        elif item.accepted is False:
            result.rejected += 1
        else:
            result.errors += 1
    # The snapshot must come after every recorded operation (docs/history.md): take it again.
    try:
        store.write_snapshot(run_dir, validate_snapshot(queue.snapshot(), spec))
    except Exception as exc:  # noqa: BLE001 - keep the record honest: say the snapshot failed
        store.write_snapshot(run_dir, None, f"{type(exc).__name__}: {exc}")
    _write_record(run_dir, result)
    return result


COUNTS = ("uncertain", "done", "pending", "rejected", "errors")


def _write_record(run_dir: Path, result: ReconcileResult) -> None:
    """Add this pass to ``reconcile.json``, which keeps every pass's record.

    Why cumulative: reconciling twice is normal (again after a retry left tasks uncertain, or by
    mistake); overwriting would replace "2 resolved to done" with "nothing to do" and lose what was
    resolved, while the history still holds those resolves. The top-level counts and ``tasks`` are
    the sum of all passes; ``passes`` lists each one.
    """
    passes: list[dict[str, Any]] = []
    tasks: list[dict[str, Any]] = []
    old = store.read_reconcile_record(run_dir)  # None: no (or an unreadable) earlier record, this pass starts it
    if old is not None:
        passes = [p for p in old.get("passes") or [_pass_of(old)] if isinstance(p, dict)]
        tasks = [t for t in old.get("tasks") or [] if isinstance(t, dict)]
    this = result.to_json()
    passes.append(_pass_of(this) | {"time": time.time()})
    # A task left uncertain (no resolve(), an unanswered lookup) is asked again by the next pass:
    # it counts once, with its latest outcome. done / pending / rejected happen once per task.
    by_task = {(t.get("task"), t.get("gen")): t for t in tasks + this["tasks"]}
    latest = list(by_task.values())
    record = {"run_dir": this["run_dir"], "source": this["source"], "supported": this["supported"],
              "uncertain": len(latest),
              "done": sum(1 for t in latest if t.get("accepted") and t.get("resolution") == "done"),
              "pending": sum(1 for t in latest if t.get("accepted") and t.get("resolution") == "pending"),
              "rejected": sum(1 for t in latest if t.get("accepted") is False),
              "errors": sum(1 for t in latest if t.get("accepted") is None),
              "tasks": latest, "passes": passes}  # fmt: skip
    store.write_reconcile_record(run_dir, record)


def _pass_of(data: dict[str, Any]) -> dict[str, Any]:
    return {"source": data.get("source"), **{name: data.get(name, 0) for name in COUNTS}}


def _resolve_one(queue: Any, hist: HistoryWriter, lookup: Lookup, task: str, gen: int, spec: str) -> Resolved:
    try:
        happened = bool(lookup(task))
    except Exception as exc:  # noqa: BLE001 - an unanswered question leaves the task uncertain
        return Resolved(task, gen, None, None, None, f"lookup failed: {type(exc).__name__}: {exc}")
    resolution = "done" if happened else "pending"
    now = time.time()
    hist.write("invoke", "resolve", task=task, gen=gen, value=resolution, now=now)
    try:
        accepted = answers.resolve(queue.resolve(task, gen, resolution, now), spec)
    except BaseException as exc:  # noqa: BLE001 - unknown whether it took effect: info, like any queue call
        if isinstance(exc, KeyboardInterrupt):  # on this thread a Ctrl-C: the command's to handle
            raise
        text = error_text(exc)
        hist.write("info", "resolve", task=task, gen=gen, value=resolution, error=text)
        if isinstance(exc, answers.MalformedAnswer) or not isinstance(exc, Exception):
            what = exc.what if isinstance(exc, answers.MalformedAnswer) else answers.QueueEscaped("resolve", exc).what
            hist.write("info", answers.ANSWER_RECORD, task=task, gen=gen, value="resolve", detail=what)
        return Resolved(task, gen, happened, resolution, None, text)
    if accepted is True:
        hist.write("ok", "resolve", task=task, gen=gen, value=resolution)
    else:
        hist.write("fail", "resolve", task=task, gen=gen, value=resolution, error="rejected")
    return Resolved(task, gen, happened, resolution, accepted is True)


def describe(result: ReconcileResult) -> str:
    """The lines a person reads after reconciling."""
    if not result.supported:
        return (f"reconcile: {result.uncertain} uncertain task(s) left as they are: the queue has no optional "
                f"resolve() method\n")
    if not result.uncertain:
        return (f"reconcile: no uncertain task in {result.run_dir}; nothing resolved "
                f"(earlier passes: {store.RECONCILE_FILE})\n")
    lines = [f"reconcile: {result.uncertain} uncertain task(s) asked of {result.source}: "
             f"{result.done} -> done (action happened), {result.pending} -> pending (never happened; retry), "
             f"{result.rejected} rejected by the queue, {result.errors} unanswered"]
    for item in result.tasks:
        if item.error or item.accepted is False:
            lines.append(f"  {item.task} gen {item.gen}: {item.error or 'resolve() returned False'}")
    return "\n".join(lines[:21]) + "\n"
