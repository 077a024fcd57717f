"""The diagnosis' table: every way of breaking each invariant, with the defect it points at, the spec
scenario (docs/spec.md, S1-S5) that pins the promise, and the sentence that tells it.

Why a table apart from the logic (takeover._internal.checker.diagnosis sorts each violation into a pattern here):
the words are what a reader of a failed run sees, and they change on their own (a clearer sentence, a
defect named the same across invariants) far more often than the rules that pick a pattern. A
pattern's key is summary.json's ``diagnosis[].pattern`` and violations.csv's ``pattern``: public names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Fields = dict[str, Any]

# Defects named by patterns of several invariants, so the same defect reads the same everywhere.
NOT_FENCED = "completion is not fenced by the generation"
IDEMPOTENT = ("finish() answers True for a task that is already finished, whatever the generation (an "
              "\"idempotent success\"), so a stale holder believes its commit counted")
REGISTER_RESETS = ("register() of a known task puts it back to pending (an upsert, at generation 0 or at its own) "
                   "instead of changing nothing")
CHECK_THEN_ACT = ("completion checks the generation, then writes by task id in a separate statement (check-then-act, "
                  "not one conditional UPDATE), so a takeover between the check and the write lets a stale holder's "
                  "finish through")
LOST_COMMIT = "finish() answers True without its write being committed (a lost commit)"
# The claim race, as each database makes it: two claims at once take the same task (or one takes a task the
# other's holder finished meanwhile). On SQLite the read of the claimable row is outside the write
# transaction (or the transaction is deferred); on PostgreSQL the pick takes no row lock and the UPDATE
# does not re-check the row's state, so a second claim that waited for the first's lock takes the row too.
NOT_ATOMIC = "the claim reads the claimable row outside its write transaction, so it is not atomic"
NOT_ATOMIC_POSTGRES = ("the claim picks its row without a row lock (no FOR UPDATE SKIP LOCKED) and its UPDATE does "
                       "not re-check that the row is still claimable, so two claims at once take the same task, "
                       "even one finished meanwhile")
NOT_ATOMIC_ANY = ("the claim's read of a claimable task and its write are not one atomic step, so two claims at once "
                  "take the same task, even one finished meanwhile")
CLAIM_RACE = {"sqlite": NOT_ATOMIC, "postgres": NOT_ATOMIC_POSTGRES}
NOT_DURABLE = ("the queue answers before its commit is durable (on PostgreSQL, synchronous_commit = off acknowledges "
               "a commit before its WAL is flushed), so a database crash takes acknowledged commits back")
OFF_BY_ONE = "snapshot() reports the generation off by one"
GENERATION_LOST = "a claim's write of the generation was lost or undone"
GENERATION_UNREPORTED = "the generation is raised where no claim reports it"
CLAIM_RETRIED = ("the claim is not safe to run twice: a claim whose answer the server lost (db_lost_reply) had taken "
                 "the task and raised its generation, and the client's retry took another, so the task waited "
                 "for a lease nobody held (record each call's answer under a request id)")
ROW_LOST = "the queue lost a registered task (or snapshot() leaves rows out)"
POWER_LOSS = ("the queue answers before its commit is on disk, so a power loss takes acknowledged commits back "
              "(SQLite in WAL mode with synchronous=NORMAL syncs the WAL only at checkpoints; synchronous=FULL "
              "syncs every commit before it returns)")


# The vanished tasks of a run on Redis without persistence (--redis-persistence none): no defect of the queue's
# logic, but the configuration's promise, said in words (cause db_restart in violations.csv).
NO_PERSISTENCE = ("the Redis server kept nothing on disk (--redis-persistence none: no append-only file, no "
                  "snapshot), so its restart lost every task; not a defect of the queue's logic: run the server "
                  "with persistence (appendonly yes) to keep them")


def _vanished(f: Fields) -> str:
    return (f"the server restarted without persistence at {_s(f.get('restart_at'))}: {f.get('vanished')} tasks "
            f"vanished (task {f['task']} among them)")

# The same pattern on a run's own Redis server, whose machine lost its power (takeover._internal.run.power.cut_server).
REDIS_POWER_LOSS = ("the Redis server answers before its append-only file is synced (appendfsync everysec syncs "
                    "once a second, so a power loss takes back up to a second of acknowledged writes; appendfsync "
                    "always syncs before every reply: --redis-persistence always)")


def _lost(f: Fields) -> str:
    return f"the power loss at {_s(f.get('power_loss_at'))}"


def _gone_back(f: Fields) -> str:
    """A final state that goes back on an answer given before a power loss, told by what it went back on."""
    problem, task = f.get("problem"), f["task"]
    if problem == "generation lower than one a claim returned":
        return (f"the final snapshot shows task {task} at generation {f.get('gen')}, below generation "
                f"{f.get('highest_claimed_gen')} that a claim had returned before {_lost(f)}: that claim was undone")
    if problem == "missing from the snapshot":
        return f"task {task} is missing from the final snapshot: its registration had returned before {_lost(f)}"
    return (f"the final snapshot shows task {task} {f.get('state')} although a finish of it had been answered True "
            f"before {_lost(f)}: that finish was undone")


@dataclass(frozen=True)
class Pattern:
    """One way of breaking an invariant: the spec scenario it breaks, the likely defect, and what
    happened, told from the first violation's fields (an example's keys, plus the classifier's)."""

    scenario: str
    defect: str
    what: Callable[[Fields], str]
    # False where one process cannot show it (a race, a task passed over among others): the
    # reports then do not offer ``takeover replay`` as the way to confirm it.
    replay: bool = True
    # The invariant whose diagnosis this pattern inherits (its violations are that one's consequence).
    follows: str | None = None
    # The defect's words per database kind (``sqlite``, ``postgres``, ...), where the same mistake is made
    # differently on each; ``defect`` is the SQLite one, and ``elsewhere`` what any other database gets.
    by_database: dict[str, str] | None = None
    elsewhere: str | None = None

    def defect_on(self, database: str) -> str:
        """The defect in the words of the run's database kind (:func:`database_kind`)."""
        if self.by_database is None:
            return self.defect
        return self.by_database.get(database, self.elsewhere or self.defect)


