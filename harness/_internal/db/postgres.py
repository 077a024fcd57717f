"""PostgreSQL URLs and databases: reach a server, create a run's fresh database, drop it again.

Every failure here is the user's server or URL (unreachable, no right to create a database): it
reaches the user as one line naming the URL without its password, never as a traceback.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from takeover._internal.db.kinds import redact
from takeover.errors import UsageError

CONNECT_TIMEOUT = 10  # seconds; libpq's own default waits forever for a server that does not answer
MAINTENANCE_DB = "postgres"


def with_database(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead of its own (host, port, user and query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(name)))


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def socket_url(socket_dir: str, port: int, user: str = "postgres", database: str = MAINTENANCE_DB) -> str:
    """A URL that reaches a server over its Unix socket in ``socket_dir`` (libpq's ``host=/dir``)."""
    return f"postgresql://{quote(user)}@/{quote(database)}?host={quote(socket_dir, safe='/')}&port={port}"


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def connect(url: str, **kwargs: Any) -> Any:
    """An autocommit psycopg connection (psycopg is imported here, so a SQLite run never pays for it)."""
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT, **kwargs)


def _admin(url: str, what: str) -> Any:
    try:
        return connect(url)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server is the user's to fix
        raise UsageError(f"--db: cannot {what} on {redact(url)}: {one_line(exc)}") from None


def check_reachable(url: str) -> None:
    with _admin(url, "connect") as conn:
        conn.execute("SELECT 1")


def create_database(admin_url: str, name: str) -> str:
    """Create an empty database ``name`` through ``admin_url``'s server; its URL (same credentials)."""
    from psycopg import sql

    with _admin(admin_url, "create a database") as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--db: cannot create a database on {redact(admin_url)}: {one_line(exc)}") from None
    return with_database(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop ``name``, ending any session still in it (a worker that outlived its run)."""
    from psycopg import sql

    with _admin(admin_url, "drop a database") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def empty_database(url: str) -> None:
    """Make the database at ``url`` as a fresh one is: end every other session in it, drop every schema
    but the system's, and create ``public`` again. What ``takeover explore`` does between its examples
    instead of creating a database for each (CREATE DATABASE copies a template: a second under load)."""
    from psycopg import sql

    with _admin(url, "empty a database") as conn:
        try:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            schemas = [r[0] for r in conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'")]
            for name in schemas:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
            conn.execute("CREATE SCHEMA public")
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"--db: cannot empty database {redact(url)}: {one_line(exc)}") from None
