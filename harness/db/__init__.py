"""The run's database: a SQLite file in the run folder, a fresh PostgreSQL database, or an empty Redis one.

Why a notion of its own: takeover's promises and its checker do not depend on the database, only the
queue does, and the queue is handed "the run's database" by its constructor (takeover.contract). What
that is, is chosen once per command with ``--db``:

- ``sqlite`` (the default): ``queue.sqlite`` in the run folder, exactly as before ``--db`` existed;
- ``postgres``: a private PostgreSQL server that takeover starts for the command and removes afterwards,
  whatever ends the command (takeover.db.server);
- a ``postgresql://`` URL: the user's own server. Every run gets a fresh database there, dropped
  afterwards unless ``--keep-db`` is given;
- ``redis``: a private redis-server started for the command (takeover.db.redis_server); every queue gets
  an empty logical database of it (takeover.db.redis), and every stress run a server of its own, whose
  persistence is the run's and which its faults crash, freeze and power off (takeover.run.redis_site);
- a ``redis://HOST:PORT/N`` URL: database N of the user's own server, which must be empty (refused
  otherwise) and is emptied after each use unless ``--keep-db`` is given.

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
from urllib.parse import quote, urlsplit, urlunsplit

from takeover.errors import ContractError, UsageError

SQLITE = "sqlite"
POSTGRES = "postgres"
REDIS = "redis"
KINDS = (SQLITE, POSTGRES, REDIS)
# What each use of a queue gets, in the words every command prints ("each replayed alone on a fresh ...").
FRESH = {SQLITE: "fresh SQLite file", POSTGRES: "fresh PostgreSQL database", REDIS: "empty Redis database"}
NAMES = {SQLITE: "SQLite", POSTGRES: "PostgreSQL", REDIS: "Redis"}
URL_SCHEMES = ("postgresql", "postgres")  # libpq takes both spellings
REDIS_SCHEMES = ("redis",)
# How a run's private redis-server keeps its data (--redis-persistence; takeover.db.redis_server): an AOF
# synced before every reply, one synced once a second, or nothing on disk at all.
REDIS_PERSISTENCE = ("always", "everysec", "none")
DEFAULT_REDIS_PERSISTENCE = "always"
PERSISTENCE_WORDS = {"always": "an append-only file synced before every reply",
                     "everysec": "an append-only file synced once a second",
                     "none": "nothing on disk: a restart loses every task"}
DEFAULT = SQLITE

# A queue's factory may say which kinds of database it takes (``databases = ("postgres",)``); one that
# says nothing was written for a SQLite path, as every queue was before PostgreSQL.
DATABASES_ATTR = "databases"
DEFAULT_DATABASES = (SQLITE,)

# The admin URL of a private server started by an outer takeover command: a ``takeover stress`` started
# by ``takeover selftest --db postgres`` uses its parent's server rather than starting one per run.
SERVER_ENV = "TAKEOVER_POSTGRES_SERVER"
REDIS_SERVER_ENV = "TAKEOVER_REDIS_SERVER"  # the same for --db redis: the URL of the parent's private server
REDIS_PASSWORD_ENV = "TAKEOVER_REDIS_PASSWORD"  # a redis:// URL's password, for the commands this one starts
ONE_OF = "sqlite, postgres, redis, a postgresql:// URL or a redis:// URL"


def is_url(value: str) -> bool:
    """A ``postgresql://`` URL (a user's PostgreSQL server)."""
    return value.partition("://")[0] in URL_SCHEMES and "://" in value


def is_redis_url(value: str) -> bool:
    """A ``redis://`` URL (a user's Redis server)."""
    return value.partition("://")[0] in REDIS_SCHEMES and "://" in value


def check(value: Any) -> str:
    """``--db``'s value, or a one-line UsageError naming what is wrong with it."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"--db must be {ONE_OF}, got {value!r}")
    if value in KINDS:
        return value
    if is_redis_url(value):
        from takeover.db.redis import check_url

        check_url(value)
        return value
    if not is_url(value):
        raise UsageError(f"--db must be {ONE_OF}, got {redact(value)!r}")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        raise UsageError(f"--db: {redact(value)!r} is not a valid URL ({exc})") from None
    if parts.fragment:
        raise UsageError(f"--db: {redact(value)!r} has a #fragment; a postgresql:// URL has none")
    return value


def kind(value: str) -> str:
    """``sqlite``, ``postgres`` or ``redis``: what a ``--db`` value, or a queue's database string, is."""
    if value == SQLITE:
        return SQLITE
    if value == REDIS or is_redis_url(value):
        return REDIS
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
    # redis://:secret@host (a password and no user, as Redis before 6 had) becomes redis://host
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[2]}" if user else netloc[2]))