def database_kind(config: dict[str, Any]) -> str:
    """``sqlite``, ``postgres`` or a URL's scheme (``redis``): the kind of database a run's config.json names.
    (The checker reads the run folder only, so this is worked out here, not by takeover._internal.db.)"""
    value = str(config.get("db") or "sqlite")
    if value == "postgres" or value.startswith(("postgresql://", "postgres://")):
        return "postgres"
    if "://" in value:
        return value.partition("://")[0]
    return value


def _claim_race(what: Callable[[Fields], str], scenario: str = "S1") -> Pattern:
    """A claim race's pattern: the words per database, never offered for a one-process replay."""
    return Pattern(scenario, NOT_ATOMIC, what, replay=False, by_database=CLAIM_RACE, elsewhere=NOT_ATOMIC_ANY)


def _s(value: Any) -> str:
    """A time or a length in seconds, as a sentence shows it."""
    return "?" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:g} s"


def _reset(f: Fields) -> str:
    return f"task {f['task']} was registered again"


def _fin(f: Fields) -> str:
    """The finish as a sentence names it: ``finish(uncertain)`` when that was its outcome (a path of its own
    in many queues, and where a defect of that path shows), ``finish()`` otherwise."""
    return "finish(uncertain)" if f.get("outcome") == "uncertain" else "finish()"


def _stale_commit(f: Fields) -> str:
    """A stale holder's finish accepted: after the newer claim returned, or while it was still in flight
    (then the claim's return comes after the finish, and the sentence says so rather than "after")."""
    head = f"{_fin(f)} accepted generation {f['finish_gen']} of task {f['task']} at {_s(f['finish_at'])}"
    if f.get("in_flight"):
        return (f"{head} while the claim that returned generation {f['claimed_gen']} (at {_s(f['claimed_at'])}) "
                "was in flight")
    return f"{head} after generation {f['claimed_gen']} was claimed"


def _probe(f: Fields) -> str:
    """A mid-run probe, as a sentence names it."""
    return f"the snapshot probe #{f.get('probe')} at {_s(f.get('probe_at'))}"


