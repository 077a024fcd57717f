"""Automatic failpoints: see every statement a queue sends to its database, and stop before one of them.

Why: a check-then-act bug (a SELECT, a decision in Python, then an UPDATE by id) breaks only when
another process runs between two of the queue's own statements, and a fault that freezes a worker
before or after a whole queue call can never put it there. etcd puts failpoints into its code by
hand (gofail); a queue under test is the user's code, which takeover must not touch. So the
statements are seen from outside: every connection the process opens gets a statement callback
(sqlite3's ``Connection.set_trace_callback``; for psycopg 3 a cursor class whose ``execute`` reports
first, set as the connection's ``cursor_factory``), and the caller says which contract call is
under way (:meth:`StatementHook.call`). A trap armed for "statement k of the next finish call" then
runs an action just before that statement starts: in a stress run, the worker stops itself there.

The hook knows nothing about runs, boards or signals (takeover explore may use it in one process):

    hook = StatementHook()
    undo = hook.patch_connect()          # connections opened from now on are watched
    queue = open_the_queue()
    undo()
    hook.arm("finish", 2, action)        # action(point) before the 2nd statement of the next finish
    with hook.call("finish"):
        queue.finish(...)

What it costs: sqlite3's trace callback itself (the statement's text expanded and handed to Python)
is about 2.5 us a statement, a few per cent of a claim and finish. So the callbacks are on only
while they are needed: for the first LEARN calls of each op (to learn how many statements it
issues: :attr:`StatementHook.counts`, the most one call of that op issued, so a trap can be aimed at
a statement the call really issues) and while a trap is armed. Otherwise the connections have no
callback at all, and a call costs the hook two attribute writes and a dictionary look-up.

``Point.locked``: whether the statement comes while the connection holds SQLite's write lock (a
``BEGIN IMMEDIATE`` or a write seen inside the transaction still open). Nothing can run between
two statements there, and a process stopped there stops every other writer with it, the run's own
coordinator included; so a caller would rather not stop there. Only worked out while a trap is
armed. PostgreSQL locks rows, not the database: statements inside its transactions are never
``locked``. Statements psycopg sends on its own (the ``BEGIN`` of a non-autocommit connection,
``conn.transaction()``'s) go to no cursor and are not seen.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sqlite3
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from typing import Any

# Statements that take SQLite's write lock for the rest of their transaction (checked on upper-cased text).
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")  # hold the write lock while they run, even in autocommit
_LOCKING = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE", *_WRITES)
_ENDING = ("COMMIT", "END", "ROLLBACK")
LEARN = 8  # calls of each op watched whole, to learn how many statements it issues


@dataclass(frozen=True)
class Point:
    """Where a trap sprang: statement ``index`` (1-based) of a call of ``op``, not yet started."""

    op: str
    index: int
    sql: str
    locked: bool


# A trap's action: True when it took this point (the trap is spent), False to try the next statement.
Action = Callable[[Point], bool]


@dataclass
class _Trap:
    op: str
    index: int
    action: Action
    tried: bool = False  # reached in the call under way, and passed over (the action said False)


class StatementHook:
    """Counts the statements of the contract call under way and springs an armed trap.

    One per process; every connection installed on it reports here. Not thread-safe: one call at a
    time, as a worker makes them.
    """

    def __init__(self) -> None:
        self.op = ""  # the contract call under way ("" outside one)
        self.seen = 0  # statements it has issued so far
        self.counts: dict[str, int] = {}  # op -> the most statements one call of it issued
        self.trap: _Trap | None = None
        self.passed: str | None = None  # set when a call ended with its trap reached but not taken
        self.active = True  # the callbacks are on (see LEARN)
        self._calls: dict[str, int] = {}  # op -> calls made while the callbacks were on
        self._connections: list[tuple[Any, Callable[[str], None]]] = []  # sqlite3 ones: their callback
        self._locked = False  # SQLite: the last statement left the write lock taken (while armed)
        self._writing: tuple[Any, str] | None = None  # SQLite: the last statement, when it was a write

    # -- the caller's side -------------------------------------------------------------------------
    def call(self, op: str) -> StatementHook:
        """``with hook.call("finish"): queue.finish(...)``: statements until the end belong to that call."""
        self.op = op
        self.seen = 0
        calls = self._calls.get(op, 0)
        if (self.trap is not None or calls < LEARN) != self.active:
            self._switch(not self.active)
        if self.active:
            self._calls[op] = calls + 1
        return self

    def learned(self, op: str) -> bool:
        """Whether ``op``'s calls have been watched LEARN times: :attr:`counts` then holds what they issue."""
        return self._calls.get(op, 0) >= LEARN

    def idle(self, op: str) -> bool:
        """Whether a call of ``op`` needs no watching now (learned, and no trap armed): the callbacks are then
        off, and the caller may skip :meth:`call` altogether (a worker's hot path does)."""
        if self.trap is not None or self._calls.get(op, 0) < LEARN:
            return False
        if self.active:
            self._switch(False)
        return True

    def _switch(self, on: bool) -> None:
        """Turn the connections' callbacks on or off (sqlite3: set or clear; psycopg's check ``active``)."""
        self.active = on
        for entry in list(self._connections):
            try:
                entry[0].set_trace_callback(entry[1] if on else None)
            except sqlite3.ProgrammingError:  # closed: forget it
                self._connections.remove(entry)

    def __enter__(self) -> StatementHook:
        return self

    def __exit__(self, *exc: object) -> None:
        op, seen = self.op, self.seen
        if seen > self.counts.get(op, 0):
            self.counts[op] = seen
        trap = self.trap
        if trap is not None and trap.tried and trap.op == op:
            self.trap = None
            self.passed = op
        self.op = ""

    def arm(self, op: str, index: int, action: Action) -> None:
        """Run ``action`` before statement ``index`` (1-based) of the next call of ``op`` that reaches it.
        If the action passes (returns False), it is offered the following statements of that call;
        a call that ends with none taken disarms the trap and sets :attr:`passed`."""
        self.trap = _Trap(op, max(1, index), action)
        self.passed = None
        self._locked = False
        self._writing = None

    def disarm(self) -> None:
        self.trap = None

    # -- the statement callback ---------------------------------------------------------------------
    def statement(self, sql: str, conn: Any = None) -> None:
        """One statement about to start (what the callbacks :meth:`install` sets do, inlined)."""
        self.seen += 1
        if self.trap is not None:
            self._spring(sql, conn)

    def _spring(self, sql: str, conn: Any) -> None:
        trap = self.trap
        assert trap is not None
        locked = self._lock_state(sql, conn)
        if trap.op != self.op or self.seen < trap.index:
            return
        trap.tried = True
        if trap.action(Point(self.op, self.seen, sql, locked)):
            self.trap = None

    def _lock_state(self, sql: str, conn: Any) -> bool:
        """Whether SQLite's write lock is held as this statement starts; then what it will leave.

        A trigger's program is reported too, while the write that fired it runs and holds the lock,
        with the write's own text (Python's sqlite3 expands the statement under way) or SQLite's
        ``-- trigger`` text, and ``in_transaction`` is False there in autocommit mode. So a report
        on the same connection right after a write, with its text or a ``--`` one, is inside that
        write: locked. (A write repeated word for word right after itself is taken for one too: a
        point passed over, never a process stopped under the lock.)"""
        if not isinstance(conn, sqlite3.Connection):
            return False
        head = sql.lstrip()[:16].upper()
        last = self._writing
        inside = last is not None and last[0] is conn and (sql == last[1] or head.startswith("--"))
        held = (self._locked and conn.in_transaction) or inside
        if head.startswith(_ENDING):
            self._locked = False
        else:
            self._locked = held or head.startswith(_LOCKING)
        if not inside:
            self._writing = (conn, sql) if head.startswith(_WRITES) else None
        return held

    # -- connections -------------------------------------------------------------------------------
    def install(self, conn: Any) -> Any:
        """Watch one open connection (sqlite3 or psycopg 3); returns it. Anything else is left as it is."""
        # sqlite3 connections take no weak reference; the cycle through the callback is the GC's to break.
        ref: Callable[[], Any] = (lambda: conn) if isinstance(conn, sqlite3.Connection) else weakref.ref(conn)
        hook = self

        def on_statement(sql: str) -> None:  # every statement while the callbacks are on
            if hook.active:
                hook.seen += 1
                if hook.trap is not None:
                    hook._spring(sql, ref())

        if isinstance(conn, sqlite3.Connection):
            self._connections.append((conn, on_statement))
            conn.set_trace_callback(on_statement if self.active else None)
        elif hasattr(conn, "cursor_factory") and hasattr(conn, "pgconn"):
            conn.cursor_factory = _traced_cursor(conn.cursor_factory, on_statement)
        return conn

    def patch_connect(self) -> Callable[[], None]:
        """Make ``sqlite3.connect`` and psycopg's ``connect`` install every connection they open on
        this hook; returns the function that puts them back."""
        undo: list[Callable[[], None]] = []

        def wrap(owner: Any, name: str) -> None:
            original = owner.__dict__[name]
            fn = original.__func__ if isinstance(original, classmethod) else original

            def connect(*args: Any, **kwargs: Any) -> Any:
                return self.install(fn(*args, **kwargs))

            setattr(owner, name, classmethod(connect) if isinstance(original, classmethod) else connect)
            undo.append(lambda: setattr(owner, name, original))

        def wrap_psycopg(psycopg: Any) -> None:
            if "connect" in psycopg.__dict__:  # psycopg.connect: Connection.connect, bound at import
                original = psycopg.connect
                psycopg.connect = lambda *a, **kw: self.install(original(*a, **kw))
                undo.append(lambda: setattr(psycopg, "connect", original))
            wrap(psycopg.Connection, "connect")

        import sqlite3.dbapi2

        for module in (sqlite3, sqlite3.dbapi2):
            wrap(module, "connect")
        # psycopg takes about 0.1 s of CPU to import: a worker of a SQLite or Redis run, which never uses it,
        # does not import it here; a queue that imports it while watched gets it patched as it is imported.
        if "psycopg" in sys.modules:
            wrap_psycopg(sys.modules["psycopg"])
        else:
            finder = _OnImport("psycopg", wrap_psycopg)
            sys.meta_path.insert(0, finder)
            undo.append(finder.remove)

        def restore() -> None:
            while undo:
                undo.pop()()

        return restore

    @contextmanager
    def watching(self) -> Iterator[StatementHook]:
        """``with hook.watching(): queue = open_the_queue()``: :meth:`patch_connect` for a block."""
        undo = self.patch_connect()
        try:
            yield self
        finally:
            undo()


class _OnImport(importlib.abc.MetaPathFinder):
    """Calls ``then(module)`` right after module ``name`` is first imported (by the finders after this one),
    once; :meth:`remove` takes it off ``sys.meta_path`` whether or not that happened."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        self.remove()  # the spec below comes from the other finders; one import, one call of ``then``
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then

        def exec_module(module: Any) -> None:
            run(module)
            then(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this import's loader only
        return spec


def _traced_cursor(base: Any, on_statement: Callable[[str], None]) -> type:
    """A subclass of psycopg's cursor class ``base`` that reports each statement before running it."""

    def text(query: Any, cursor: Any) -> str:
        if isinstance(query, str):
            return query
        if isinstance(query, bytes):
            return query.decode(errors="replace")
        try:
            return str(query.as_string(cursor))
        except Exception:  # noqa: BLE001 - a statement the hook cannot render is still a statement
            return repr(query)

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        on_statement(text(query, self))
        return base.execute(self, query, *args, **kwargs)

    def executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        on_statement(text(query, self))
        return base.executemany(self, query, *args, **kwargs)

    return type(f"Traced{base.__name__}", (base,), {"execute": execute, "executemany": executemany})
