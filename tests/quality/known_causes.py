"""Histories with a known cause, and the defect the diagnosis must name for each (issue 36).

Why real runs: a diagnosis is only as good as the shapes real defects leave in a history (races, takeovers
in flight, lost replies), and the hand-written histories of test_diagnosis.py are one idealized shape per
defect. Each row here is a real ``takeover stress`` run of a queue whose defect is known: the planted
bugs (takeover.queues.planted, planted_postgres, planted_network), a user's own mistakes
(tests/fixtures/queues/user_mistakes.py, racy_queues.py, postgres_mistakes.py) and mutants of the reference
queue (takeover.mutation). The run's checker inputs are stored compactly, one ``.tar.xz`` per row in
tests/fixtures/known-causes/, so the gate re-checks them in a second each; test_known_causes.py holds every
diagnosis of every row to the row's defect, and every example to its sentence.

Recording a row again (after a change to what a run records), from the repository's root::

    .venv/bin/python -m tests.quality.known_causes --record [NAME ...]

runs the row's command (printed), checks it was caught, and replaces its archive; say why in the commit.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from takeover._internal.checker.patterns import (
    CHECK_THEN_ACT,
    IDEMPOTENT,
    LOST_COMMIT,
    NOT_ATOMIC,
    NOT_ATOMIC_POSTGRES,
    NOT_DURABLE,
    NOT_FENCED,
    PATTERNS,
    REGISTER_RESETS,
)
from takeover._internal.tarballs import extract_within

ROOT = Path(__file__).resolve().parents[2]
ARCHIVES = ROOT / "tests" / "fixtures" / "known-causes"
FIXTURE_QUEUES = ROOT / "tests" / "fixtures" / "queues"
# What a run folder holds that the checker writes (never stored: the test writes them again).
OUTPUTS = ("summary.json", "violations.csv", "report.md", "report.html", "junit.xml", "ledger.sqlite-shm",
           "ledger.sqlite-wal")
SMOKE = ("--profile", "smoke")
POSTGRES = ("--db", "postgres")


def _defect(invariant: str, pattern: str) -> str:
    return PATTERNS[invariant][pattern].defect





@dataclass(frozen=True)
class KnownCause:
    """One stored run: the queue whose defect is known, how it was run, and what its diagnosis must say."""

    name: str
    queue: str
    defect: str  # every diagnosis entry of the run names this defect, and no other
    pattern: tuple[str, str] | None  # the (invariant, pattern) that must be among the run's diagnosis (None: any)
    args: tuple[str, ...] = SMOKE
    seed: int = 1
    user: bool = False  # one of issue 36's user-written mistakes (none of them planted)
    says: str = ""  # words one of the run's sentences must hold (the path the defect is on)
    mutant: str = ""  # a mutant's id (takeover.mutation): the run's queue is that mutant, as a module of its own

    @property
    def archive(self) -> Path:
        return ARCHIVES / f"{self.name}.tar.xz"

    def command(self, out: Path) -> list[str]:
        return [sys.executable, "-m", "takeover", "stress", "--queue", self.queue, "--seed", str(self.seed),
                *self.args, "--out", str(out)]


def _planted(name: str, invariant: str, pattern: str, *, seed: int = 1) -> KnownCause:
    return KnownCause(f"planted-{name}", f"takeover.queues.planted:{name}", _defect(invariant, pattern),
                      (invariant, pattern), seed=seed)


# A mutant's module name (the row's queue) -> the module it mutates.
MUTATED = {"mutant_postgres_lease": "takeover.queues.postgres_lease"}


def _network(name: str, defect: str, pattern: tuple[str, str] | None) -> KnownCause:
    from takeover.queues.planted_network import FAULT_ARGS

    return KnownCause(f"network-{name}", f"takeover.queues.planted_network:{name}", defect, pattern,
                      args=(*SMOKE, *POSTGRES, "--hosts", "2", "--duration", "10", *FAULT_ARGS))


KNOWN: tuple[KnownCause, ...] = (
    # -- the planted bugs on SQLite: the defect test_diagnosis.EXPECTED names on their idealized histories
    _planted("FinishIgnoresGeneration", "no_stale_commit", "stale_commit"),
    _planted("FinishIgnoresLease", "finish_within_lease", "late_finish"),
    _planted("ReclaimsTerminal", "no_reclaim_after_terminal", "reclaimed_after_lease"),
    _planted("NoBumpOnTakeover", "generation_monotonic", "no_bump"),
    _planted("BumpsByTwo", "generation_monotonic", "skipped"),
    _planted("StealsLiveLeases", "lease_exclusive", "lease_stolen", seed=2),
    _planted("IdempotentFinish", "single_finish", "accepted_when_finished", seed=4),
    _planted("FinishNotDurable", "state_matches_history", "finish_not_durable"),
    _planted("SnapshotOffByOne", "state_matches_history", "snapshot_behind"),
    _planted("DropsTasks", "no_lost_task", "passed_over"),
    _planted("NonAtomicClaim", "lease_exclusive", "claim_race"),
    # which invariant shows the reset first depends on the run: the defect is the same
    KnownCause("planted-RegisterReplaces", "takeover.queues.planted:RegisterReplaces", REGISTER_RESETS, None),
    # -- claim races on both databases: the same mistake, in each database's words
    KnownCause("postgres-NonAtomicClaim", "takeover.queues.planted_postgres:NonAtomicClaim", NOT_ATOMIC_POSTGRES,
               ("lease_exclusive", "claim_race"), args=(*SMOKE, *POSTGRES)),
    # -- mutants of the reference queues (takeover.mutation) that a stress run kills
    KnownCause("mutant-postgres-drop-for-update", "mutant_postgres_lease:PostgresLeaseQueue", NOT_ATOMIC_POSTGRES,
               ("lease_exclusive", "claim_race"), args=(*SMOKE, *POSTGRES),
               mutant="postgres_lease:PICK_PENDING:drop-for-update-1"),
    # -- the network era's planted bugs (takeover.queues.planted_network): PostgreSQL on hosts, network faults
    _network("AdvisoryLockLease", _defect("lease_exclusive", "session_lease"), ("lease_exclusive", "session_lease")),
    _network("BlindFinishRetry", NOT_FENCED, ("no_stale_commit", "stale_commit")),
    _network("AsyncCommit", NOT_DURABLE, ("no_reclaim_after_terminal", "db_restart")),
    # -- issue 36's user: six mistakes of their own
    KnownCause("user-ClaimSubqueryNoLock", "postgres_mistakes:ClaimSubqueryNoLock", NOT_ATOMIC_POSTGRES,
               ("lease_exclusive", "claim_race"), args=(*SMOKE, *POSTGRES), user=True),
    # Its uncertain finish checks neither generation nor lease: this run shows the lease half, on that path.
    KnownCause("user-UncertainFinishChecksStateOnly", "user_mistakes:UncertainFinishChecksStateOnly",
               _defect("finish_within_lease", "late_finish"), ("finish_within_lease", "late_finish"), user=True,
               seed=5, says="finish(uncertain) accepted"),  # smoke misses it on seeds 1-4
    KnownCause("user-ClaimReadThenWrite", "racy_queues:ClaimReadThenWrite", NOT_ATOMIC,
               ("lease_exclusive", "claim_race"), user=True),
    KnownCause("user-RegisterResetsUncertain", "user_mistakes:RegisterResetsUncertain", REGISTER_RESETS,
               ("no_reclaim_after_terminal", "reset_by_register"), user=True),
    KnownCause("user-CheckThenActFinish", "user_mistakes:CheckThenActFinish", CHECK_THEN_ACT,
               ("no_stale_commit", "check_then_act"), user=True),
    KnownCause("user-SkewTolerantFinish", "user_mistakes:SkewTolerantFinish",
               _defect("finish_within_lease", "late_finish"), ("finish_within_lease", "late_finish"), user=True),
    KnownCause("user-ExtendIgnoresGeneration", "user_mistakes:ExtendIgnoresGeneration",
               _defect("lease_exclusive", "stale_extend"), ("lease_exclusive", "stale_extend"), user=True,
               args=(*SMOKE, "--heartbeat", "0.2", "--stale-heartbeat-rate", "1"), seed=2),  # smoke: no heartbeats
)
# Kept for the reader: the defects the table names most, by their constants.
NAMED = (CHECK_THEN_ACT, IDEMPOTENT, LOST_COMMIT, NOT_ATOMIC, NOT_ATOMIC_POSTGRES, NOT_FENCED, REGISTER_RESETS)
BY_NAME = {k.name: k for k in KNOWN}


def extract(cause: KnownCause, into: Path) -> Path:
    """The stored run's folder, unpacked under ``into``."""
    folder = into / cause.name
    with tarfile.open(cause.archive, "r:xz") as tar:
        extract_within(tar, folder)
    return folder


