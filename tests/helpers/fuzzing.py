"""One fuzzed command against the fuzzing queue (tests/fixtures/queues/bad_answers.py ``FuzzQueue``), and what
came of it: shared by the fuzz tests (tests/system/test_fuzz_answers.py), which assert on it, and the tally
of docs/benchmarks.md (``python -m tests.helpers.fuzzing``), which counts it."""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.processes import REPO, child_env, wait_no_stragglers

STRESS = ("stress", "--profile", "smoke", "--duration", "1", "--tasks", "12", "--workers", "2", "--heartbeat", "0.1")
SCENARIOS = ("scenarios",)
EXPLORE = ("explore", "--examples", "15")


@dataclass(frozen=True)
class Outcome:
    code: int
    traceback: bool
    bad_given: str  # the malformed answers the queue noted it gave, one a line ("" when none)
    valid: bool | str | None  # summary.json's verdict, where the command wrote one
    left_behind: int  # processes of the run still alive after it
    said: str  # the command's stdout and stderr, the end of them

    @property
    def ok(self) -> bool:
        """The property of issue 34: an exit code of 0-3, no traceback, never VALID once a malformed answer
        was given, nothing left behind."""
        never_valid = not self.bad_given or (self.code != 0 and self.valid is not True)
        return self.code in (0, 1, 2, 3) and not self.traceback and never_valid and not self.left_behind


def run_fuzzed(command: tuple[str, ...], script: dict[str, Any]) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="takeover-fuzz-") as tmp:
        folder = Path(tmp)
        (folder / "script.pickle").write_bytes(pickle.dumps(script))
        notes = folder / "notes"
        env = {**child_env(), "TAKEOVER_FUZZ_SCRIPT": str(folder / "script.pickle"), "TAKEOVER_FUZZ_NOTES": str(notes)}
        run = folder / "run"
        where = ("--out", str(run)) if command[0] in ("stress", "explore") else ()
        proc = subprocess.run([sys.executable, "-m", "takeover", *command, "--queue", "bad_answers:FuzzQueue",
                               *where], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        said = proc.stdout + proc.stderr
        left = len(wait_no_stragglers(run)) if command[0] == "stress" else 0
        summary = run / "summary.json"
        valid = json.loads(summary.read_text())["valid"] if command[0] == "stress" and summary.exists() else None
        bad = notes.read_text().strip() if notes.exists() else ""
        return Outcome(proc.returncode, "Traceback" in said, bad, valid, left, said[-3000:])


def _tally(strategy: Any, fn: Callable[[Any], Any], examples: int, seed: int) -> list[Any]:
    """``fn`` on ``examples`` values Hypothesis draws from ``strategy`` (seeded, no shrinking)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    out: list[Any] = []
    if examples <= 0:
        return out

    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seeded(seed)
    @given(strategy)
    def one(value: Any) -> None:
        out.append(fn(value))

    one()
    return out


def main() -> None:
    """Print the rows of docs/benchmarks.md's table of bad inputs: per boundary, how many were tried and
    what came of them."""
    from takeover._internal import answers
    from tests.helpers import junk

    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--histories", type=int, default=40)
    parser.add_argument("--stress", type=int, default=8)
    parser.add_argument("--scenarios", type=int, default=20)
    parser.add_argument("--explore", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    def refused(check: Callable[[Any, str], Any]) -> Callable[[Any], str]:
        def one(value: Any) -> str:
            try:
                check(value, "fuzz:Queue")
            except answers.MalformedAnswer:
                return "refused"
            except Exception as exc:  # noqa: BLE001 - counted: it must never happen
                return f"raised {type(exc).__name__}"
            return "ACCEPTED"
        return one

    rows = []
    for name, strategy, check in (("claim", junk.bad_claims, answers.claim), ("finish", junk.bad_bools, answers.finish),
                                  ("resolve", junk.bad_bools, answers.resolve),
                                  ("extend", junk.bad_extends, answers.extend)):
        got = Counter(_tally(strategy, refused(check), args.answers, args.seed))
        if got:
            rows.append((f"`takeover._internal.answers.{name}` (in process)", sum(got.values()), dict(got)))
    checked = _tally(junk.damaged_leases, lambda d: junk.check_damaged(junk.STORED_VALID, d), args.histories, args.seed)
    got = Counter("exit 2 (not a readable history)" if code == 2 else f"exit {code}, answers_well_formed {check}"
                  for _verdict, code, check in checked)
    got["VALID"] = sum(1 for verdict, _code, _check in checked if verdict is True)
    if checked:
        rows.append(("`takeover check` of a stored run with damaged claim lease ends", len(checked), dict(got)))
    for command, n in ((STRESS, args.stress), (SCENARIOS, args.scenarios), (EXPLORE, args.explore)):
        if not n:
            continue
        outcomes = _tally(junk.scripts, lambda s, c=command: run_fuzzed(c, s), n, args.seed)
        got = Counter(f"exit {o.code}" + ("" if o.ok else " FAILED THE PROPERTY") for o in outcomes)
        got["VALID after a malformed answer"] = sum(1 for o in outcomes
                                                    if o.bad_given and (o.code == 0 or o.valid is True))
        got["traceback"] = sum(o.traceback for o in outcomes)
        got["processes left"] = sum(o.left_behind for o in outcomes)
        rows.append((f"`takeover {command[0]}` on the fuzzing queue", len(outcomes), dict(got)))
    print("| boundary | bad inputs tried | outcomes |\n|---|---|---|")
    for name, n, got in rows:
        print(f"| {name} | {n} | " + ", ".join(f"{k}: {v}" for k, v in got.items()) + " |")


if __name__ == "__main__":
    main()
