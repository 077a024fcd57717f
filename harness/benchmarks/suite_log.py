"""The suite's own time in bench.json: ``make test``'s session time and its slowest tests, from its output.

Why from the output and not by running the suite: the gate suite takes minutes and is run anyway (the lead's
``make test``, CI); its log already holds what the budget needs (``--durations=15`` lists the 15 slowest
test phases, the last line the session's wall time). ``takeover bench --suite-log FILE`` reads such a log
(``make test 2>&1 | tee test.log``) into bench.json's ``suite`` key, so the page shows the budget's drift
beside the other figures.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from takeover.errors import UsageError

BUDGET_S = 600.0  # the gate suite's budget on 2 cores (tests/README.md: under 10 minutes)
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
    return {"wall_s": float(summary.group(2)), "budget_s": BUDGET_S, "counts": counts, "slowest": slowest}


def record(log: Path) -> dict[str, Any]:
    """bench.json's ``suite``: :func:`parse` of the log, when the log was written, and which file it was."""
    try:
        text = log.read_text(errors="replace")
        written = os.stat(log).st_mtime
    except OSError as exc:
        raise UsageError(f"--suite-log {str(log)!r}: {exc.strerror or exc}") from None
    return {**parse(text), "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(written)), "log": log.name}


def table(suite: dict[str, Any]) -> list[str]:
    """The suite's section of the benchmarks page, as Markdown lines."""
    counts = ", ".join(f"{n} {word}" for word, n in suite.get("counts", {}).items())
    minutes = suite["wall_s"] / 60
    out = ["## The suite's own time\n",
           f"`make test` (the gate, marker \"not nightly\") on {suite.get('when', '?')}: {suite['wall_s']:.0f} s "
           f"({minutes:.1f} min; budget {suite.get('budget_s', BUDGET_S) / 60:.0f} min), {counts}. The 15 slowest "
           "test phases (pytest `--durations=15`; recorded by `takeover bench --suite-log FILE` from the output of "
           "`make test`):\n",
           "| seconds | phase | test |", "|---|---|---|"]  # fmt: skip
    out += [f"| {row['seconds']:.2f} | {row['phase']} | `{row['test']}` |" for row in suite.get("slowest", [])]
    return [*out, ""]
