"""A soak: banked seeds replayed, then back-to-back segments, each a full run checked at its end.

Design (why segments): a soak must stay bounded in memory and disk however long it lasts, and must
leave a verdict when it is killed. So the soak is a chain of *segments*, each a complete stress run
of ``checkpoint`` seconds with tasks arriving continuously at the profile's ``arrival_rate`` (the
coordinator's continuous arrival), followed by its drain, snapshot and the checker: that is the
checkpoint. Every invariant is judged on a closed world (the segment's own queue file, ledger and
history), so a checkpoint's verdict is exact, not a guess over a history cut mid-operation.

After its checkpoint a passed segment's bulky files (history, queue file and WAL, ledger, snapshot,
HTML report) are deleted; ``summary.json``, ``report.md``, ``junit.xml`` and ``config.json`` stay.
A failed segment keeps everything, so it can be re-checked and replayed; past ``keep_failed`` of
them, further failed segments keep their history gzip-compressed and drop the rest. The queue's
done rows are therefore never pruned inside a segment (the final snapshot is the checker's evidence
for "no task lost", and pruning would be a queue operation the contract does not have); instead the
whole queue file is retired with its segment. Disk then grows only by a few kilobytes of summaries
per checkpoint, and memory is the high-water mark of one segment, however long the soak runs.

The price: a task never spans two segments, and the queue file never holds more than one
segment's tasks; a bug that needs a queue file hours old would be missed. Longer ``--checkpoint``
values trade bounded size for that.

``soak.json`` (the interim and final summary) is rewritten atomically after every checkpoint, so a
soak killed at any moment leaves the verdict of everything checked so far.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takeover._internal import store, swarm
from takeover._internal.config import RunConfig
from takeover._internal.run.progress import accepted_finishes
from takeover._internal.soak import seedbank
from takeover._internal.soak.display import SoakDisplay, Totals
from takeover._internal.soak.resources import ResourceWatch, Targets, growth_warnings, read_resources
from takeover.errors import UsageError
from takeover.exit_codes import ExitCode

if TYPE_CHECKING:  # the checker (pandas) is loaded when the soak starts, not when its module is imported
    from takeover.summary_types import Summary

BULKY = (store.HISTORY_FILE, *store.sqlite_files(store.QUEUE_FILE), *store.sqlite_files(store.LEDGER_FILE),
         store.SNAPSHOT_FILE, store.PROBES_FILE, store.REPORT_HTML, store.POWERLOSS_LOG)  # fmt: skip
MIN_SEGMENT = 1.0  # seconds: a shorter remainder of the budget is not worth a run
# The codes a completed check gives; a segment with any other kept everything for a re-check.
CHECKED = (ExitCode.VALID, ExitCode.VIOLATED, ExitCode.INCONCLUSIVE)


def segment_length(checkpoint: float, remaining: float) -> float | None:
    """The next segment's faulted phase: a whole checkpoint, or what is left of the budget (None: too little).

    Drains and checks count against the budget, so only the first segment's length is known before
    the soak starts: it gets ``min(checkpoint, minutes)``. The soak's header prints that segment's
    reproduce line from this same function, so the line is exactly the run that follows.
    """
    length = min(checkpoint, remaining)
    return round(length, 3) if length >= MIN_SEGMENT else None


def segment_config(base: RunConfig, index: int, duration: float, pinned: tuple[str, ...] = ()) -> RunConfig:
    """Segment ``index``'s config (0 is seg-0001): ``base`` with seed ``base.seed + index`` and ``duration``.

    With ``--swarm`` (``base.swarm``) each segment draws its own fault mix from its own seed, around the
    base's rates, keeping the ``pinned`` kinds' (those given explicitly); the header prints seg-0001's
    line from this same function.
    """
    cfg = dataclasses.replace(base, seed=base.seed + index, duration=duration)
    return swarm.draw(cfg, pinned).validate() if cfg.swarm else cfg


def segment_name(index: int) -> str:
    """Segment ``index``'s folder and name in ``soak.json``: seg-0001 is index 0, whichever shard makes it."""
    return f"seg-{index + 1:04d}"


