"""docs/design.md and tests/README.md name files that exist, where they say they are.

Why a test: both are written by hand and drifted from the tree without anyone noticing (tests/README.md
listed tests/helpers/imports.py long after it was gone; design.md put lifeline.py under run/ and nested
run/'s modules under powerloss/). A move or a removal that forgets them now fails here, naming the line.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"
TESTS_README = REPO / "tests" / "README.md"
# A path of the tree in backticks or in the folder table: the three source folders and the tests.
PATH = re.compile(r"(?<![\w./-])((?:harness|reports|workloads|tests)/[\w./*-]*[\w*/])")


def _exists(path: str) -> bool:
    return any(REPO.glob(path)) if "*" in path else (REPO / path).exists()


def _folder_table() -> list[tuple[int, str, list[str]]]:
    """design.md's "folders, by role" table: (line number, folder, files named under it). A folder row has its
    path at column 17 (``harness/_internal/run/``); a file row, two columns deeper, names files of the folder above."""
    lines = DESIGN.read_text().splitlines()
    start = lines.index("## The folders, by role")
    rows: list[tuple[int, str, list[str]]] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line and not line.startswith("    "):
            break
        rest = line[17:]
        if rest[:1].strip():
            rows.append((number, rest.split()[0], []))
        elif rest[:2] == "  " and rest[2:3].strip() and rows:
            rows[-1][2].extend(n.strip() for n in re.split(r"\s{2,}", rest.strip())[0].split(","))
    return rows


def test_every_folder_and_file_of_the_design_table_is_where_it_says() -> None:
    rows = _folder_table()
    assert len(rows) > 10, "the table was not found where the test reads it"
    wrong = [f"line {n}: {path}" for n, path, _ in rows if not _exists(path)]
    wrong += [f"line {n}: {name} is not in {path}" for n, path, names in rows for name in names
              if not (REPO / path / name).exists()]  # fmt: skip
    assert not wrong, "docs/design.md names what the tree does not have:\n" + "\n".join(wrong)


def test_every_path_in_design_md_and_tests_readme_exists() -> None:
    missing = [f"{doc.relative_to(REPO)}:{n}: {path}" for doc in (DESIGN, TESTS_README)
               for n, line in enumerate(doc.read_text().splitlines(), 1) for path in PATH.findall(line)
               if not _exists(path)]  # fmt: skip
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_tests_readme_lists_every_helper_and_only_those() -> None:
    text = TESTS_README.read_text()
    listed = set(re.findall(r"^  - `(\w+\.py)`", text, re.MULTILINE))
    present = {p.name for p in (REPO / "tests" / "helpers").glob("*.py") if p.name != "__init__.py"}
    assert listed == present, f"listed, gone: {sorted(listed - present)}; there, not listed: {sorted(present - listed)}"
