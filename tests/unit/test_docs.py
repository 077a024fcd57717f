"""The docs and the documentation site.

The docs name the spec with a link: "the spec" or "the original" in a paragraph of README.md,
tests/README.md or a page under docs/ (outside code) comes with a link to docs/spec.md or docs/spec.zh.md in
that paragraph, so a reader can always get to the text the scenarios and the invariants come from.

The site (mkdocs.yml): its reference is generated from the code (docs/gen_reference.py) and names every
command and option, every key of summary.json and every exit code; every page is in the nav; it builds with
--strict.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from takeover.cli import build_parser
from takeover.contract import REQUIRED_METHODS
from takeover.exit_codes import ExitCode
from takeover.options import RUN_OPTIONS
from takeover.summary_types import Summary
from tests.helpers.processes import REPO

DOCS = [REPO / "README.md", REPO / "tests" / "README.md",
        *sorted(p for p in (REPO / "docs").rglob("*.md")
                if not p.name.startswith("spec") and "analyses" not in p.parts)]
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


# -- the documentation site (mkdocs.yml; its generated pages come from docs/gen_reference.py) -----------------
def _gen_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    pages: dict[str, str] = _gen_reference().pages()
    return pages


def _sections(page: str) -> dict[str, str]:
    """A generated page's ``## `takeover NAME` `` sections by command name."""
    parts = re.split(r"^## `takeover ([\w-]+)`.*$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_reference_names_every_command_and_every_option(generated: dict[str, str]) -> None:
    """Each command has its section, and each option of its parser (hidden ones too) is in that section."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sections = _sections(generated["reference/cli.md"])
    assert list(sections) == list(sub.choices)
    missing = [f"{name} {flag}" for name, command in sub.choices.items() for action in command._actions
               for flag in action.option_strings if flag.startswith("--") and flag != "--help"
               and not re.search(r"`" + re.escape(flag) + r"`", sections[name])]  # fmt: skip
    assert missing == []
    # the run options' table is the source of stress's: every one of them, with its help
    assert all(f"`{o.flag}`" in sections["stress"] for o in RUN_OPTIONS)
    assert "seed of every random choice" in sections["stress"]


def test_the_reference_lists_every_summary_key_and_exit_code(generated: dict[str, str]) -> None:
    summary = generated["reference/summary.md"]
    assert all(f"| `{key}` |" in summary for key in Summary.__annotations__)
    codes = generated["reference/exit-codes.md"]
    assert all(f"| {int(code)} | `{code.name}` |" in codes for code in ExitCode)
    contract = generated["reference/contract.md"]
    assert all(f"`{method}`" in contract for method in REQUIRED_METHODS)


def test_the_benchmark_page_shows_every_figure_of_bench_json() -> None:
    """docs/benchmarks.md's tables are docs/bench.json's (a file ``takeover bench`` wrote), filled in at build time."""
    gen = _gen_reference()
    assert gen.BENCH_MARKER in (REPO / "docs" / "benchmarks.md").read_text()
    bench = json.loads(gen.BENCH_JSON.read_text())
    tables = gen.bench_tables(bench)
    assert all(f"`{r['name']}`" in tables for r in bench["results"])
    assert all(f"| {bug} |" in tables for bug in bench.get("detection", {}).get("bugs", {}))
    assert all(f"| {bug} |" in tables for bug in bench.get("detection_network", {}).get("bugs", {}))


def test_the_benchmark_page_lists_every_mutant_that_survived() -> None:
    """docs/benchmarks.md's mutation tables are docs/mutation/*.json's, judged against today's equivalence table."""
    gen = _gen_reference()
    assert gen.MUTATION_MARKER in (REPO / "docs" / "benchmarks.md").read_text()
    tables = gen.mutation_tables()
    from takeover.mutation.equivalent import EQUIVALENT

    for path in gen.MUTATION_JSONS.glob("*.json"):
        doc = json.loads(path.read_text())
        assert f"`{doc['queue']}`" in tables
        survivors = [m["id"] for m in doc["mutants"] if m["verdict"] != "killed" and m["id"] not in EQUIVALENT]
        assert all(f"| `{i}` |" in tables for i in survivors)


def test_every_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav is a page nobody finds (the strict build warns; this names it)."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = [str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")]
    assert [p for p in pages if f" {p}\n" not in nav and f": {p}\n" not in nav] == []


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """``make docs``'s build: a broken link, a missing anchor or a page outside the nav fails it."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists() and os.environ.get("CI") != "true":
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--kill-rate" in cli and "takeover stress" in cli


# -- the tutorial's code blocks: each marked runnable runs, in order, in a folder of its own -------------------
# ``<!-- runnable -->`` (exit 0), ``<!-- runnable: exit 1 -->``, or ``<!-- runnable: exit 1 on one of seeds 1-3 -->``
# for a stress run that may miss its window on a busy machine: the block runs again with the next --seed.
RUNNABLE = re.compile(r"<!-- runnable(?:: exit (\d+))?(?: on one of seeds (\d+)-(\d+))? -->\n```sh\n(.*?)```", re.S)
FILE_BLOCK = re.compile(r'```python title="([\w.]+)( \(append\))?"\n(.*?)```', re.S)


def tutorial_steps() -> list[tuple[str, list[str], int]]:
    """("file" or "append", [name, text], 0) writes a file, ("run", [command, ...], exit code) runs a block (the
    next command only when the one before did not exit with that code): in the page's order."""
    text = (REPO / "docs" / "tutorial.md").read_text()
    steps: list[tuple[int, tuple[str, list[str], int]]] = []
    for m in RUNNABLE.finditer(text):
        command = m.group(4)
        seeds = range(int(m.group(2)), int(m.group(3)) + 1) if m.group(2) else range(0)
        tries = [re.sub(r"--seed \d+", f"--seed {seed}", command) for seed in seeds] or [command]
        steps.append((m.start(), ("run", tries, int(m.group(1) or 0))))
    steps += [(m.start(), ("append" if m.group(2) else "file", [m.group(1), m.group(3)], 0))
              for m in FILE_BLOCK.finditer(text)]
    return [step for _, step in sorted(steps)]


def test_the_tutorial_has_runnable_blocks() -> None:
    kinds = [kind for kind, _, _ in tutorial_steps()]
    assert kinds.count("run") >= 6 and kinds.count("file") == 1 and kinds.count("append") == 1


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_runnable_block_of_the_tutorial_runs(tmp_path: Path) -> None:
    """The tutorial as a reader follows it: its files written, its commands run, each with the exit code it says."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for kind, body, code in tutorial_steps():
        if kind in ("file", "append"):
            name, content = body
            with (tmp_path / name).open("a" if kind == "append" else "w") as f:
                f.write(("\n\n" if kind == "append" else "") + content)
            continue
        for command in body:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600)
            if done.returncode == code:
                break
        assert done.returncode == code, f"{command.strip()}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr}"


def test_the_readme_is_a_landing_page() -> None:
    """At most ~250 lines, the two commands near the top; everything else lives in the site."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    top = "\n".join(lines[:25])
    assert "make stress" in top and "make test" in top
