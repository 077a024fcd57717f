"""The run's database: a SQLite file in the run folder, a fresh PostgreSQL database, or an empty Redis one.

Why a notion of its own: takeover's promises and its checker do not depend on the database, only the
queue does, and the queue is handed "the run's database" by its constructor (takeover.contract). What
that is, is chosen once per command with ``--db``:

- ``sqlite`` (the default): ``queue.sqlite`` in the run folder, exactly as before ``--db`` existed;
- ``postgres``: a private PostgreSQL server that takeover starts for the command and removes afterwards,
  whatever ends the command (takeover._internal.db.server);
- a ``postgresql://`` URL: the user's own server. Every run gets a fresh database there, dropped
  afterwards unless ``--keep-db`` is given;
- ``redis``: a private redis-server started for the command (takeover._internal.db.redis_server); every queue gets
  an empty logical database of it (takeover._internal.db.redis), and every stress run a server of its own, whose
  persistence is the run's and which its faults crash, freeze and power off (takeover._internal.run.redis_site);
- a ``redis://HOST:PORT/N`` URL: database N of the user's own server, which must be empty (refused
  otherwise) and is emptied after each use unless ``--keep-db`` is given.

A command serves its ``--db`` once (:func:`serve`), and everything that opens a queue inside it — the
contract check on a scratch database, each run, each scenario, the diagnosis' confirmation — asks the
host being served for a fresh database (:meth:`Host.database`). A host is found through the module
rather than handed down every call chain because the chains are many (the scenarios alone are reached
from five commands) and the answer is one per command; outside any :func:`serve`, the host is SQLite's.

A password in a URL is used and never written down: ``config.json``, the reproduce line and every
message name the URL without it (:func:`redact`).

The rooms: :mod:`takeover._internal.db.kinds` (what a ``--db`` value is; which kinds a queue takes),
:mod:`takeover._internal.db.hosts` (the host a command serves, and its fresh databases), the clients of a server
(:mod:`takeover._internal.db.postgres`, :mod:`takeover._internal.db.redis`), the private servers
(:mod:`takeover._internal.db.server`, :mod:`takeover._internal.db.redis_server`) and their watchdog
(``db/watchdog.py``). This face hands on the names the rest of takeover uses, so a caller writes ``db.serve(...)``,
``db.current()``, ``db.redact(...)``.
"""

from takeover._internal.db.hosts import (
    Host,
    PostgresHost,
    RedisHost,
    ReusedHost,
    attached,
    check,
    current,
    reused,
    run_database,
    serve,
)
from takeover._internal.db.kinds import (
    DATABASES_ATTR,
    DEFAULT,
    DEFAULT_DATABASES,
    DEFAULT_REDIS_PERSISTENCE,
    FRESH,
    KINDS,
    NAMES,
    ONE_OF,
    PERSISTENCE_WORDS,
    POSTGRES,
    REDIS,
    REDIS_PASSWORD_ENV,
    REDIS_PERSISTENCE,
    REDIS_SCHEMES,
    REDIS_SERVER_ENV,
    SERVER_ENV,
    SQLITE,
    URL_SCHEMES,
    check_keep,
    check_queue_takes,
    db_option_for,
    is_redis_url,
    is_url,
    kind,
    queue_databases,
    redact,
)

__all__ = [
    "DATABASES_ATTR", "DEFAULT", "DEFAULT_DATABASES", "DEFAULT_REDIS_PERSISTENCE", "FRESH", "KINDS", "NAMES",
    "ONE_OF", "PERSISTENCE_WORDS", "POSTGRES", "REDIS", "REDIS_PASSWORD_ENV", "REDIS_PERSISTENCE", "REDIS_SCHEMES",
    "REDIS_SERVER_ENV", "SERVER_ENV", "SQLITE", "URL_SCHEMES", "Host", "PostgresHost", "RedisHost", "ReusedHost",
    "attached", "check", "check_keep", "check_queue_takes", "current", "db_option_for", "is_redis_url", "is_url",
    "kind", "queue_databases", "redact", "reused", "run_database", "serve",
]