def record(cause: KnownCause, tries: int = 8) -> bool:
    """Run the row's command (on its seed, then the next ones until a run is caught: the archive's
    config.json says which) and store that run folder's inputs (everything but the checker's outputs)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FIXTURE_QUEUES), env.get("PYTHONPATH", "")) if p)
    for seed in range(cause.seed, cause.seed + tries):
        with tempfile.TemporaryDirectory() as tmp:
            if cause.mutant:  # the mutant's source as the module the row's queue names, first on the path
                from takeover.mutation.generate import generate

                module, _, attr = cause.queue.partition(":")
                [mutant] = [m for m in generate(MUTATED[module] + ":" + attr) if m.id == cause.mutant]
                (Path(tmp) / f"{module}.py").write_text(mutant.source, encoding="utf-8")
                env["PYTHONPATH"] = os.pathsep.join((tmp, env["PYTHONPATH"]))
            out = Path(tmp) / "run"
            cmd = KnownCause(**{**cause.__dict__, "seed": seed}).command(out)
            print("$", " ".join(cmd[1:]), flush=True)
            done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 1:
                print(f"  exit {done.returncode}: not caught on seed {seed}", flush=True)
                continue
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:xz") as tar:
                for path in sorted(out.iterdir()):
                    if path.is_file() and path.name not in OUTPUTS:
                        info = tar.gettarinfo(str(path), arcname=path.name)
                        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                        with path.open("rb") as f:
                            tar.addfile(info, f)
            ARCHIVES.mkdir(parents=True, exist_ok=True)
            cause.archive.write_bytes(buf.getvalue())
            print(f"wrote {cause.archive.relative_to(ROOT)} ({len(buf.getvalue()) // 1024} KiB, seed {seed})")
            return True
    print(f"{cause.name}: not caught on seeds {cause.seed}-{cause.seed + tries - 1}", flush=True)
    return False


if __name__ == "__main__" and sys.argv[1:2] == ["--record"]:
    missed = [name for name in sys.argv[2:] or list(BY_NAME) if not record(BY_NAME[name])]
    sys.exit(f"not recorded: {', '.join(missed)}" if missed else 0)
