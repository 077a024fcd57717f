"""What a ``--db`` value is (its kind, its URL without a password), and which kinds a queue takes.

Why apart from the hosts (:mod:`takeover._internal.db.hosts`): the clients of a user's servers
(:mod:`takeover._internal.db.postgres`, :mod:`takeover._internal.db.redis`) and the private servers name a database the
same way the hosts do, and stand below them; these words stand below all of them.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

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
# How a run's private redis-server keeps its data (--redis-persistence; takeover._internal.db.redis_server): an AOF
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
