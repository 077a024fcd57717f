"""Which node an adapter of adapters/js needs, read from what it loads and what those libraries ask.

pg-boss 10 and better-sqlite3 12 ask for node 20 (their ``engines``); pg asks for 16; Debian 12's nodejs is
18. A test that runs an adapter says so with ``@pytest.mark.needs_node_for("sqlite.js")``
(tests/helpers/system_packages.py) and skips with one line naming the version where the node here is
older; ``make js`` asks the same question (``python -m tests.helpers.node_needs better-sqlite3``) before it
builds better-sqlite3's addon, which an older node cannot load. The answer comes from the adapter's own
``require`` calls (through its own files) and adapters/js/package-lock.json, which pins each library with
its ``engines`` and its dependencies, so a new library or version needs no edit here. Standard library
only: make runs it before anything else is known to work.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

JS = Path(__file__).resolve().parents[2] / "adapters" / "js"
REQUIRE = re.compile(r"""\brequire\(\s*['"]([^'"]+)['"]\s*\)""")


def _libraries(adapter: Path) -> set[str]:
    """The npm libraries ``adapter`` loads, through its own files (``require('./checks')``) too."""
    files: set[Path] = set()
    libraries: set[str] = set()
    todo = [adapter]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files.add(path)
        for name in REQUIRE.findall(path.read_text()):
            if name.startswith("."):
                todo.append((path.parent / name).with_suffix(".js"))
            elif not name.startswith("node:"):  # node's own modules ask for nothing
                libraries.add("/".join(name.split("/")[: 2 if name.startswith("@") else 1]))
    return libraries


def oldest_major(engines: str) -> int:
    """The oldest node major an ``engines.node`` range admits: ">=20" -> 20, "6.* || >= 10.x" -> 6, "*" -> 0."""
    return min(int(found[0]) if (found := re.search(r"\d+", part)) else 0 for part in engines.split("||"))


@functools.cache
def node_needed(what: str) -> tuple[int, str]:
    """The oldest node major that ``what`` accepts, and why ("pg-boss 10.4.2: >=20"): ``what`` is a file of
    adapters/js ("sqlite.js": every library it loads) or a library ("better-sqlite3"), each with what it
    depends on, as the lock file pins them (0 and "" where nothing asks)."""
    packages = json.loads((JS / "package-lock.json").read_text())["packages"]
    names = _libraries(JS / what) if what.endswith(".js") else {what}
    todo = [f"node_modules/{name}" for name in names]
    need, why = 0, ""
    seen: set[str] = set()
    while todo:
        key = todo.pop()
        if key in seen or key not in packages:  # not pinned: one of node's own modules (require('crypto'))
            continue
        seen.add(key)
        entry = packages[key]
        engines = entry.get("engines", {}).get("node")
        if engines:
            major, said = oldest_major(engines), f"{key.rsplit('node_modules/', 1)[1]} {entry['version']}: {engines}"
            # Of two libraries asking for the same node, the first by name: the same answer on every run
            # (sqlite.js and redis.js's libraries both ask for 20; a set's order is not fixed).
            if major > need or (major == need and said < why):
                need, why = major, said
        for dep in entry.get("dependencies", {}):  # npm's lookup: nested under key first, else hoisted
            nested = f"{key}/node_modules/{dep}"
            todo.append(nested if nested in packages else f"node_modules/{dep}")
    return need, why


@functools.cache
def node_version() -> str:
    """This machine's node ("v18.20.4"), empty where there is none."""
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return ""


def major(version: str) -> int:
    found = re.search(r"\d+", version)
    return int(found[0]) if found else 0


def too_old(what: str) -> str:
    """"sqlite.js needs node 20 or newer (better-sqlite3 12.9.0: 20.x || ...); node here is v18.20.4", or
    empty where the node here is new enough (or there is none: that is scripts/system-packages' nodejs)."""
    here = node_version()
    need, why = node_needed(what)
    if not here or major(here) >= need:
        return ""
    return f"{what} needs node {need} or newer ({why}); node here is {here}"


if __name__ == "__main__":  # make js: `python -m tests.helpers.node_needs better-sqlite3`; exit 1 where too old
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.helpers.node_needs ADAPTER.js|LIBRARY")
    line = too_old(sys.argv[1])
    if line:
        print(line)
    sys.exit(1 if line else 0)