def check_keep(value: str, keep: bool) -> None:
    if keep and value == SQLITE:
        raise UsageError("--keep-db keeps a run's database on a postgresql:// or redis:// server; a SQLite run's "
                         "file stays in its run folder anyway")
    if keep and value in (POSTGRES, REDIS):
        raise UsageError(f"--keep-db needs a {'postgresql' if value == POSTGRES else 'redis'}:// URL: a private "
                         f"server (--db {value}) is removed with its databases when the command ends")


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
        option = db_option_for(takes)
        if getattr(factory, DATABASES_ATTR, None) is None:  # said nothing: a queue for the other kind forgot to
            raise ContractError(f"queue {spec!r} takes only {' or '.join(takes)} databases (it has no "
                                f"{DATABASES_ATTR!r} attribute), not {wanted}: if it takes {wanted}, declare "
                                f"{DATABASES_ATTR} = ({wanted!r},) on it; else run it with {option}")
        raise ContractError(f"queue {spec!r} takes only {' or '.join(takes) or 'no known'} databases "
                            f"(its {DATABASES_ATTR!r}), not {wanted}: run it with {option}")


def db_option_for(takes: tuple[str, ...] | list[str]) -> str:
    """The ``--db`` to run a queue with that takes these kinds (the first of them)."""
    if POSTGRES in takes:
        return "--db postgres or --db postgresql://..."
    if REDIS in takes:
        return "--db redis or --db redis://HOST:PORT/N"
    return "--db sqlite"


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


class RedisHost(Host):
    """A Redis server: each database is an empty logical database of it.

    ``private``: takeover's own server (``--db redis``, or its parent command's): each use takes a database
    number nobody else holds and gives it back emptied (takeover.db.redis.take_database). Otherwise the
    user's URL: the one database it names, emptied after each use unless kept."""

    kind = REDIS

    def __init__(self, url: str, value: str, private: bool, keep: bool = False) -> None:
        self.url = url  # the server's URL (database 0 for a private server), with its password
        self.value = redact(value)
        self.private = private
        self.keep = keep
        self.kept: list[str] = []

    @contextlib.contextmanager
    def database(self, folder: Path, label: str = "run") -> Iterator[str]:
        from takeover.db import redis

        if not self.private:
            redis.check_empty(self.url)
            try:
                yield self.url
            finally:
                if self.keep:
                    self.kept.append(redact(self.url))
                else:
                    _quietly(lambda: redis.flush(self.url), f"could not empty {self.value}")
            return
        number = redis.take_database(self.url)
        try:
            url = redis.with_database(self.url, number)
            redis.flush(url)
            yield url
        finally:
            _quietly(lambda: redis.give_back(self.url, number), f"could not empty database {number} of {self.value}")


def _quietly(fn: Any, what: str) -> None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the run is over and kept: its verdict must not be lost
        print(f"takeover: {what}: {exc}", file=sys.stderr)


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
    if kind(value) == REDIS:
        with _serve_redis(value, keep) as host:
            yield host
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
        yield stack.enter_context(_serving(PostgresHost(admin, value, keep)))


@contextlib.contextmanager
def _serving(host: PostgresHost | RedisHost) -> Iterator[Host]:
    """``host`` is the current one inside; what it kept is said at the end."""
    _active.append(host)
    try:
        yield host
    finally:
        _active.pop()
        for url in host.kept:
            print(f"takeover: kept database {url} (--keep-db)", file=sys.stderr)  # stdout may be --json


@contextlib.contextmanager
def attached(host: Host) -> Iterator[Host]:
    """``host``, served and checked by a parent process (the API's run, takeover.api), the current one
    inside this child: nothing is checked or started again; its server stays the parent's."""
    if isinstance(host, PostgresHost | RedisHost):
        with _serving(host):
            yield host
        return
    _active.append(host)
    try:
        yield host
    finally:
        _active.pop()


@contextlib.contextmanager
def _serve_redis(value: str, keep: bool) -> Iterator[Host]:
    """``--db redis``: a private server (or the parent command's, from REDIS_SERVER_ENV); a URL: the user's
    server, whose database must be empty now (one line, exit 2, nothing touched otherwise)."""
    from takeover.db import redis

    with contextlib.ExitStack() as stack:
        if value == REDIS:
            url = os.environ.get(REDIS_SERVER_ENV)
            if not url:
                from takeover.db.redis_server import NONE, PrivateRedis

                # Scratch databases only (contract checks, scenarios, explore): a run has a server of its own
                # with the run's persistence; here nothing is crashed, so nothing needs to be on disk.
                url = stack.enter_context(PrivateRedis(NONE)).url
                stack.enter_context(_env(REDIS_SERVER_ENV, url))
            host = RedisHost(url, value, private=True)
        else:
            parts = urlsplit(value)
            if parts.password is not None:  # a takeover command this one starts gets the URL without it
                stack.enter_context(_env(REDIS_PASSWORD_ENV, parts.password))
            elif os.environ.get(REDIS_PASSWORD_ENV):  # ... and finds it here
                user = parts.netloc.rpartition("@")[0]
                value = urlunsplit(parts._replace(netloc=f"{quote(user)}:{quote(os.environ[REDIS_PASSWORD_ENV])}@"
                                                         f"{parts.netloc.rpartition('@')[2]}"))  # fmt: skip
            redis.check_empty(value)
            host = RedisHost(value, value, private=False, keep=keep)
        yield stack.enter_context(_serving(host))


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
