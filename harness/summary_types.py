"""The shape of ``summary.json``: one TypedDict per section, as the checker builds it and every reader
(the pipeline, the reports, the soak, the sweep, the selftest) reads it.

Why TypedDicts and not dataclasses: the summary *is* the dict that is written. ``summary.json``
keeps its keys in the order the checker inserts them, and stored runs pin that text byte for byte
(tests/quality/test_stored_runs.py), so the types describe the dict rather than replace it. Each
class lists its keys in the order they are written. A key that only some runs have is
``NotRequired`` (a ``note`` that says why a count is missing); a value that a run may lack is
``| None`` (no ledger, no snapshot). Adding a key to summary.json starts here, and mypy then points
at the builder.

No ``from __future__ import annotations`` here: with it, Python 3.11 cannot see ``NotRequired`` in
the string annotations, and ``__required_keys__`` would list every key
(tests/unit/test_summary_types.py reads them).
"""

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

# Three values, kept in summary.json as JSON keeps them: true (holds), false (violated) and
# "unknown" (the run folder cannot tell: missing evidence, or a run that tested nothing).
Verdict: TypeAlias = bool | Literal["unknown"]
UNKNOWN: Literal["unknown"] = "unknown"

# The note of every invariant of a run whose history is damaged (empty, or cut short): nothing was judged,
# and ``inconclusive`` says why (takeover._internal.checker.verdict.damaged_reason).
NOT_JUDGED = "not judged: the history is damaged"

# One example of a violation or of a duplicate side effect: JSON values (task names, generations,
# process numbers, times since the run started) under keys that differ from one invariant to the next,
# so the reports show them as a table of whatever columns the examples have.
Example: TypeAlias = dict[str, Any]


class Percentiles(TypedDict):
    """A distribution in three numbers; the numbers are None when ``n`` is 0."""

    n: int
    p50: float | None
    p99: float | None
    max: float | None


class InvariantJson(TypedDict):
    """One invariant's verdict, as ``summary["invariants"][name]``."""

    valid: Verdict
    violations: int
    examples: list[Example]
    note: NotRequired[str]  # why the verdict is unknown, or what it was judged on


class DiagnosisJson(TypedDict):
    """One way the run broke an invariant (a pattern), told in words: ``summary["diagnosis"]`` lists
    them, invariant by invariant, the most frequent pattern first (takeover._internal.checker.diagnosis)."""

    invariant: str
    pattern: str  # e.g. "stale_commit", "no_bump", "claim_race" (PATTERNS in takeover._internal.checker.patterns)
    scenario: str  # the spec scenario whose promise it breaks: "S1" ... "S5" (docs/spec.md)
    defect: str  # the likely defect in the queue, in words
    sentence: str  # what happened to the first such violation, the defect and the scenario
    count: int  # violations of this pattern (all patterns of an invariant add up to its violations)
    task_count: int
    tasks: list[str | None]  # the first tasks involved, in the order of their first violation
    replay_task: str | None  # the task to give `takeover replay --task`; None where one process cannot show it
    confirmed_by: NotRequired[str]  # added by the pipeline: the spec scenario departing the same way; kept on re-check


class Network(TypedDict):
    """A run with hosts (takeover._internal.checker.network): where each worker ran, what the network did, and what
    that did to the promises, in words."""

    hosts: int
    placement: dict[str, str]  # worker slot -> host
    faults: dict[str, int]  # partition, conn_kill, db_restart -> how many began
    partitions: dict[str, int]  # shape (one, minority, majority, one_way) -> how many
    stories: list[str]  # up to five: a violation's or a duplicate's network fault, its workers and times
    lost_packets: NotRequired[int]  # with --net-loss: the packets its rules dropped in the faulted phase


class Duplicates(TypedDict):
    """Side effects performed more than once, from the ledger; the counts are None without a ledger."""

    tasks: int | None
    extra_actions: int | None
    # "s5", "lost_lease", "other" (and "clock" in runs with clock faults, "power_loss" in runs with power
    # losses, "partition", "conn_kill", "db_restart" in runs with hosts) -> extra actions; empty without a ledger
    by_cause: dict[str, int]
    examples: list[Example]
    note: NotRequired[str]  # only without a ledger


