"""The run's database: a SQLite file in the run folder, or a fresh PostgreSQL database.

Why a notion of its own: takeover's promises and its checker do not depend on the database, only the
queue does, and the queue is handed "the run's database" by its constructor (takeover.contract). What
that is, is chosen once per command with ``--db``:

- ``sqlite`` (the default): ``queue.sqlite`` in the run folder, exactly as before ``--db`` existed;
- ``postgres``: a private PostgreSQL server that takeover starts for the command and removes afterwards,
  whatever ends the command (takeover.db.server);
- a ``postgresql://`` URL: the user's own server. Every run gets a fresh database there, dropped
  afterwards unless ``--keep-db`` is given.

A command serves its ``--db`` once (:func:`serve`), and everything that opens a queue inside it — the
contract check on a scratch database, each run, each scenario, the diagnosis' confirmation — asks the
host being served for a fresh database (:meth:`Host.database`). A host is found through the module
rather than handed down every call chain because the chains are many (the scenarios alone are reached
from five commands) and the answer is one per command; outside any :func:`serve`, the host is SQLite's.

A password in a URL is used and never written down: ``config.json``, the reproduce line and every
message name the URL without it (:func:`redact`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from takeover.errors import ContractError, UsageError

SQLITE = "sqlite"
POSTGRES = "postgres"
KINDS = (SQLITE, POSTGRES)
URL_SCHEMES = ("postgresql", "postgres")  # libpq takes both spellings
DEFAULT = SQLITE

# A queue's factory may say which kinds of database it takes (``databases = ("postgres",)``); one that
# says nothing was written for a SQLite path, as every queue was before PostgreSQL.
DATABASES_ATTR = "databases"
DEFAULT_DATABASES = (SQLITE,)

# The admin URL of a private server started by an outer takeover command: a ``takeover stress`` started
# by ``takeover selftest --db postgres`` uses its parent's server rather than starting one per run.
SERVER_ENV = "TAKEOVER_POSTGRES_SERVER"


def is_url(value: str) -> bool:
    return value.partition("://")[0] in URL_SCHEMES and "://" in value


def check(value: Any) -> str:
    """``--db``'s value, or a one-line UsageError naming what is wrong with it."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"--db must be sqlite, postgres or a postgresql:// URL, got {value!r}")
    if value in KINDS:
        return value
    if not is_url(value):
        raise UsageError(f"--db must be sqlite, postgres or a postgresql:// URL, got {redact(value)!r}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise UsageError(f"--db: {redact(value)!r} is not a valid URL ({exc})") from None
    if parts.fragment:
        raise UsageError(f"--db: {redact(value)!r} has a #fragment; a postgresql:// URL has none")
    return value


def kind(value: str) -> str:
    """``sqlite`` or ``postgres``: what a ``--db`` value, or a queue's database string, is."""
    if value == SQLITE:
        return SQLITE
    return POSTGRES if value == POSTGRES or is_url(value) else SQLITE


def redact(value: str) -> str:
    """The value without a password: what config.json, the reproduce line and messages show."""
    if "://" not in value:
        return value
    try:
        parts = urlsplit(value)
    except ValueError:
        return value.partition("://")[0] + "://..."
    if parts.password is None:
        return value
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[2]}"))


def check_keep(value: str, keep: bool) -> None:
    if keep and value != POSTGRES and not is_url(value):
        raise UsageError("--keep-db keeps a run's database on a postgresql:// server; a SQLite run's file stays "
                         "in its run folder anyway")
    if keep and value == POSTGRES:
        raise UsageError("--keep-db needs a postgresql:// URL: a private server (--db postgres) is removed with "
                         "its databases when the command ends")


# -- the queue's side: which kinds it takes -----------------------------------------------------------------
def queue_databases(factory: object) -> tuple[str, ...]:
    """The kinds of database a queue factory takes (its ``databases`` attribute; SQLite when it has none)."""
    declared = getattr(factory, DATABASES_ATTR, None)
    if declared is None:
        return DEFAULT_DATABASES
    if isinstance(declared, str):
        declared = (declared,)
    return tuple(k for k in declared if k in KINDS)


def check_queue_takes(spec: str, factory: object, database: str) -> None:
    """A queue that takes only the other kind of database says so here, in one line (exit 2)."""
    wanted = kind(database)
    takes = queue_databases(factory)
    if wanted not in takes:
        option = "--db postgres or --db postgresql://..." if POSTGRES in takes else "--db sqlite"
        raise ContractError(f"queue {spec!r} takes only {' or '.join(takes) or 'no known'} databases "
                            f"(its {DATABASES_ATTR!r}), not {wanted}: run it with {option}")


