"""The docs name the spec with a link: "the spec" or "the original" in a paragraph of README.md,
tests/README.md or docs/*.md (outside code) comes with a link to docs/spec.md or docs/spec.zh.md in that
paragraph, so a reader can always get to the text the scenarios and the invariants come from.

The README naming every command and option is tests/unit/test_cli.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.processes import REPO

DOCS = [REPO / "README.md", REPO / "tests" / "README.md",
        *sorted(p for p in (REPO / "docs").glob("*.md") if not p.name.startswith("spec"))]
NAMES = re.compile(r"\bthe spec\b|\bthe original\b", re.IGNORECASE)
SPEC_LINK = re.compile(r"\]\([^)]*spec(\.zh)?\.md\)")


def _prose_paragraphs(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    prose = [p for p in paragraphs if not all(line.startswith("    ") for line in p.splitlines())]
    return [re.sub(r"`[^`\n]*`", "", p) for p in prose]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_spec_is_named_with_a_link(path: Path) -> None:
    unlinked = [" ".join(p.split())[:120] for p in _prose_paragraphs(path)
                if NAMES.search(re.sub(r"\[[^\]]*\]\([^)]*\)", "", p)) and not SPEC_LINK.search(p)]
    assert unlinked == []
