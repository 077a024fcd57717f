"""What the Redis adapters share: refusing a database that is not Redis, in the same one line, and connecting.

Why its own module: every Redis adapter (RQ, Celery, Huey, Dramatiq, SAQ, taskiq-redis) takes ``--db``
as given and must refuse a SQLite path or a ``postgres://`` URL before its library fails on it deep in a
call; the refusal is a public message (the system tests match it), so it is written once. redis-py is
takeover's own dependency, so importing this module needs no adapter's extra.
"""

from __future__ import annotations

import redis

from takeover.errors import ContractError

REDIS_URLS = ("redis://", "rediss://")
"""The URL schemes every Redis adapter takes (``--db redis`` gives ``redis://``)."""


def connect(name: str, db: str, schemes: tuple[str, ...] = REDIS_URLS) -> redis.Redis:
    """A redis-py client on ``db``; a one-line ContractError naming the adapter ``name`` when ``db`` does not
    start with one of ``schemes`` (an adapter whose library also takes ``unix://`` sockets adds it)."""
    if not db.startswith(schemes):
        raise ContractError(f"{name} needs a Redis database (--db redis or a redis:// URL), got {db!r}")
    return redis.Redis.from_url(db)