PATTERNS: dict[str, dict[str, Pattern]] = {
    "no_stale_commit": {
        "power_loss": Pattern("S3", POWER_LOSS, replay=False, what=lambda f: (
            f"finish() accepted generation {f['finish_gen']} of task {f['task']} at {_s(f['finish_at'])}, after "
            f"generation {f['claimed_gen']} had been claimed: that claim was undone by {_lost(f)}, so the older "
            f"generation was current again")),
        "stale_commit": Pattern("S3", NOT_FENCED, lambda f: _stale_commit(f)),
        "check_then_act": Pattern("S3", CHECK_THEN_ACT, replay=False, what=lambda f: _stale_commit(f)),
        "claim_race": _claim_race(lambda f: (
            f"a claim of task {f['task']} that was in flight when finish() of generation {f['finish_gen']} was "
            f"accepted at {_s(f['finish_at'])} took the finished task again as generation {f['claimed_gen']} (the "
            f"claim returned at {_s(f['claimed_at'])})")),
        "accepted_when_finished": Pattern("S3", IDEMPOTENT, lambda f: (
            f"finish() of generation {f['finish_gen']} of task {f['task']} was answered True at "
            f"{_s(f['finish_at'])}, after generation {f['claimed_gen']} had taken the task over and finished it")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"finish() accepted generation {f['finish_gen']} of task {f['task']} at {_s(f['finish_at'])} after "
            f"generation {f['claimed_gen']} was claimed; {_reset(f)} in between")),
    },
    "finish_within_lease": {
        "late_finish": Pattern("S2", "completion does not check now < lease_until", lambda f: (
            f"{_fin(f)} accepted generation {f['gen']} of task {f['task']} at {_s(f['now'])}, {_s(f['late_by'])} "
            f"after its lease ran out at {_s(f['lease_until'])}")),
        "late_after_takeover": Pattern("S3", NOT_FENCED, follows="no_stale_commit", what=lambda f: (
            f"{_fin(f)} accepted generation {f['gen']} of task {f['task']} at {_s(f['now'])}, after its lease ran "
            f"out at {_s(f['lease_until'])} and generation {f['newer_gen']} had claimed the task (the finish was "
            f"judged by the new holder's lease)")),
        "accepted_when_finished": Pattern("S3", IDEMPOTENT, lambda f: (
            f"finish() of generation {f['gen']} of task {f['task']} was answered True at {_s(f['now'])}, after its "
            f"lease ran out at {_s(f['lease_until'])} and the task was already finished")),
        "unheld_generation": Pattern("S3", "completion does not check that the caller holds the current generation",
                                     lambda f: (
            f"finish() accepted generation {f['gen']} of task {f['task']} from worker #{f['finish_by']}, which no "
            f"claim gave that generation")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"finish() accepted generation {f['gen']} of task {f['task']} at {_s(f['now'])} after its lease ran "
            f"out; {_reset(f)} before it")),
    },
    "no_reclaim_after_terminal": {
        "power_loss": Pattern("S1", POWER_LOSS, replay=False, what=lambda f: (
            f"task {f['task']}'s {f['outcome']} finish of generation {f['finished_gen']}, answered True at "
            f"{_s(f['finished_at'])}, was undone by {_lost(f)}, and the task was handed out again as generation "
            f"{f['reclaimed_gen']} at {_s(f['reclaimed_at'])}")),
        "reclaimed_after_lease": Pattern("S1", "the claim takes a task whose lease time has passed without checking "
                                               "that it is still running", lambda f: (
            f"claim() handed out task {f['task']} again as generation {f['reclaimed_gen']} at "
            f"{_s(f['reclaimed_at'])}, after generation {f['finished_gen']}'s {f['outcome']} finish had taken "
            f"effect, once that generation's lease time had passed")),
        "reclaimed": Pattern("S1", "the claim does not exclude finished tasks (done and uncertain are never "
                                   "claimable)", lambda f: (
            f"claim() handed out task {f['task']} again as generation {f['reclaimed_gen']} at "
            f"{_s(f['reclaimed_at'])}, after generation {f['finished_gen']}'s {f['outcome']} finish had taken "
            f"effect")),
        "db_restart": Pattern("S1", NOT_DURABLE, replay=False, what=lambda f: (
            f"task {f['task']}'s {f['outcome']} finish of generation {f['finished_gen']}, answered True at "
            f"{_s(f['finished_at'])}, was undone by the database restart at {_s(f.get('restart_at'))}, and the task "
            f"was handed out again as generation {f['reclaimed_gen']} at {_s(f['reclaimed_at'])}")),
        "lost_commit": Pattern("S1", LOST_COMMIT, lambda f: (
            f"generation {f['finished_gen']}'s {f['outcome']} finish of task {f['task']} was answered True at "
            f"{_s(f['finished_at'])}, yet the task was handed out again as generation {f['reclaimed_gen']} once "
            f"its lease ran out, and the final snapshot shows it {f['final_state']}")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"claim() handed out task {f['task']} again as generation {f['reclaimed_gen']} at "
            f"{_s(f['reclaimed_at'])} after generation {f['finished_gen']}'s {f['outcome']} finish; {_reset(f)} "
            f"in between")),
    },
    "generation_monotonic": {
        "power_loss": Pattern("S3", POWER_LOSS, replay=False, what=lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])}, which worker "
            f"#{f['previous_by']} had already been given ({f['previous_gen']}) at {_s(f['previous_at'])}: that claim "
            f"was undone by {_lost(f)}, so two holders carried the same fence token")),
        "no_bump": Pattern("S2", "a takeover does not raise the generation, so the fence cannot tell the old "
                                 "holder from the new", lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])}, the generation worker "
            f"#{f['previous_by']} had been given at {_s(f['previous_at'])}")),
        "claim_race": _claim_race(lambda f: (
            f"two claims of task {f['task']} in flight at the same time were both given generation {f['gen']} "
            f"(workers #{f['previous_by']} and #{f['claimed_by']})")),
        "db_restart": Pattern("S1", NOT_DURABLE, replay=False, what=lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])}, which worker "
            f"#{f['previous_by']} had already been given ({f['previous_gen']}) at {_s(f['previous_at'])}: the "
            f"database restart at {_s(f.get('restart_at'))} took that claim back")),
        "went_back": Pattern("S2", "the stored generation went back (a lost or rolled-back write)", lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])}, after generation "
            f"{f['higher_gen']} had been given")),
        "claim_retried": Pattern("S1", CLAIM_RETRIED, replay=False, what=lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])} after generation "
            f"{f['previous_gen']}: a claim whose answer was lost took the generation(s) between")),
        "skipped": Pattern("S1", "the claim raises the generation by more than one", lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])} after generation "
            f"{f['previous_gen']}, and no claim can have taken the generation(s) between")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"claim() gave task {f['task']} generation {f['gen']} at {_s(f['claimed_at'])}, after generation "
            f"{f['higher_gen']} had been given; {_reset(f)} in between")),
    },
    "lease_exclusive": {
        "power_loss": Pattern("S2", POWER_LOSS, replay=False, what=lambda f: (
            f"claim() granted task {f['task']} to worker #{f['granted_to']} at {_s(f['granted_now'])} while "
            f"generation {f['held_gen']}'s lease ran until {_s(f['lease_until'])}: the claim (or heartbeat) that "
            f"granted that lease was undone by {_lost(f)}")),
        "lease_stolen": Pattern("S2", "the claim counts a lease as expired before lease_until <= now", lambda f: (
            f"claim() granted task {f['task']} to worker #{f['granted_to']} as generation {f['granted_gen']} at "
            f"{_s(f['granted_now'])} while generation {f['held_gen']}'s lease ran until {_s(f['lease_until'])} "
            f"({_s(f['overlap_s'])} early)")),
        "session_lease": Pattern("S2", "the lease lives in the holder's database session (a session-level lock), "
                                       "so it ends when the session does, not at lease_until", replay=False,
                                 what=lambda f: (
            f"claim() granted task {f['task']} to worker #{f['granted_to']} as generation {f['granted_gen']} at "
            f"{_s(f['granted_now'])} while generation {f['held_gen']}'s lease ran until {_s(f['lease_until'])} "
            f"({_s(f['overlap_s'])} early), after a network fault had cut worker #{f['held_by']}'s session")),
        "claim_race": _claim_race(lambda f: (
            f"two claims of task {f['task']} in flight at the same time both took it (generations {f['held_gen']} "
            f"and {f['granted_gen']}, workers #{f['held_by']} and #{f['granted_to']}), their leases overlapping "
            f"by {_s(f['overlap_s'])}")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"claim() granted task {f['task']} as generation {f['granted_gen']} while generation {f['held_gen']}'s "
            f"lease (until {_s(f['lease_until'])}) overlapped it; {_reset(f)} in between")),
        "stale_extend": Pattern("S3", "extend() renews the lease without checking the generation, so a stale "
                                      "holder's heartbeat is answered as if it still held the task", lambda f: (
            f"extend() of generation {f['granted_gen']} of task {f['task']} by worker #{f['granted_to']} was "
            f"answered with a new lease at {_s(f['granted_now'])}, after generation {f['held_gen']} had claimed "
            f"the task (worker #{f['held_by']})")),
    },
    "single_finish": {
        "power_loss": Pattern("S1", POWER_LOSS, replay=False, what=lambda f: (
            f"task {f['task']} was finished twice: the first finish was undone by {_lost(f)} and the task "
            f"was handed out and finished again")),
        "accepted_when_finished": Pattern("S3", IDEMPOTENT, lambda f: (
            f"finish() of generation {f['gen']} of task {f['task']} was answered True at {_s(f['finish_at'])} "
            f"although generation {f['earlier_gen']}'s {f['earlier_outcome']} had already finished it")),
        "after_reclaim": Pattern("S1", "the task was handed out again after its first finish (see "
                                       "no_reclaim_after_terminal)", follows="no_reclaim_after_terminal",
                                 what=lambda f: (
            f"task {f['task']} was finished twice (generation {f['earlier_gen']} at {_s(f['earlier_at'])}, "
            f"generation {f['gen']} at {_s(f['finish_at'])}) because it was handed out again in between")),
        "stale_overlap": Pattern("S3", NOT_FENCED, follows="no_stale_commit", what=lambda f: (
            f"task {f['task']} was finished twice: generation {f['earlier_gen']}'s finish, answered True at "
            f"{_s(f['earlier_at'])}, was still under way when generation {f['gen']}'s was invoked at "
            f"{_s(f['finish_at'])}: a stale holder's finish went through after the takeover")),
        "claim_race": _claim_race(lambda f: (
            f"task {f['task']} was finished twice (generation {f['earlier_gen']} at {_s(f['earlier_at'])}, "
            f"generation {f['gen']} at {_s(f['finish_at'])}): the claim that gave generation {f['gen']} was in "
            f"flight when generation {f['earlier_gen']}'s finish was accepted, and took the finished task again")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"task {f['task']} was finished twice (generation {f['earlier_gen']} at {_s(f['earlier_at'])}, "
            f"generation {f['gen']} at {_s(f['finish_at'])}); {_reset(f)} in between")),
    },
    "state_matches_history": {
        "power_loss": Pattern("S1", POWER_LOSS, replay=False, what=lambda f: _gone_back(f)),
        "vanished_on_restart": Pattern("S1", NO_PERSISTENCE, replay=False, what=_vanished),
        "snapshot_behind": Pattern("S1", OFF_BY_ONE, lambda f: (
            f"snapshot() shows task {f['task']} at generation {f['gen']}, one below generation "
            f"{f['highest_claimed_gen']} that a claim returned")),
        "generation_lost": Pattern("S1", GENERATION_LOST, lambda f: (
            f"snapshot() shows task {f['task']} at generation {f['gen']}, below generation "
            f"{f['highest_claimed_gen']} that a claim returned")),
        "generation_unreported": Pattern("S1", GENERATION_UNREPORTED, lambda f: (
            f"snapshot() shows task {f['task']} at generation {f['gen']}, above every generation a claim returned "
            f"({f['highest_claimed_gen']})")),
        "claim_retried": Pattern("S1", CLAIM_RETRIED, replay=False, what=lambda f: (
            f"snapshot() shows task {f['task']} at generation {f['gen']}, above every generation a claim returned "
            f"({f['highest_claimed_gen']}): a claim whose answer was lost took it, and its retry took another task")),
        "stale_overwrite": Pattern("S3", NOT_FENCED, follows="no_stale_commit", what=lambda f: (
            f"task {f['task']} ended {f['state']} at generation {f['gen']}, but the finish accepted for it was "
            f"generation {f['stale_gen']}'s: a stale holder completed the current holder's task")),
        "finish_retried": Pattern("S1", "the finish is not safe to run twice: its first run counted, the server's "
                                        "answer was lost (db_lost_reply), and the client's retry was refused because "
                                        "the task was already done (record each call's answer under a request id, or "
                                        "accept a repeat of the same generation's finish)", replay=False,
                                  what=lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} in the final snapshot, although its holder's "
            f"finish was answered False: the answer to its first run was lost and the retry was refused")),
        "terminal_unexplained": Pattern("S1", "the stored state was written by something other than an accepted "
                                              "finish of that generation", lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} in the final snapshot, but no accepted "
            f"finish of that generation and outcome explains it")),
        "finish_not_durable": Pattern("S1", LOST_COMMIT, follows="no_reclaim_after_terminal", what=lambda f: (
            f"a finish of task {f['task']} was answered True, but the final snapshot shows it {f['state']} at "
            f"generation {f['gen']}")),
        "reopened": Pattern("S1", "a finished task was handed out again (see no_reclaim_after_terminal)",
                            follows="no_reclaim_after_terminal", what=lambda f: (
            f"the final snapshot shows task {f['task']} {f['state']} at generation {f['gen']} although a finish of "
            f"it was accepted before: it was handed out again")),
        "lease_mismatch": Pattern("S2", "the claim stores another lease than it answers (or snapshot() misreports "
                                        "it)", lambda f: (
            f"snapshot() shows task {f['task']} running at generation {f['gen']} with a lease_until other than "
            f"its claim returned")),
        "resolve_not_applied": Pattern("S4", "resolve() answers without storing its resolution", lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']}, not what its last resolve set")),
        "snapshot_malformed": Pattern("S1", "the stored row, or snapshot(), leaves the model's states", lambda f: (
            f"snapshot() shows task {f['task']} {f['problem']} ({f['state']}, generation {f['gen']})")),
        "row_missing": Pattern("S1", ROW_LOST, lambda f: (
            f"task {f['task']} is missing from the final snapshot")),
        "row_invented": Pattern("S1", "the queue holds a task nobody registered (or snapshot() reads another "
                                      "table)", lambda f: f"task {f['task']} is in the final snapshot but was never "
                                                          f"registered"),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"the final snapshot shows task {f['task']} {f['state']} at generation {f['gen']} "
            f"({f['problem']}); {_reset(f)} after it was claimed")),

        # The mid-run probes' (takeover._internal.checker.probes): the same defects, told at the probe that saw them.
        "probe_finish_lost": Pattern("S1", LOST_COMMIT, follows="no_reclaim_after_terminal", what=lambda f: (
            f"a finish of task {f['task']} answered True at {_s(f.get('answered_at'))} was not in the table "
            f"{_s(f.get('later_by'))} later: {_probe(f)} shows it {f['state']} at generation {f['gen']}")),
        "probe_reopened": Pattern("S1", "a finished task was handed out again (see no_reclaim_after_terminal)",
                                  follows="no_reclaim_after_terminal", what=lambda f: (
            f"a finish of task {f['task']} was answered True at {_s(f.get('answered_at'))}, but {_probe(f)} shows "
            f"it {f['state']} at generation {f['gen']}: it was handed out again")),
        "probe_snapshot_behind": Pattern("S1", OFF_BY_ONE, lambda f: (
            f"{_probe(f)} shows task {f['task']} at generation {f['gen']}, one below generation "
            f"{f['highest_claimed_gen']} that a claim had returned {_s(f.get('later_by'))} before")),
        "probe_db_restart": Pattern("S1", NOT_DURABLE, replay=False, what=lambda f: (
            f"{_probe(f)} shows task {f['task']} at generation {f['gen']}, below generation "
            f"{f['highest_claimed_gen']} that a claim had returned {_s(f.get('later_by'))} before: a database "
            "restart in between took the claim back")),
        "probe_generation_lost": Pattern("S1", GENERATION_LOST, lambda f: (
            f"{_probe(f)} shows task {f['task']} {f['state']} at generation {f['gen']}, below generation "
            f"{f['highest_claimed_gen']} that a claim had returned {_s(f.get('later_by'))} before")),
        "probe_claim_retried": Pattern("S1", CLAIM_RETRIED, replay=False, what=lambda f: (
            f"{_probe(f)} shows task {f['task']} {f['state']} at generation {f['gen']}, above every generation a claim "
            f"had returned ({f['highest_claimed_gen']}): a claim whose answer was lost took it, and its retry took "
            "another task")),
        "probe_generation_unreported": Pattern("S1", GENERATION_UNREPORTED, lambda f: (
            f"{_probe(f)} shows task {f['task']} at generation {f['gen']}, above every generation a claim had "
            f"returned ({f['highest_claimed_gen']})")),
        "probe_row_missing": Pattern("S1", ROW_LOST,
                                     lambda f: (
            f"task {f['task']}, registered at {_s(f.get('answered_at'))}, is missing from {_probe(f)}")),
        "probe_reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"{_probe(f)} shows task {f['task']} {f['state']} at generation {f['gen']} ({f['problem']} "
            f"{_s(f.get('later_by'))} before); {_reset(f)} after it was claimed")),
    },
    "no_lost_task": {
        "power_loss": Pattern("S1", POWER_LOSS, replay=False, what=lambda f: _gone_back(f)),
        "vanished_on_restart": Pattern("S1", NO_PERSISTENCE, replay=False, what=_vanished),
        "passed_over": Pattern("S1", "the claim's pick passes over some pending tasks", replay=False, what=lambda f: (
            f"task {f['task']} stayed pending through the run and the drain, never handed out, while tasks "
            f"registered after it were, or claims answered that nothing was claimable")),
        "starved": Pattern("S1", "finished tasks handed out again crowd out the pending ones (see "
                                 "no_reclaim_after_terminal)", follows="no_reclaim_after_terminal", what=lambda f: (
            f"task {f['task']} stayed pending through the run and the drain while claims kept handing out tasks "
            f"that were already finished")),
        "never_claimed": Pattern("S1", "the claim does not hand out every pending task (or the drain ended before "
                                       "it could)", lambda f: (
            f"task {f['task']} stayed pending through the run and the drain, never handed out")),
        "finish_not_durable": Pattern("S1", LOST_COMMIT, follows="no_reclaim_after_terminal", what=lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} after the drain, although a finish of it "
            f"was answered True")),
        "reopened": Pattern("S1", "a finished task was handed out again (see no_reclaim_after_terminal)",
                            follows="no_reclaim_after_terminal", what=lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} after the drain although a finish of it "
            f"was accepted before: it was handed out again")),
        "left_running": Pattern("S2", "an expired lease is not taken over (a claim must take a running task once "
                                      "lease_until <= now)", lambda f: (
            f"task {f['task']} is still running at generation {f['gen']} after the drain")),
        "left_unfinished": Pattern("S2", "a task that was claimed went back to pending and was not handed out "
                                         "again", lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} after the drain, though it had been "
            f"claimed")),
        "terminal_without_action": Pattern("S1", "a finish or a claim wrote another task's row", lambda f: (
            f"task {f['task']} is {f['state']} although no worker ever acted on it")),
        "row_missing": Pattern("S1", ROW_LOST, lambda f: (
            f"task {f['task'] or '(unnamed)'} is missing from the final snapshot")),
        "reset_by_register": Pattern("S1", REGISTER_RESETS, lambda f: (
            f"task {f['task']} is {f['state']} at generation {f['gen']} after the drain; {_reset(f)} after it was "
            f"claimed")),
    },
}
