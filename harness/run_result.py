"""What one checked run concluded, as ``takeover.stress()`` and ``takeover.check()`` return it.

Why a module of its own: the library's core (takeover._internal.stress_run.run_stress) returns it, the Python API
returns it, and the pytest plugin records it; one type for all of them, built from the checker's
summary in memory (:meth:`RunResult.of`), or read from a run folder when the run left no verdict in
memory (:meth:`RunResult.read`: a run that ended without one, a stored folder).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from takeover._internal import store
from takeover.errors import UsageError

if TYPE_CHECKING:
    from takeover.summary_types import Summary, Verdict


@dataclass(frozen=True)
class RunResult:
    """What one checked run concluded: the fields a test asserts on, and the message it fails with.

    ``valid`` is summary.json's verdict: True, False, or ``"unknown"`` (the run tested nothing, or was
    never checked). ``exit_code`` is the command's (0 valid, 1 violated or a duplicate gate failed,
    3 inconclusive, 130 interrupted). ``violations`` counts each violated invariant's violations;
    ``duplicates`` is summary.json's ``duplicates`` section (``tasks``, ``extra_actions``, ``by_cause``).
    """

    valid: Verdict
    exit_code: int
    run_dir: Path
    summary: dict[str, Any]  # summary.json as written (empty when the run was never checked)
    violations: dict[str, int]
    duplicates: dict[str, Any]
    command: str  # the line that reproduces the run, from a fresh shell
    output: str = ""  # what the command printed on stdout

    @property
    def ok(self) -> bool:
        """The run passed: exit code 0."""
        return self.exit_code == 0

    @property
    def verdict(self) -> str:
        """The verdict in one word, as the terminal and the reports print it: VALID, INVALID, INCONCLUSIVE,
        ``VALID (duplicates fail this run)``; ``NOT CHECKED`` when the run has no summary."""
        if not self.summary:
            return "NOT CHECKED"
        from takeover.reports.words import verdict_word

        return verdict_word(cast("Summary", self.summary))

    def verdict_lines(self) -> list[str]:
        """The short summary ``takeover check`` prints: the verdict first, then what broke."""
        if not self.summary:
            lines = [line for line in self.output.splitlines() if line.strip()]
            return lines[-5:] or [f"no verdict: the run ended with exit code {self.exit_code}"]
        from takeover.reports.console import short_summary

        summary = cast("Summary", self.summary)  # as summary.json holds it (another version's may lack keys)
        return short_summary(summary, [])[:-1].splitlines()[:-1]  # without the "wrote ..." line

    @property
    def coverage(self) -> dict[str, Any] | None:
        """The model coverage (summary.json ``coverage.model``): ``reached`` of ``possible`` cells,
        ``cells`` (key -> calls), ``unreached``, ``unreached_important``, ``impossible`` (reason -> cells);
        None for a run never checked, or checked before coverage was computed. The cells are
        takeover._internal.coverage_space's ``op/state/caller/time`` keys."""
        model = (self.summary.get("coverage") or {}).get("model")
        return model if isinstance(model, dict) else None

    def coverage_line(self) -> str | None:
        """The model coverage in one line, as the terminal prints it; None without coverage."""
        if self.coverage is None:
            return None
        from takeover.reports.coverage import coverage_line

        return coverage_line(cast("Summary", self.summary))

    def diagnosis(self) -> list[str]:
        """The plain-words diagnosis, when the checker wrote one into summary.json (``diagnosis``)."""
        value = self.summary.get("diagnosis")
        if not value:
            return []
        if isinstance(value, str):
            return value.splitlines()
        if isinstance(value, Mapping):
            return [f"{k}: {v}" for k, v in value.items()]
        if isinstance(value, list):  # the checker's: one entry per pattern, each with its sentence
            return [v if isinstance(v, str) else str(v["sentence"]) if isinstance(v, Mapping) and "sentence" in v
                    else json.dumps(v, default=str) for v in value]
        return [str(value)]

    def violation_rows(self) -> list[dict[str, Any]]:
        """Every violation the run folder lists: ``violations.csv`` when the checker wrote one (the full
        list), otherwise the examples in summary.json (at most five per invariant), each with its
        ``invariant``."""
        csv_path = self.run_dir / store.VIOLATIONS_CSV
        if csv_path.is_file():
            import csv

            with csv_path.open(newline="") as f:
                return list(csv.DictReader(f))
        return [{"invariant": name, **ex} for name, inv in self.summary.get("invariants", {}).items()
                for ex in inv.get("examples", [])]

    def message(self) -> str:
        """What a failing test says: the verdict lines, the diagnosis, the reproduce line, the run folder."""
        lines = self.verdict_lines()
        diagnosis = self.diagnosis()
        if diagnosis and not any(line.lstrip().startswith("diagnosis") for line in lines):  # not told already
            lines += ["diagnosis:", *(f"  {d}" for d in diagnosis)]
        lines += [f"reproduce with: {self.command}", f"run folder: {self.run_dir}"]
        return "\n".join(lines)

    @classmethod
    def of(cls, run_dir: Path, exit_code: int, summary: Mapping[str, Any] | None, *, command: str = "",
           output: str = "") -> RunResult:
        """From the checker's summary in memory (None: the run was never checked). The summary is taken
        as summary.json holds it (its JSON values: lists, plain numbers), so a test compares it with
        what the folder holds; ``command`` when the summary has none (a run never checked)."""
        data: dict[str, Any] = json.loads(store.dump_summary(cast("Summary", summary))) if summary else {}
        command = str(data.get("config", {}).get("command", "")) or command
        violations = {name: int(inv.get("violations", 0)) for name, inv in data.get("invariants", {}).items()
                      if inv.get("valid") is False}
        return cls(valid=data.get("valid", "unknown"), exit_code=exit_code, run_dir=run_dir, summary=data,
                   violations=violations, duplicates=dict(data.get("duplicates", {})), command=command,
                   output=output)

    @classmethod
    def read(cls, run_dir: Path, exit_code: int, output: str = "") -> RunResult:
        """From a run folder: its summary.json, and its config.json's reproduce line when it has no
        summary (a run that ended before its check)."""
        summary: dict[str, Any] = {}
        if (run_dir / store.SUMMARY_FILE).is_file():
            with contextlib.suppress(UsageError):
                summary = store.read_json_object(run_dir / store.SUMMARY_FILE)
        command = ""
        if not summary.get("config", {}).get("command") and (run_dir / store.CONFIG_FILE).is_file():
            with contextlib.suppress(UsageError):
                command = str(store.read_config(run_dir).get("command", ""))
        return cls.of(run_dir, exit_code, summary or None, command=command, output=output)