# -- hosts: where a run's database comes from ---------------------------------------------------------------
def _name(label: str) -> str:
    """A fresh database's name: where it came from, and unique (PostgreSQL names are at most 63 bytes)."""
    safe = re.sub(r"[^a-z0-9_]", "_", label.lower())[:32]
    return f"takeover_{safe}_{uuid.uuid4().hex[:12]}"


class Host:
    """Gives every run (and every scenario) a database of its own."""

    kind = SQLITE
    value = SQLITE  # the --db value served, without a password

    @contextlib.contextmanager
    def database(self, folder: Path, label: str = "run") -> Iterator[str]:
        """The database string a queue's constructor gets: ``folder/queue.sqlite`` here."""
        from takeover.store import QUEUE_FILE

        yield str(Path(folder) / QUEUE_FILE)


class PostgresHost(Host):
    """A PostgreSQL server: each database is created empty, and dropped afterwards unless kept."""

    kind = POSTGRES

    def __init__(self, admin_url: str, value: str, keep: bool = False) -> None:
        self.admin_url = admin_url
        self.value = redact(value)
        self.keep = keep
        self.kept: list[str] = []

    @contextlib.contextmanager
    def database(self, folder: Path, label: str = "run") -> Iterator[str]:
        from takeover.db import postgres

        name = _name(label)
        url = postgres.create_database(self.admin_url, name)
        try:
            yield url
        finally:
            if self.keep:
                self.kept.append(redact(url))
            else:
                try:
                    postgres.drop_database(self.admin_url, name)
                except Exception as exc:  # noqa: BLE001 - the run is over and kept: its verdict must not be lost
                    print(f"takeover: could not drop database {name} on {self.value}: {exc}", file=sys.stderr)


class ReusedHost(Host):
    """One PostgreSQL database handed out again and again, emptied each time (takeover.db.postgres.
    empty_database): for many short-lived queues in one process, one after the other (``takeover
    explore``'s examples), where a database created and dropped for each would cost more than the queue's
    calls."""

    kind = POSTGRES

    def __init__(self, outer: Host, url: str) -> None:
        self.value = outer.value
        self.url = url

    @contextlib.contextmanager
    def database(self, folder: Path, label: str = "run") -> Iterator[str]:
        from takeover.db import postgres

        postgres.empty_database(self.url)
        yield self.url


@contextlib.contextmanager
def reused(folder: Path, label: str) -> Iterator[Host]:
    """Inside, every database asked of a PostgreSQL host is one database of it, emptied before each use
    (and dropped afterwards as any other); a SQLite host is left as it is (a fresh file is cheap)."""
    outer = current()
    if outer.kind != POSTGRES:
        yield outer
        return
    with outer.database(folder, label) as url:
        host = ReusedHost(outer, url)
        _active.append(host)
        try:
            yield host
        finally:
            _active.pop()


_SQLITE_HOST = Host()
_active: list[Host] = []


def current() -> Host:
    """The host of the innermost :func:`serve`; SQLite's outside any."""
    return _active[-1] if _active else _SQLITE_HOST


@contextlib.contextmanager
def serve(value: str, keep: bool = False) -> Iterator[Host]:
    """Serve ``--db`` for the length of a command. A private server is started here and is gone when
    this returns, by any way (takeover.db.server); inside an outer serve of the same value, its host
    is used again (a run inside a sweep, a confirmation inside a run)."""
    check(value)
    check_keep(value, keep)
    outer = current()
    if outer.value == redact(value):
        yield outer
        return
    if value == SQLITE:
        host: Host = _SQLITE_HOST
        _active.append(host)
        try:
            yield host
        finally:
            _active.pop()
        return
    with contextlib.ExitStack() as stack:
        if value == POSTGRES:
            admin = os.environ.get(SERVER_ENV)
            if not admin:
                from takeover.db.server import PrivateServer

                server = stack.enter_context(PrivateServer())
                admin = server.admin_url
                stack.enter_context(_env(SERVER_ENV, admin))
        else:
            from takeover.db import postgres

            admin = value
            password = urlsplit(value).password
            if password is not None and "PGPASSWORD" not in os.environ:
                # A takeover command this one starts gets the URL without it (redact) and finds it here.
                stack.enter_context(_env("PGPASSWORD", password))
            postgres.check_reachable(admin)
        host = PostgresHost(admin, value, keep)
        _active.append(host)
        try:
            yield host
        finally:
            _active.pop()
            for url in host.kept:
                print(f"takeover: kept database {url} (--keep-db)", file=sys.stderr)  # stdout may be --json


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextlib.contextmanager
def run_database(value: str, folder: Path, label: str = "run") -> Iterator[str]:
    """One run's database, served for the run alone when no command serves ``value`` already."""
    with serve(value) as host, host.database(folder, label) as database:
        yield database
