"""docs/howto/postgres.md's own queue, as a reader copies it: the page's code block, written to a file, opens
concurrently on one fresh database (its schema created under an advisory lock) and matches the spec's five
scenarios. (The claim the page warns against is tests/fixtures/queues/postgres_mistakes.py, whose stored run
tests/quality/test_known_causes.py diagnoses.)"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from takeover._internal import db
from tests.helpers.processes import REPO

pytestmark = [pytest.mark.slow, pytest.mark.needs_package("postgresql")]

PAGE = REPO / "docs" / "howto" / "postgres.md"
BLOCK = re.compile(r'```python title="my_pg_queue.py"\n(.*?)```', re.S)


def _queue_file(folder: Path) -> Path:
    [code] = BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    path = folder / "my_pg_queue.py"
    path.write_text(code, encoding="utf-8")
    return path


def _scenarios(folder: Path, queue: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(folder), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "takeover", "scenarios", "--db", "postgres", "--queue", queue],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_pages_queue_opens_concurrently_and_keeps_the_spec(tmp_path: Path) -> None:
    _queue_file(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        import my_pg_queue  # the page's file, as a user imports it
    finally:
        sys.path.remove(str(tmp_path))
    with db.serve("postgres") as host, host.database(tmp_path, "howto") as url:
        start, errors, queues = threading.Barrier(6), [], []

        def open_one() -> None:
            start.wait()
            try:
                queues.append(my_pg_queue.JobQueue(url))
            except Exception as exc:  # noqa: BLE001 - what the lock is there to prevent
                errors.append(repr(exc))

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for q in queues:
            q.close()
    assert errors == [] and len(queues) == 6
    done = _scenarios(tmp_path, "my_pg_queue:JobQueue")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "All 5 scenario(s) match the spec" in done.stdout