class DuplicateGate(TypedDict):
    """What ``--fail-on-duplicates`` and ``--max-duplicates-per-1000`` concluded (takeover._internal.checker.gate):
    written only when one of them was given."""

    remedy: str
    promise: str  # what the remedy (and the lease) promise to prevent, in words
    fail_on_duplicates: bool
    max_per_1000: float | None
    promised: int | None  # extra actions that the remedy and the lease promised to prevent; None without a ledger
    promised_by_cause: dict[str, int]
    per_1000: float | None  # every extra action per 1000 tasks
    failed: bool
    reasons: list[str]  # why the gate failed the run, one line each
    note: NotRequired[str]  # only without a ledger


class Claims(TypedDict):
    ok: int
    empty: int
    indeterminate: int


class Finishes(TypedDict):
    accepted: int
    rejected: int
    rejected_stale: int
    rejected_expired: int
    indeterminate: int


class Actions(TypedDict):
    requested: int
    performed: int | None  # None without a ledger


class Counts(TypedDict):
    """What the run did, counted (harness/_internal/checker/counts.py says what each count means)."""

    tasks: int
    final_states: dict[str, int] | None  # state -> tasks, from the snapshot; None without one
    attempted: int
    acknowledged: int
    uncertain: int
    recovered: int
    lost: int | None  # None without a ledger
    claims: Claims
    finishes: Finishes
    actions: Actions
    takeovers: int  # claims of a task with no finish of it accepted since its claim before
    orphan_recovery_s: Percentiles  # per takeover of the next generation: its claim minus that lease's end
    throughput_per_s: float
    duration_s: float
    latency_ms: dict[str, Percentiles]  # per operation that completed at least once
    processes: int
    unpaired_completions: int


class Kills(TypedDict):
    total: int
    by_phase: dict[str, int]
    by_aim: dict[str, int]


class Overruns(TypedDict):
    """Pauses or slow tasks: how many, how many outlasted the holder's lease, and how long they were."""

    total: int
    past_lease: int
    length_s: Percentiles


class LostReplies(TypedDict):
    history: int
    ledger: int | None  # None without a ledger


class StateWindows(TypedDict):
    """An aimed kind's windows that took a task in one state."""

    total: int
    hit: int


class FrozenPoint(TypedDict):
    """A place freeze_in_call stopped workers at: how often, and the statement's text the first time."""

    count: int
    statement: str


class AimedCoverage(TypedDict):
    """One aimed fault kind: how many of its windows were tried, reached and missed, and why each miss."""

    total: int  # invoke records: windows tried
    hit: int  # ended ``hit``: the window was reached
    missed: int  # ended ``missed: <reason>``, or never ended (total = hit + missed)
    reasons: dict[str, int]  # reason -> missed windows, most frequent first
    # Windows that took a task in a given state (duplicate_register: pending, running, done, uncertain), per
    # state: tried and hit. Only for a kind whose end records carry the state (runs from before have none).
    by_state: NotRequired[dict[str, StateWindows]]
    # (freeze_in_call only) where its workers stopped themselves, from their ``info failpoint`` records: per
    # place ("finish before statement 2 of 2"), how often, and the statement's text the first time.
    frozen: NotRequired[dict[str, FrozenPoint]]



class ClockCoverage(TypedDict):
    """Clock faults recorded (docs/history.md): each worker incarnation's skew and each jump of a clock."""

    skewed: int  # incarnations that recorded their clock's offset
    skew_abs_max: float | None  # the largest offset, either way, in seconds; None without any
    jumps: int  # steps of a running worker's clock
    jump_abs_max: float | None  # the largest step, either way, in seconds; None without any


class ModelCoverage(TypedDict):
    """The cells of the coverage space the run's queue calls reached.

    From takeover._internal.coverage_space, judged by takeover._internal.checker.model_coverage."""

    tick: float  # seconds: "edge" is within one tick of lease_until
    extensions: list[str]  # the optional methods the queue had (their ops' cells are possible)
    possible: int  # cells a call can be in, for this queue
    reached: int  # of them, how many the run's calls reached
    cells: dict[str, int]  # cell key -> calls there, in coverage_space.cells() order
    unreached: list[str]  # the possible cells no call reached
    unreached_important: list[str]  # of them, those where the spec says no, or at a lease's edge
    impossible: dict[str, int]  # reason -> how many cells it rules out
    # (Added later) each unreached possible cell -> why no call reached it (takeover._internal.checker.model_coverage).
    unreached_why: NotRequired[dict[str, str]]
    # Only when some call fell in a cell the spec rules out (a queue answering outside it): key -> calls.
    impossible_reached: NotRequired[dict[str, int]]


