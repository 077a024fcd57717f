"""Where a run's database comes from: the host a command serves (:func:`serve`), which hands every run and
every scenario a fresh database of its own (:meth:`Host.database`), and ``--db``'s value checked.

Why a host found through the module rather than handed down: see :mod:`takeover._internal.db`.
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

from takeover._internal.db import postgres, redis
from takeover._internal.db.kinds import (
    KINDS,
    ONE_OF,
    POSTGRES,
    REDIS,
    REDIS_PASSWORD_ENV,
    REDIS_SERVER_ENV,
    SERVER_ENV,
    SQLITE,
    check_keep,
    is_redis_url,
    is_url,
    kind,
    redact,
)
from takeover._internal.db.redis_server import NONE, PrivateRedis
from takeover._internal.db.server import PrivateServer
from takeover._internal.store import QUEUE_FILE
from takeover.errors import UsageError


def check(value: Any) -> str:
    """``--db``'s value, or a one-line UsageError naming what is wrong with it."""
    if not isinstance(value, str) or not value:
        raise UsageError(f"--db must be {ONE_OF}, got {value!r}")
    if value in KINDS:
        return value
    if is_redis_url(value):
        redis.check_url(value)
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


def database_name(label: str) -> str:
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
        name = database_name(label)
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
    """One PostgreSQL database handed out again and again, emptied each time (takeover._internal.db.postgres.
    empty_database): for many short-lived queues in one process, one after the other (``takeover
    explore``'s examples), where a database created and dropped for each would cost more than the queue's
    calls."""

    kind = POSTGRES

    def __init__(self, outer: Host, url: str) -> None:
        self.value = outer.value
        self.url = url

    @contextlib.contextmanager
    def database(self, folder: Path, label: str = "run") -> Iterator[str]:
        postgres.empty_database(self.url)
        yield self.url


class RedisHost(Host):
    """A Redis server: each database is an empty logical database of it.

    ``private``: takeover's own server (``--db redis``, or its parent command's): each use takes a database
    number nobody else holds and gives it back emptied (takeover._internal.db.redis.take_database). Otherwise the
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
    this returns, by any way (takeover._internal.db.server); inside an outer serve of the same value, its host
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
                server = stack.enter_context(PrivateServer())
                admin = server.admin_url
                stack.enter_context(_env(SERVER_ENV, admin))
        else:
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
    with contextlib.ExitStack() as stack:
        if value == REDIS:
            url = os.environ.get(REDIS_SERVER_ENV)
            if not url:
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
