"""The suite's own time in bench.json: ``make test``'s session time and its slowest tests, from its output.

Why from the output and not by running the suite: the gate suite takes minutes and is run anyway (the lead's
``make test``, CI); its log already holds what the budget needs (``--durations=15`` lists the 15 slowest
test phases, the last line the session's wall time). ``make test`` leaves its output in
:data:`MAKE_TEST_LOG`, under a first line naming the commit it tested and when it started; ``make bench``
passes that file to ``takeover bench --with-suite-log`` when it is there, and ``takeover bench --suite-log
FILE`` reads any such log alone. Either way it lands in bench.json's ``suite`` key, with the log's commit
beside the bench's own, so the page shows the budget's drift beside the other figures and says so when the
suite's time is of another commit than the figures'.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from takeover.errors import UsageError

BUDGET_S = 600.0  # the gate suite's budget on 2 cores (tests/README.md: under 10 minutes)
MAKE_TEST_LOG = "build/test-log.txt"  # where make test leaves its output (Makefile: SUITE_LOG)
# make test's first line: "# make test: commit <sha>[ dirty], started <ISO time>" (Makefile)
_HEAD = re.compile(r"^# make test: commit (\S+)( dirty)?, started (\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")
_HEADER = re.compile(r"=+ slowest (?:\d+ )?durations =+")
# pytest's last line: "===== 712 passed, 12 skipped, 3 deselected in 498.12s (0:08:18) ====="
_SUMMARY = re.compile(r"^=+ (.*?) in (\d+(?:\.\d+)?)s(?: \([0-9:]+\))? =+$")


def parse(text: str) -> dict[str, Any]:
    """The slowest tests (seconds, phase, test id, in the log's order) and the session's outcome counts and
    wall time, from a pytest run's output. Raises UsageError when the output has no session summary line
    (not a pytest log, or a run that was cut off)."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    slowest: list[dict[str, Any]] = []
    in_durations = False
    summary = None
    for line in lines:
        if _HEADER.search(line):
            in_durations = True
            continue
        if in_durations:
            m = _DURATION.match(line)
            if m:
                slowest.append({"seconds": float(m.group(1)), "phase": m.group(2), "test": m.group(3)})
                continue
            if line.startswith("="):
                in_durations = False
        m = _SUMMARY.match(line.strip())
        if m:
            summary = m
    if summary is None:
        raise UsageError("the suite log has no pytest summary line ('== N passed ... in S s =='): give the whole "
                         "output of make test")  # fmt: skip
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary.group(1))}
    out: dict[str, Any] = {"wall_s": float(summary.group(2)), "budget_s": BUDGET_S, "counts": counts,
                           "slowest": slowest}
    head = _HEAD.match(lines[0]) if lines else None
    if head:  # make test's own log: which commit it tested (with uncommitted changes: dirty), and when
        out.update(commit=head.group(1), dirty=bool(head.group(2)), started=head.group(3))
    return out


def record(log: Path, option: str = "--suite-log") -> dict[str, Any]:
    """bench.json's ``suite``: :func:`parse` of the log, when the log was written, and which file it was."""
    try:
        text = log.read_text(errors="replace")
        written = os.stat(log).st_mtime
    except OSError as exc:
        raise UsageError(f"{option} {str(log)!r}: {exc.strerror or exc}") from None
    return {**parse(text), "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(written)), "log": log.name}


def stale(suite: dict[str, Any], commit: str | None) -> str | None:
    """Why the suite's time is not the current code's, if it is not: another commit than ``commit`` (the
    bench's), or uncommitted changes; None when it is the same commit, or either is unknown."""
    tested = suite.get("commit")
    if not tested or not commit or tested == "unknown":
        return None
    if tested != commit:
        return f"the suite ran at commit {tested[:10]}, not {commit[:10]}"
    return "the suite ran with uncommitted changes" if suite.get("dirty") else None


def table(suite: dict[str, Any]) -> list[str]:
    """The suite's section of the benchmarks page, as Markdown lines."""
    counts = ", ".join(f"{n} {word}" for word, n in suite.get("counts", {}).items())
    minutes = suite["wall_s"] / 60
    commit = f" at commit `{suite['commit'][:10]}`" if suite.get("commit") else ""
    why = suite.get("stale")
    out = ["## The suite's own time\n",
           f"`make test` (the gate, marker \"not nightly\"){commit} on {suite.get('when', '?')}: "
           f"{suite['wall_s']:.0f} s ({minutes:.1f} min; budget {suite.get('budget_s', BUDGET_S) / 60:.0f} min), "
           f"{counts}." + (f" **Not the code of the figures above: {why}.**" if why else "") + " The 15 slowest "
           f"test phases (pytest `--durations=15`; `make test` leaves its output in `{MAKE_TEST_LOG}`, and `make "
           "bench` records it; `takeover bench --suite-log FILE` records any such log):\n",
           "| seconds | phase | test |", "|---|---|---|"]  # fmt: skip
    out += [f"| {row['seconds']:.2f} | {row['phase']} | `{row['test']}` |" for row in suite.get("slowest", [])]
    return [*out, ""]


def attach(doc: dict[str, Any], suite: dict[str, Any] | None = None) -> None:
    """Put ``suite`` (or the one ``doc`` already holds) into bench.json's ``doc``, with ``stale`` saying why it
    is not the code of the figures (``doc``'s ``commit``) when it is not."""
    suite = suite if suite is not None else doc.get("suite")
    if not isinstance(suite, dict):
        return
    suite.pop("stale", None)
    why = stale(suite, doc.get("commit"))
    doc["suite"] = {**suite, **({"stale": why} if why else {})}