class Coverage(TypedDict):
    """Which faults hit, and where; and (``model``) which situations the queue was put in."""

    kills: Kills
    pauses: Overruns
    slows: Overruns
    lost_replies: LostReplies
    # Only when the run requested or recorded an aimed fault (older runs have none): kind -> its windows,
    # for each aimed kind requested or recorded, in the order of takeover._internal.checker.ops.AIMED_FAULTS.
    aimed: NotRequired[dict[str, AimedCoverage]]
    # Only when the run requested or recorded clock faults (older runs have none).
    clock: NotRequired[ClockCoverage]
    # The model coverage (added later: stored summaries from before have none).
    model: NotRequired[ModelCoverage]


class Remedy(TypedDict):
    """The remedy's results from the ledger; the counts are None without a ledger, and
    ``deduplicated`` and ``refused`` in a ledger from before results were recorded."""

    name: str
    performed: int | None
    deduplicated: int | None
    refused: int | None
    requests: int | None
    note: NotRequired[str]  # only without a ledger


class Extends(TypedDict):
    ok: int
    lost: int
    indeterminate: int


class Heartbeat(TypedDict):
    interval: float
    extends: Extends
    in_effect: bool
    note: NotRequired[str]  # why heartbeats were not (or not visibly) in effect


class Reconcile(TypedDict):
    """What ``takeover reconcile`` resolved; the section is None when the run was never reconciled."""

    resolves: int
    done: int
    pending: int
    rejected: int
    indeterminate: int
    tasks: list[str | None]  # the first tasks resolved, by name


class FeatureSections(TypedDict):
    remedy: Remedy
    heartbeat: Heartbeat
    reconcile: Reconcile | None


class PowerLoss(TypedDict):
    """``summary.json`` ``power_loss`` (takeover._internal.checker.power): only in runs with power losses."""

    rate: float  # requested power losses per second
    losses: int  # power losses recorded
    at: list[float | None]  # when each began, seconds into the run
    violations: int  # violations the diagnosis blames on a power loss (pattern ``power_loss``)
    by_invariant: dict[str, int]
    broken: list[str]  # each promise broken, in plain words, with its count
    reclaims: int  # finished tasks handed out again after a power loss undid their finish
    reused_generations: int  # claims that got a generation a claim undone by a power loss had returned
    duplicates: int  # extra actions (ledger) on the tasks of those violations
    per_loss: dict[str, float | None]  # reclaims, reused_generations, duplicates per power loss


class HistoryStats(TypedDict):
    lines: int
    torn_tail: bool
    corrupt_lines: int
    corrupt_examples: list[str]


class Summary(TypedDict):
    """``summary.json``: the checker's whole conclusion about one run folder."""

    valid: Verdict
    exit_code: int  # an ExitCode's number: 0, 1 or 3
    inconclusive: str | None  # why the run proves nothing; None when it tested something
    interrupted: bool
    fail_on_duplicates: bool
    failed_on_duplicates: bool
    run_dir: str
    # config.json's values as stored, for the keys in takeover._internal.checker.check.CONFIG_KEYS that it has:
    # a run stored by another version may lack some or hold other types, and the readers only show them.
    config: dict[str, Any]
    invariants: dict[str, InvariantJson]
    diagnosis: NotRequired[list[DiagnosisJson]]  # only when an invariant is violated
    duplicates: Duplicates
    counts: Counts
    coverage: Coverage
    warnings: list[str]
    remedy: Remedy
    heartbeat: Heartbeat
    reconcile: Reconcile | None
    history: HistoryStats
    check_seconds: float
    duplicate_gate: NotRequired[DuplicateGate]  # only when a duplicate gate was asked for (written last)
    power_loss: NotRequired[PowerLoss]  # only in runs with power losses (before the history's stats)
    network: NotRequired[Network]  # only in runs with hosts (before the history's stats)
