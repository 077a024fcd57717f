"""Redis URLs and databases: reach a server, hand out an empty logical database, empty it again.

Why logical databases: a Redis server has numbered databases (``redis://HOST:PORT/N``), each an empty
keyspace of its own, and ``FLUSHDB`` empties one in microseconds. A command's private server
(takeover._internal.db.redis_server) is started with :data:`DATABASES` of them, and every queue opened inside the
command (the contract check, each scenario, each explore example) gets one that nobody else uses,
emptied before and after. Starting a server per queue instead costs 0.1-0.3 s on this machine (a
scenario takes milliseconds); a stress run, whose faults stop and freeze the server, gets a server of
its own all the same (takeover._internal.run.redis_site).

Who uses which number is kept in the server itself, in database 0, which is never handed out: a
``SET NX`` of ``takeover:db:N`` holding the taker's pid, so two processes of one command (a selftest's
stress runs, each a process of its own) never get the same database. A taker killed before it gave its
number back leaves its key; the next taker finds its pid dead and takes the number over.

Every failure here is the user's server or URL (unreachable, a database in use): it reaches the user as
one line naming the URL without its password, never as a traceback.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from takeover._internal.db.kinds import redact
from takeover.errors import UsageError

SCHEMES = ("redis",)  # rediss:// (TLS) and unix:// are redis-py's too, but a private server needs neither
DATABASES = 256  # logical databases of a private server (Redis' default is 16): 0 is takeover's bookkeeping
CONNECT_TIMEOUT = 10  # seconds: a server that does not answer is named, not waited for forever
CLAIM_KEY = "takeover:db:"  # + N, in database 0 of a private server: the pid using database N


def connect(url: str, **kwargs: Any) -> Any:
    """A redis-py client of ``url`` (redis is imported here, so a SQLite run never pays for it)."""
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT, **kwargs)


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def with_database(url: str, number: int) -> str:
    """``url`` naming logical database ``number`` instead of its own (host, port, credentials kept)."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{number}"))


def database_of(url: str) -> int:
    """The logical database a URL names (``/N``, or redis-py's ``?db=N``); 0 when it names none."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if path:
        return int(path)
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if name == "db" and value:
            return int(value)
    return 0


def check_url(url: str) -> None:
    """A ``redis://`` URL redis-py can use, or a UsageError in one line."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
        database_of(url)
    except ValueError as exc:
        raise UsageError(f"--db: {redact(url)!r} is not a valid redis:// URL ({exc})") from None
    if parts.fragment:
        raise UsageError(f"--db: {redact(url)!r} has a #fragment; a redis:// URL has none")
    if not parts.hostname:
        raise UsageError(f"--db: {redact(url)!r} names no host (redis://HOST:PORT/N)")


def _client(url: str, what: str) -> Any:
    client = connect(url)
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server is the user's to fix
        client.close()
        raise UsageError(f"--db: cannot {what} on {redact(url)}: {one_line(exc)}") from None
    return client


def check_empty(url: str) -> None:
    """The user's database must hold nothing: takeover empties it afterwards, and a queue's keys must not
    meet someone else's. Refused in one line otherwise (exit 2), nothing touched."""
    client = _client(url, "connect")
    try:
        keys = client.dbsize()
    finally:
        client.close()
    if keys:
        raise UsageError(f"--db: database {database_of(url)} of {redact(url)} is not empty ({keys} keys): "
                         "takeover empties the database it uses, so it takes only an empty one (name another, "
                         "e.g. redis://HOST:PORT/N with an empty N)")  # fmt: skip


def flush(url: str) -> None:
    """Empty the database at ``url`` (``FLUSHDB``): before a queue gets it, and after."""
    client = _client(url, "empty a database")
    try:
        client.flushdb()
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"--db: cannot empty database {redact(url)}: {one_line(exc)}") from None
    finally:
        client.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# Compare and set: two takers that both found the same dead holder never both get its database.
_TAKE_OVER = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0"


def take_database(server_url: str) -> int:
    """A logical database of a private server that no other taker holds, marked as ours (database 0)."""
    client = _client(with_database(server_url, 0), "take a database")
    try:
        start = int(client.incr(CLAIM_KEY + "next"))
        for i in range(DATABASES - 1):
            number = (start + i) % (DATABASES - 1) + 1
            key = f"{CLAIM_KEY}{number}"
            if client.set(key, os.getpid(), nx=True):
                return number
            holder = client.get(key)
            if holder is not None and not _alive(int(holder)):  # its taker was killed: take it over
                if client.eval(_TAKE_OVER, 1, key, holder, os.getpid()):
                    return number
    finally:
        client.close()
    raise UsageError(f"--db redis: all {DATABASES - 1} databases of the private server are in use")


def give_back(server_url: str, number: int) -> None:
    """Empty database ``number`` and let others take it."""
    flush(with_database(server_url, number))
    client = _client(with_database(server_url, 0), "give a database back")
    try:
        client.delete(f"{CLAIM_KEY}{number}")
    finally:
        client.close()