@dataclass(frozen=True)
class SoakOptions:
    base: RunConfig  # the segments' config before any swarm draw; each segment gets seed = base.seed + its index
    out: Path
    minutes: float
    bank: Path  # where new failures are banked (takeover._internal.soak.seedbank.bank_path: never inside the package)
    pinned: tuple[str, ...] = ()  # with --swarm: the fault kinds given explicitly, which no segment draws
    checkpoint: float = 300.0
    sample: float = 5.0
    replay_from: tuple[Path, ...] = ()  # banks whose entries are replayed first
    replay: bool = True
    keep: str = "failed"  # failed | all: which segments keep their bulky files
    keep_failed: int = 5
    fail_on_duplicates: bool = False
    max_duplicates_per_1000: float | None = None  # the duplicate gate (takeover._internal.checker.gate), per segment
    command: str = ""
    shard: tuple[int, int] | None = None  # --shard I/N: segments I-1, I-1+N, ... and every N-th banked seed

    def segment_indices(self) -> Iterator[int]:
        """The segments this soak makes, by their index in the whole soak (0 is seg-0001): every one, or with
        ``--shard I/N`` those whose index is I-1 modulo N, so N shards make each segment once between them."""
        first, step = (self.shard[0] - 1, self.shard[1]) if self.shard else (0, 1)
        return itertools.count(first, step)

    def mine(self, number: int) -> bool:
        """Is the ``number``-th (from 1) banked seed this soak's to replay? All are, except with ``--shard``."""
        return self.shard is None or (number - 1) % self.shard[1] == self.shard[0] - 1


