"""A private PostgreSQL server for tests that talk to PostgreSQL directly, and fresh databases on it.

initdb refuses to run as root, so as root the server runs as the ``postgres`` user (Debian's
``postgresql`` package creates it); its folder is a temporary one that user owns. The server
listens on loopback and on a socket in that folder only, and is stopped (``pg_ctl stop -m
immediate``) and removed when the block ends, failed test or not.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields the URL of the server's ``postgres`` database; skips when PostgreSQL is not installed
    (CI installs it: .ci/run)."""
    bindir = _bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    root = tempfile.mkdtemp(prefix="takeover-test-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()
    pg_ctl = [*as_user, os.path.join(bindir, "pg_ctl"), "-D", data]
    try:
        subprocess.run([*as_user, os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres", "--auth=trust"],
                       check=True, capture_output=True)  # fmt: skip
        subprocess.run(
            [*pg_ctl, "-l", os.path.join(root, "log"), "-w", "-o", f"-k {root} -h 127.0.0.1 -p {port}", "start"],
            check=True, capture_output=True,
        )  # fmt: skip
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str, name: str) -> str:
    """A new, empty database on the server (dropped first if a previous test left it)."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name