class Soak:
    def __init__(self, opts: SoakOptions, display: SoakDisplay) -> None:
        self.o = opts
        self.display = display
        self.root = Path(opts.out)
        self.totals = Totals()
        self.segments: list[dict[str, Any]] = []
        self.replays: list[dict[str, Any]] = []
        self.banked: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []  # banked seeds of other queues, not replayed
        self.coordinator: Any = None
        self.segment_name = "starting"
        self.segment_dir: Path | None = None
        self.stopping = 0
        self.in_check = False
        self.started = time.time()
        self.status = "running"
        self.kept_failed = 0
        self.budget_start: float | None = None  # when the segments started (replays come first)

    # -- the whole soak ---------------------------------------------------------------------------
    def run(self) -> ExitCode:
        # Load the checker and the reports (pandas, matplotlib: seconds, ~200 MB) before anything
        # runs: a second Ctrl-C landing inside their first import, at the first checkpoint, left
        # matplotlib half-imported and every later report failed; and the memory series then starts
        # at its level instead of jumping at the first checkpoint.
        import takeover._internal.pipeline  # noqa: F401
        import takeover.reports.soak  # noqa: F401

        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.write_summary()
            with ResourceWatch(self.root, self._targets, self.o.sample) as self.watch:
                if self.o.replay:
                    entries = self.replayable(seedbank.load_all(list(self.o.replay_from)))
                    for i, entry in enumerate(entries, 1):
                        if self.stopping:
                            break
                        if not self.o.mine(i):
                            continue
                        cfg = RunConfig.from_dict(entry["config"])
                        self.run_segment(cfg, f"replay-{i:02d}", kind="replay")
                self.run_segments()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            self.status = "interrupted" if self.stopping else "finished"
            self._show(self.status, force=True)
            self.write_summary()
            self.write_reports()
        return self.exit_code()

    def replayable(self, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The banked failures of the queue this soak is about; the others are listed, not run.

        Why: a soak's verdict is about its ``--queue``. A bank shared between queues (a CI cache, a
        selftest of a planted bug) would otherwise turn every night of the reference queue red for a
        bug of another queue, and a fix of the queue under test could never make the night green.
        """
        mine = []
        for entry in entries:
            queue = entry["config"].get("queue")
            if queue == self.o.base.queue:
                mine.append(entry)
            else:
                self.skipped.append({"seed": entry["config"].get("seed"), "queue": queue,
                                     "violated": entry.get("violated", [])})  # fmt: skip
        if self.skipped:
            self.display.note(f"[soak] {len(self.skipped)} banked seed(s) of other queues not replayed "
                              f"(this soak is of {self.o.base.queue}): "
                              + ", ".join(f"seed {e['seed']} of {e['queue']}" for e in self.skipped[:5]))
        return mine

    def run_segments(self) -> None:
        self.budget_start = time.time()
        deadline = self.budget_start + self.o.minutes * 60.0
        now = self.budget_start  # the first segment gets the whole budget, as the header announced it
        for index in self.o.segment_indices():
            duration = segment_length(self.o.checkpoint, deadline - now)
            if duration is None or self.stopping:
                break
            cfg = segment_config(self.o.base, index, duration, self.o.pinned)
            self.run_segment(cfg, segment_name(index), kind="segment")
            now = time.time()

    # -- one segment: run, check (the checkpoint), record, prune ----------------------------------------
    def run_segment(self, cfg: RunConfig, name: str, kind: str) -> dict[str, Any]:
        from takeover._internal.stress_run import coordinator_for

        run_dir = self.root / name
        run_dir.mkdir(parents=True, exist_ok=False)
        cfg = dataclasses.replace(cfg, out=str(run_dir))
        self.segment_name, self.segment_dir = name, run_dir
        self.coordinator = coordinator_for(cfg, run_dir, on_progress=self._on_progress)
        result = self.coordinator.run()
        self.coordinator = None
        if result.interrupted:
            self.stopping += 1
        self._show("checking", force=True)
        code, summary = self.check(run_dir)
        seg = self.record(name, kind, cfg, result, code, summary)
        self.settle(seg, run_dir, interrupted=result.interrupted)
        self.display.note(self.checkpoint_line(seg))
        self.segment_name, self.segment_dir = "between segments", None
        self._show("checked")  # the live panel shows the new totals at once
        return seg

    def settle(self, seg: dict[str, Any], run_dir: Path, interrupted: bool) -> None:
        """A checked segment's bookkeeping, wherever it ran: banked when it failed, pruned, added to
        ``soak.json`` and the interim reports.

        An interrupted segment is not banked: its run was cut short at an arbitrary instant, so its seed
        does not reproduce it; the verdict still stands and the folder is kept."""
        if seg["kind"] == "segment" and seg["verdict"] == "invalid" and not interrupted:
            try:
                added = seedbank.bank(self.o.bank, store.read_config(run_dir),
                                      violated=sorted(seg["violations"]), run_dir=str(run_dir))  # fmt: skip
            except (OSError, ValueError, UsageError) as exc:  # the verdict must survive a bank gone bad
                added = False
                seg["bank_error"] = f"{type(exc).__name__}: {exc}"
                self.display.note(f"[soak] could not bank seed {seg['seed']} in {self.o.bank}: {seg['bank_error']}")
            seg["banked"] = added
            if added:
                self.banked.append({"segment": seg["name"], "seed": seg["seed"], "bank": str(self.o.bank)})
        self.prune(run_dir, seg)
        (self.replays if seg["kind"] == "replay" else self.segments).append(seg)
        self.totals.add_segment(seg)
        self.write_summary()
        self.write_reports(interim=True)

    def check(self, run_dir: Path) -> tuple[ExitCode, Summary | None]:
        self.in_check = True  # only here does a second Ctrl-C cut things short (see _on_signal)
        try:
            if self.stopping >= 2:
                raise KeyboardInterrupt
            from takeover._internal.pipeline import check_and_report  # loaded by run() already

            code = check_and_report(run_dir, fail_on_duplicates=self.o.fail_on_duplicates,
                                    max_duplicates_per_1000=self.o.max_duplicates_per_1000).exit_code
            # As written: soak.json takes the segment's counts from the summary's plain JSON values.
            return code, store.read_summary(run_dir)
        except KeyboardInterrupt:
            self.stopping = max(self.stopping, 2)
            self.display.note(f"[soak] the check of {run_dir.name} was cut short; re-check with: "
                              f"takeover check {run_dir}")  # fmt: skip
            return ExitCode.INTERRUPTED, None
        except Exception as exc:  # noqa: BLE001 - the segment's files are kept for a re-check
            self.display.note(f"[soak] the checker failed on {run_dir}: {type(exc).__name__}: {exc}")
            return ExitCode.INCONCLUSIVE, None
        finally:
            self.in_check = False

    def record(self, name: str, kind: str, cfg: RunConfig, result: Any, code: ExitCode,
               summary: Summary | None) -> dict[str, Any]:
        """The segment's entry in soak.json; without a summary (the check was cut short or failed)
        it is inconclusive and counts nothing."""
        t, c = result.tally, result.counters
        valid = summary["valid"] if summary else None
        verdict = "valid" if valid is True else "invalid" if valid is False else "inconclusive"
        if summary and summary["failed_on_duplicates"]:
            verdict = "invalid"
        inv = summary["invariants"] if summary else {}
        dup = summary["duplicates"] if summary else None
        return {
            "name": name, "kind": kind, "seed": cfg.seed, "queue": cfg.queue, "duration": cfg.duration,
            "elapsed": round(result.elapsed, 2), "interrupted": result.interrupted, "mix": swarm.mix(cfg),
            "verdict": verdict, "exit_code": code,
            "registered": result.registered, "finished": int(c.get("done", 0)),
            "faults": {"kills": sum(t.kills.values()), "pauses": sum(t.pauses.values()),
                       "lost_replies": int(c.get("lose_reply", 0)), "slow": int(c.get("slow", 0))},
            "duplicate_tasks": int(dup["tasks"] or 0) if dup else 0,
            "extra_actions": int(dup["extra_actions"] or 0) if dup else 0,
            "violations": {k: v["violations"] for k, v in inv.items() if v["valid"] is False},
            "inconclusive": summary["inconclusive"] if summary else None,
            "history_lines": summary["history"]["lines"] if summary else None,
            "command": cfg.command(),
            "run_dir": str(self.root / name),
        }  # fmt: skip

    def prune(self, run_dir: Path, seg: dict[str, Any]) -> None:
        """Retire a checked segment's bulky files (see the module docstring for what stays)."""
        if self.o.keep == "all" or seg["exit_code"] == ExitCode.INTERRUPTED:
            seg["pruned"] = False
            return
        if seg["verdict"] == "invalid" or seg["exit_code"] not in CHECKED or seg["verdict"] == "inconclusive" \
                and seg["inconclusive"] is None:  # the checker failed: keep all for a re-check
            if self.kept_failed < self.o.keep_failed:
                self.kept_failed += 1
                seg["pruned"] = False
                return
            hist = run_dir / store.HISTORY_FILE
            if hist.exists():
                with hist.open("rb") as src, gzip.open(run_dir / store.HISTORY_GZ_FILE, "wb") as dst:
                    shutil.copyfileobj(src, dst)
        for name in BULKY:
            (run_dir / name).unlink(missing_ok=True)
        seg["pruned"] = True

    # -- summary, verdict ----------------------------------------------------------------------------
    def exit_code(self) -> ExitCode:
        done = self.segments + self.replays
        if any(s["verdict"] == "invalid" for s in done):
            return ExitCode.VIOLATED
        if self.stopping:
            return ExitCode.INTERRUPTED
        if not done or all(s["verdict"] == "inconclusive" for s in done):
            return ExitCode.INCONCLUSIVE
        return ExitCode.VALID

    def verdict(self) -> str:
        done = self.segments + self.replays
        if any(s["verdict"] == "invalid" for s in done):
            return "invalid"
        if any(s["verdict"] == "valid" for s in done):
            return "valid"
        return "inconclusive"

    def summary(self) -> dict[str, Any]:
        rows = read_resources(self.root)
        cols = [c for c in (rows[0] if rows else {}) if c not in ("time", "elapsed", "segment")]
        t = self.totals
        return {
            "status": self.status,
            "pid": os.getpid(),  # "running" with this pid gone = the soak was killed
            "verdict": self.verdict(),
            "exit_code": self.exit_code() if self.status != "running" else None,
            "started": self.started,
            "updated": time.time(),
            "elapsed": round(time.time() - self.started, 1),
            "minutes": self.o.minutes,
            "checkpoint": self.o.checkpoint,
            "command": self.o.command,
            "seed_bank": str(self.o.bank),
            "config": self.o.base.to_dict(),
            "totals": {"segments": len(self.segments), "replays": len(self.replays), "finished": t.finished,
                       "kills": t.kills, "pauses": t.pauses, "lost_replies": t.lost_replies, "slow": t.slow,
                       "duplicate_tasks": t.duplicate_tasks, "violations": t.violations, "invalid": t.invalid},
            "segments": self.segments,
            "replays": self.replays,
            "banked": self.banked,
            "skipped_replays": self.skipped,
            "resources": {"samples": len(rows), "warnings": growth_warnings(rows),
                          "peak": {c: max(float(r[c]) for r in rows) for c in cols},
                          "last": {c: float(rows[-1][c]) for c in cols} if rows else {}},
        }  # fmt: skip

    def write_summary(self) -> None:
        store.write_soak_summary(self.root, self.summary())

    def write_reports(self, interim: bool = False) -> None:
        try:
            from takeover.reports import soak as soak_report

            summary = store.read_soak_summary(self.root)  # the reports show exactly what soak.json holds
            if summary is None:
                raise FileNotFoundError(self.root / store.SOAK_FILE)
            if interim:
                soak_report.write_interim(self.root, summary)
            else:
                soak_report.write(self.root, summary, read_resources(self.root))
        except Exception as exc:  # noqa: BLE001 - soak.json already holds the verdict
            self.display.note(f"[soak] could not write the soak report: {type(exc).__name__}: {exc}")

    def checkpoint_line(self, seg: dict[str, Any]) -> str:
        v = ", ".join(f"{k} {n}" for k, n in seg["violations"].items()) or "none"
        return (f"[soak] checkpoint {seg['name']} (seed {seg['seed']}): {seg['verdict'].upper()} - "
                f"{seg['registered']} tasks, {accepted_finishes(seg['finished'], seg['registered'])}, "
                f"duplicates {seg['duplicate_tasks']} task(s), "
                f"violations: {v}" + (" - seed banked" if seg.get("banked") else ""))  # fmt: skip

    # -- callbacks -----------------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        # The first signal stops after the current segment's check; a second one cuts the check
        # short. It raises only inside the check: raised anywhere else (recording a segment,
        # writing soak.json) it would drop a segment that already ran from the soak's record.
        # While a segment runs, the coordinator's own handler takes the signals.
        self.stopping += 1
        if self.stopping >= 2 and self.in_check:
            raise KeyboardInterrupt

    def _on_progress(self, p: Any) -> None:
        self.totals.live = {"finished": p.done, "kills": p.kills, "pauses": p.pauses,
                            "lost_replies": p.lost_replies, "slow": p.slow}  # fmt: skip
        self._show(p.stage)

    def _show(self, stage: str, force: bool = False) -> None:
        # The clock is the segments' budget (--minutes); replays of banked seeds run before it starts.
        elapsed = 0.0 if self.budget_start is None else time.time() - self.budget_start
        total = max(elapsed, self.o.minutes * 60.0)
        self.display.update(self.totals, elapsed=elapsed, total=total, segment=self.segment_name, stage=stage,
                            force=force)  # fmt: skip

    def _targets(self) -> Targets:
        coord = self.coordinator
        workers: tuple[int, ...] = ()
        service = None
        if coord is not None:
            try:
                workers = coord.supervisor.worker_pids()
                service = coord.supervisor.service_pid()
            except (RuntimeError, AttributeError):
                pass  # the dict changed under us: the next sample will see it
        return Targets(self.segment_name, self.segment_dir, workers, service)
