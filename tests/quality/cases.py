"""Hand-written histories with known verdicts, one or more per invariant, valid and invalid.

Each case builds a :class:`Run` and names the invariants that must be violated (an empty set means
every invariant must hold). Times are seconds; the lease is 5 s unless a case says otherwise. A
correct queue's behaviour under SIGKILL (open or info operations) must never be flagged, so most
valid cases are about indeterminate operations.

A case's name is its stable handle: where a rule of the checker exists because of one case, the
checker's comments cite it by name (``case killed_mid_extend_then_taken_over in
tests/quality/cases.py``), so rename a case only together with those comments.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.quality.builder import Run, one_task

CASES: dict[str, tuple[Callable[[], Run], set[str]]] = {}


def case(*violated: str):
    def wrap(fn: Callable[[], Run]) -> Callable[[], Run]:
        CASES[fn.__name__] = (fn, set(violated))
        return fn
    return wrap


def _two_workers() -> Run:
    r = Run()
    r.register("a", "b")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    return r


# ---- valid ----------------------------------------------------------------------------------
@case()
def clean_run() -> Run:
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.work(2, 1.5, "b", 1)
    r.claim(1, 4, None, status="empty")
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case()
def killed_claim_explains_gap() -> Run:
    """w1 dies inside claim(); it may have taken generation 1 of a, so w2's generation 2 is fine."""
    r = _two_workers()
    r.claim(1, 0, None, status="open")
    r.kill(1, 0.005, phase="claiming")
    r.work(2, 0.5, "b", 1)
    r.claim(2, 6, "a", 2)  # after the lost claim's lease (0 + 5) ran out
    r.action(2, 6.5, "a", 2)
    r.finish(2, 7, "a", 2)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case()
def killed_claim_explains_final_generation() -> Run:
    """The last claim of b died mid-call; the snapshot shows the generation it took, still running."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.claim(2, 2, None, status="open")
    r.kill(2, 2.005, phase="claiming")
    r.spawn(3, "w2", t=2.1)
    r.claim(3, 8, "b", 2)
    r.action(3, 8.5, "b", 2)
    r.finish(3, 9, "b", 2)
    r.snap(("a", "done", 1, None), ("b", "done", 2, None))
    return r


@case()
def killed_finish_explains_terminal_state() -> Run:
    """w1's finish never returned (SIGKILL mid-finish), yet it took effect: the task is done."""
    r = _two_workers()
    r.claim(1, 1, "a", 1)
    r.action(1, 2, "a", 1)
    r.finish(1, 3, "a", 1, status="open")
    r.kill(1, 3.001, phase="finishing", aim="during_finish", task="a", gen=1)
    r.work(2, 4, "b", 1)
    r.claim(2, 10, None, status="empty")  # a is not claimable again: the finish took effect
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case()
def killed_finish_that_did_not_happen() -> Run:
    """The same kill, but this time the finish had not taken effect: a is reclaimed and redone (S5)."""
    r = _two_workers()
    r.claim(1, 1, "a", 1)
    r.action(1, 2, "a", 1)
    r.finish(1, 3, "a", 1, status="info")
    r.kill(1, 3.02, phase="acted", aim="after_action", task="a", gen=1)
    r.work(2, 4, "b", 1)
    r.work(2, 7, "a", 2)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case()
def paused_holder_late_finish_rejected() -> Run:
    """S2/S3: w1 is frozen past its lease, w2 takes over; w1's late action duplicates, its finish is refused."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.pause_start(1, 1, 8, task="a", gen=1, phase="working")
    r.work(2, 0.2, "b", 1)
    r.claim(2, 6, "a", 2)
    r.action(2, 6.5, "a", 2)
    r.finish(2, 7, "a", 2)
    r.pause_end(1, 9)
    r.action(1, 9.1, "a", 1)
    r.finish(1, 9.2, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case()
def overlapping_claims_across_processes() -> Run:
    """w2's claim is recorded as invoked before w1's returned: the order is unknown, not a violation."""
    r = _two_workers()
    r.claim(1, 0, "a", 1, done=5.2)  # a slow return: the record lands after the lease has run out
    r.claim(2, 5.1, "a", 2, done=5.3)
    r.action(2, 5.5, "a", 2)
    r.finish(2, 6, "a", 2)
    r.work(1, 6, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case()
def lost_reply_uncertain() -> Run:
    """S4: the service performed the action but the reply was lost; uncertain is terminal."""
    r = _two_workers()
    r.claim(1, 1, "a", 1)
    r.rec(2, 1, "invoke", "lose_reply", target=1, task="a", gen=1)
    r.action(1, 2, "a", 1, status="info")
    r.rec(3, 1, "ok", "lose_reply", target=1)
    r.finish(1, 3.1, "a", 1, "uncertain")
    r.work(2, 1, "b", 1)
    r.snap(("a", "uncertain", 1, None), ("b", "done", 1, None))
    return r


@case()
def heartbeat_extends_the_lease() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.rec(4, 1, "invoke", "extend", task="a", gen=1, now=4, lease=5)
    r.rec(4.01, 1, "ok", "extend", task="a", gen=1, lease_until=9)
    r.action(1, 6, "a", 1)
    r.finish(1, 7, "a", 1)
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case()
def killed_mid_extend_then_taken_over() -> Run:
    """w1 dies inside a heartbeat; its lease (maybe extended to 7) runs out and w2 takes over at 8.
    A correct queue under SIGKILL: nothing to flag (the checker once raised a KeyError here)."""
    r = _two_workers()
    r.spawn(3, "w3")
    r.claim(1, 0, "a", 1)
    r.extend(1, 2, "a", 1, status="open")
    r.kill(1, 2.001, task="a", gen=1)
    r.work(2, 8, "a", 2)
    r.work(3, 0, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case()
def info_extend_then_finish_in_the_extended_lease() -> Run:
    """A heartbeat that raised (info) may have moved the lease to 8: a finish at now=6 is then legal."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.extend(1, 3, "a", 1, status="info")
    r.action(1, 4, "a", 1)
    r.finish(1, 6, "a", 1)
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


def _uncertain_then_resolved_pending() -> Run:
    """a's action timed out, its finish recorded uncertain; after the drain, reconcile found the
    action never happened and resolved a back to pending for a retry."""
    r = Run()
    r.register("a")
    r.spawn(1, "w1")
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1, status="info", performed=False)
    r.finish(1, 2, "a", 1, "uncertain")
    r.run_event(3, "drain_end")
    r.resolve(4, "a", 1, "pending")
    r.spawn(3, "w3", t=5)
    return r


@case()
def retry_after_resolve_killed_while_running() -> Run:
    """The retry claimed generation 2 and was killed. The uncertain finish belongs to the epoch
    before the reopening: running at 2 is what the history says."""
    r = _uncertain_then_resolved_pending()
    r.claim(3, 5, "a", 2)
    r.kill(3, 5.5, task="a", gen=2)
    r.snap(("a", "running", 2, 10.0))
    return r


@case()
def retry_after_resolve_claim_killed_mid_call() -> Run:
    """The retry's claim was killed mid-call but took effect: running at 2."""
    r = _uncertain_then_resolved_pending()
    r.claim(3, 5, None, status="open")
    r.kill(3, 5.005, phase="claiming")
    r.snap(("a", "running", 2, 10.0))
    return r


@case()
def retry_after_resolve_claim_killed_mid_call_no_effect() -> Run:
    """The same kill, but the claim had not taken effect: a is still pending at 1."""
    r = _uncertain_then_resolved_pending()
    r.claim(3, 5, None, status="open")
    r.kill(3, 5.005, phase="claiming")
    r.snap(("a", "pending", 1, None))
    return r


@case()
def retry_after_resolve_done() -> Run:
    r = _uncertain_then_resolved_pending()
    r.work(3, 5, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@case()
def retry_claimed_within_the_old_lease_after_reopening() -> Run:
    """The resolve back to pending cleared the lease: a retry at now=4.5 (< 5) is legal."""
    r = _uncertain_then_resolved_pending()
    r.work(3, 4.5, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@case("state_matches_history")
def retry_after_resolve_skips_generations() -> Run:
    """One killed claim after the reopening explains generation 2, not 3."""
    r = _uncertain_then_resolved_pending()
    r.claim(3, 5, None, status="open")
    r.kill(3, 5.005, phase="claiming")
    r.snap(("a", "running", 3, 10.0))
    return r


@case()
def chained_info_extends_excuse_a_late_finish() -> Run:
    """Two heartbeats that raised: the first (at 4) may have moved the lease to 9, so the second
    (at 8) may have moved it to 13; a finish at now=12 is then legal."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.extend(1, 4, "a", 1, status="info")
    r.extend(1, 8, "a", 1, status="info")
    r.action(1, 11, "a", 1)
    r.finish(1, 12, "a", 1)
    r.snap(("a", "done", 1, None))
    return r


@case()
def info_claim_then_running_at_the_end_is_lost_only() -> Run:
    """A database-is-locked claim (info) may have claimed b; b still running at the end is a lost task,
    but nothing else: its generation and state are explained."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.claim(2, 2, None, status="info")
    r.snap(("a", "done", 1, None), ("b", "running", 1, 7.0))
    return r


CASES["info_claim_then_running_at_the_end_is_lost_only"] = (info_claim_then_running_at_the_end_is_lost_only,
                                                            {"no_lost_task"})


# ---- a task registered again: a correct queue changes nothing -------------------------------
# The contract: registering a known task changes nothing. These runs register tasks again while
# they are pending, running and done, from the coordinator and from workers (several at once, one
# batch naming a task twice, outcomes unknown); the queue ignored every one, so every invariant
# holds and no count moves (tests/quality/test_reregister.py compares each with the same run
# without the repeated registrations).
@case()
def reregister_pending_task() -> Run:
    """The coordinator registers b again while it is pending, twice in one batch."""
    r = _two_workers()
    r.reregister(0.5, 0, "b", "b", "a")
    r.work(1, 1, "a", 1)
    r.work(2, 1.5, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case()
def reregister_running_task_from_workers_at_once() -> Run:
    """While w1 holds a, w2 and w3 register it again at the same instant; w3's outcome is unknown
    and its info record names no task."""
    r = _two_workers()
    r.spawn(3, "w3")
    r.claim(1, 1, "a", 1)
    r.reregister_start(1.5, 2, "a")
    r.reregister_start(1.5, 3, "a")
    r.reregister_end(1.51, 3, "a", status="bare_info")
    r.reregister_end(1.52, 2, "a")
    r.action(1, 2, "a", 1)
    r.finish(1, 3, "a", 1)
    r.work(2, 4, "b", 1)
    r.claim(3, 10, None, status="empty")
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case()
def reregister_done_task_unknown_outcomes() -> Run:
    """After a is done, the coordinator registers it again (info) and a worker is killed inside
    its registration of a; nothing is claimable again."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.reregister(4, 0, "a", status="info")
    r.reregister(4.5, 2, "a", status="open")
    r.kill(2, 4.51, phase="idle")
    r.spawn(3, "w2", t=4.6)
    r.work(3, 5, "b", 1)
    r.claim(1, 9, None, status="empty")
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


# ---- invalid --------------------------------------------------------------------------------
@case("no_reclaim_after_terminal", "generation_monotonic", "single_finish")
def reregister_then_reclaim_of_the_done_task() -> Run:
    """A queue whose register resets the task: a, done at generation 1, is registered again and
    handed out again, at generation 1, and finished a second time."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.reregister(4, 0, "a")
    r.work(2, 5, "a", 1)
    r.work(2, 8, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("generation_monotonic", "lease_exclusive", "no_stale_commit", "state_matches_history")
def reregister_then_claim_with_the_generation_back() -> Run:
    """a was taken over at generation 2 (lease until 11); a worker registers it again at 7 and the
    queue resets it, so w3's claim at 8 gets generation 1 while w2 still holds 2; w2's finish is
    then refused and w3's, of generation 1 after 2 was claimed, accepted."""
    r = _two_workers()
    r.spawn(3, "w3")
    r.claim(1, 0, "a", 1)
    r.kill(1, 1, phase="working", task="a", gen=1)
    r.claim(2, 6, "a", 2)
    r.reregister(7, 3, "a")
    r.claim(3, 8, "a", 1)
    r.action(2, 8.5, "a", 2)
    r.finish(2, 9, "a", 2, status="rejected")
    r.action(3, 9.5, "a", 1)
    r.finish(3, 10, "a", 1)
    r.work(3, 11, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("state_matches_history", "no_lost_task")
def reregister_resets_a_done_task_nobody_claims_again() -> Run:
    """The reset is seen only in the final snapshot: a was finished, registered again, and the
    snapshot shows it pending at generation 0."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.work(2, 1, "b", 1)
    r.reregister(4, 0, "a")
    r.snap(("a", "pending", 0, None), ("b", "done", 1, None))
    return r


@case("no_stale_commit", "finish_within_lease", "single_finish")
def stale_commit_accepted() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.pause_start(1, 1, 8, task="a", gen=1)
    r.work(2, 0.2, "b", 1)
    r.claim(2, 6, "a", 2)
    r.action(2, 6.5, "a", 2)
    r.finish(2, 7, "a", 2)
    r.pause_end(1, 9)
    r.finish(1, 9.2, "a", 1)  # accepted although generation 2 was claimed at 6
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case("no_stale_commit", "finish_within_lease", "state_matches_history")
def stale_commit_wins_the_race() -> Run:
    """The stale holder commits before the new holder finishes; the new holder is refused."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.work(2, 0.2, "b", 1)
    r.claim(2, 6, "a", 2)
    r.finish(1, 7, "a", 1)
    r.action(2, 7.5, "a", 2)
    r.finish(2, 8, "a", 2, status="rejected")
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("finish_within_lease")
def finish_after_lease_expired() -> Run:
    """Nobody reclaimed, but the queue accepted a finish at now=6 for a lease that ended at 5."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.finish(1, 6, "a", 1)
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("no_reclaim_after_terminal", "state_matches_history", "no_lost_task")
def reclaim_after_done() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.work(2, 0, "b", 1)
    r.claim(2, 10, "a", 2)
    r.snap(("a", "running", 2, 15.0), ("b", "done", 1, None))
    return r


@case("no_reclaim_after_terminal", "single_finish")
def reclaim_after_uncertain_and_redo() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1, status="info")
    r.finish(1, 2, "a", 1, "uncertain")
    r.work(2, 3, "a", 2)
    r.work(2, 8, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case("generation_monotonic")
def generation_not_bumped() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.kill(1, 1, phase="working", task="a", gen=1)
    r.claim(2, 6, "a", 1)  # a takeover that reuses generation 1: the fence cannot tell them apart
    r.action(2, 6.5, "a", 1)
    r.finish(2, 7, "a", 1)
    r.work(2, 8, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("generation_monotonic")
def generation_skips_without_cause() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 2)
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case("generation_monotonic")
def generation_gaps_outnumber_killed_claims() -> Run:
    """One killed claim explains one skipped generation, not two."""
    r = _two_workers()
    r.claim(1, 0, None, status="open")
    r.kill(1, 0.005, phase="claiming")
    r.spawn(3, "w1", t=0.1)
    r.work(3, 6, "a", 2)
    r.work(2, 6, "b", 2)
    r.snap(("a", "done", 2, None), ("b", "done", 2, None))
    return r


@case("generation_monotonic", "lease_exclusive", "no_stale_commit", "state_matches_history")
def generation_goes_back_in_time() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 2)
    r.claim(2, 0.01, None, status="open")
    r.kill(1, 1, task="a", gen=2)
    r.kill(2, 1, phase="claiming")
    r.spawn(3, "w1", t=1.1)
    r.work(3, 6, "a", 1)
    r.work(3, 9, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("lease_exclusive")
def lease_granted_twice() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.kill(1, 1, phase="working", task="a", gen=1)
    r.claim(2, 2, "a", 2)  # w1's lease runs until 5
    r.action(2, 2.5, "a", 2)
    r.finish(2, 3, "a", 2)
    r.work(2, 4, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case("lease_exclusive")
def lease_granted_after_an_info_finish() -> Run:
    """w1's finish raised at 2; w2 is granted a at now=2.5. If the finish took effect a was
    reclaimed after it was done, if not its lease (until 5) was granted twice."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.finish(1, 2, "a", 1, status="info")
    r.work(2, 2.5, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@case("lease_exclusive")
def lease_granted_after_a_killed_finish() -> Run:
    """The same as lease_granted_after_an_info_finish, with w1 killed inside its finish."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.finish(1, 2, "a", 1, status="open")
    r.kill(1, 2.001, phase="finishing", aim="during_finish", task="a", gen=1)
    r.work(2, 2.5, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@case("lease_exclusive")
def lease_granted_across_an_info_claim() -> Run:
    """An info claim may have taken generation 2, so generation 3 at now=2 is no gap; but w1's
    generation 1 lease ran until 5."""
    r = one_task()
    r.spawn(3, "w3")
    r.claim(1, 0, "a", 1)
    r.claim(2, 1, None, status="info")
    r.work(3, 2, "a", 3)
    r.action(1, 3.5, "a", 1)
    r.finish(1, 4, "a", 1, status="rejected")
    r.snap(("a", "done", 3, None))
    return r


@case("finish_within_lease")
def late_info_extend_does_not_excuse_a_late_finish() -> Run:
    """A heartbeat invoked at 5.5, after the lease ended at 5, cannot have extended it (a correct
    queue answers lost); the finish accepted at now=6 is late."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.extend(1, 5.5, "a", 1, status="info")
    r.action(1, 5.6, "a", 1)
    r.finish(1, 6, "a", 1)
    r.snap(("a", "done", 1, None))
    return r


@case("finish_within_lease")
def finish_of_a_generation_nobody_was_given() -> Run:
    """w1 was given generation 1 but generation 7 is accepted. Six claims killed mid-call explain
    the snapshot's generation, but a killed process finishes nothing: no claim of w1 returned 7."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.finish(1, 8, "a", 7)
    for k in range(6):
        r.spawn(10 + k, f"w{10 + k}", t=9 + k)
        r.claim(10 + k, 9 + k, None, status="open")
        r.kill(10 + k, 9.005 + k, phase="claiming")
    r.snap(("a", "done", 7, None))
    return r


@case("no_stale_commit", "state_matches_history")
def stale_finish_overlapping_the_takeover() -> Run:
    """w1's finish of generation 1 (within its lease) is still in flight when w2's claim returns
    generation 2 at now=5; both succeed. Finish first: a done task was reclaimed; claim first: a
    stale commit. A correct queue refuses one of them."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.rec(4.9, 1, "invoke", "finish", task="a", gen=1, outcome="done", now=4.9)
    r.claim(2, 5.0, "a", 2, done=5.1)
    r.rec(5.3, 1, "ok", "finish", task="a", gen=1, outcome="done", value="true")
    r.action(2, 5.5, "a", 2)
    r.finish(2, 6, "a", 2, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


@case("single_finish")
def finish_accepted_twice() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.finish(1, 2, "a", 1)
    r.finish(1, 3, "a", 1)  # a retry the queue accepts again
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("state_matches_history", "no_lost_task")
def finish_not_persisted() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.work(2, 0, "b", 1)
    r.snap(("a", "running", 1, 5.0), ("b", "done", 1, None))
    return r


@case("state_matches_history")
def snapshot_reports_wrong_outcome() -> Run:
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1, status="info")
    r.finish(1, 2, "a", 1, "uncertain")
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("state_matches_history")
def snapshot_generation_unexplained() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.work(2, 0, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 3, None))
    return r


@case("state_matches_history", "no_lost_task")
def snapshot_terminal_without_finish() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 0, None))
    return r


@case("no_lost_task")
def task_never_claimed() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.claim(2, 1, None, status="empty")
    r.snap(("a", "done", 1, None), ("b", "pending", 0, None))
    return r


@case("no_lost_task", "state_matches_history")
def task_missing_from_snapshot() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.snap(("a", "done", 1, None))
    return r


@case("no_lost_task")
def done_without_action() -> Run:
    r = _two_workers()
    r.work(1, 0, "a", 1)
    r.claim(2, 0, "b", 1)
    r.finish(2, 1, "b", 1)
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


# ---- duplicate side effects by cause (tests/quality/test_duplicate_causes.py) -----------------
# Each case below has exactly one extra action; DUPLICATE_CAUSES names its expected cause. The
# invariant verdicts are checked like every other case: a double lease is lease_exclusive's too.
DUPLICATE_CAUSES: dict[str, str] = {}


def dup_cause(cause: str, *violated: str):
    def wrap(fn: Callable[[], Run]) -> Callable[[], Run]:
        DUPLICATE_CAUSES[fn.__name__] = cause
        return case(*violated)(fn)
    return wrap


@dup_cause("other", "lease_exclusive")
def double_lease_holder_acted_first() -> Run:
    """w1 acts inside its lease (until 5); the queue grants a to w2 at now=2 anyway, w2 acts and
    finishes, w1's finish is refused. Not lost_lease: w1 never outlived its lease."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.claim(2, 2, "a", 2)
    r.action(2, 2.5, "a", 2)
    r.finish(2, 3, "a", 2)
    r.finish(1, 3.5, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("other", "lease_exclusive")
def double_lease_holder_acted_after_the_thief() -> Run:
    """The same steal, but w1 acts after w2 did, still inside its own lease (until 5): an older
    generation acting after a newer one, which only the lease at the takeover tells from a pause."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.claim(2, 1, "a", 2)
    r.action(2, 1.5, "a", 2)
    r.finish(2, 2, "a", 2)
    r.action(1, 3, "a", 1)
    r.finish(1, 3.5, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("other", "lease_exclusive")
def double_lease_holder_killed_after_acting() -> Run:
    """w1 acts and is SIGKILLed, but w2 is granted a at now=2, inside w1's lease (until 5): a double
    lease, whichever way the earlier holder ended (s5 needs the lease to have run out first)."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.kill(1, 1.5, phase="acted", aim="after_action", task="a", gen=1)
    r.work(2, 2, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("lost_lease")
def paused_holder_acts_before_the_new_holder() -> Run:
    """S2: w1 is frozen from 1 to 8, past its lease (until 5); w2 takes a over at 6; w1 resumes and
    acts at 8.1, before w2 does at 8.5. The earlier action is the stale one, the extra is w2's."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.pause_start(1, 1, 7, task="a", gen=1, phase="working")
    r.claim(2, 6, "a", 2)
    r.pause_end(1, 8)
    r.action(1, 8.1, "a", 1)
    r.finish(1, 8.2, "a", 1, status="rejected")
    r.action(2, 8.5, "a", 2)
    r.finish(2, 9, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("s5")
def killed_after_acting_taken_over_at_expiry() -> Run:
    """S5: w1 acts and is SIGKILLed; w2 takes a over at now=5, the very instant w1's lease ends
    (lease_until <= now is expired, as in the reference queue): not a double lease."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.kill(1, 1.5, phase="acted", aim="after_action", task="a", gen=1)
    r.work(2, 5, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("other", "lease_exclusive")
def double_lease_inside_an_extended_lease() -> Run:
    """w1's heartbeat at 3 moved its lease from 5 to 8; the queue grants a to w2 at now=6 anyway.
    Judged on the claim's lease alone this would read as lost_lease."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.extend(1, 3, "a", 1)
    r.action(1, 4, "a", 1)
    r.claim(2, 6, "a", 2)
    r.action(2, 6.5, "a", 2)
    r.finish(2, 7, "a", 2)
    r.finish(1, 7.5, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("lost_lease")
def slow_holder_outlives_its_extended_lease() -> Run:
    """w1's heartbeat at 3 moved its lease to 8, then it went slow: w2 takes a over at 9, after the
    extended lease ran out, and w1 acts late at 9.5. An extension does not make every takeover a
    double lease."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.extend(1, 3, "a", 1)
    r.claim(2, 9, "a", 2)
    r.action(2, 9.2, "a", 2)
    r.finish(2, 9.3, "a", 2)
    r.action(1, 9.5, "a", 1)
    r.finish(1, 9.6, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


# ---- clock faults: leases judged by the clocks, duplicates told by the real clock ---------------------
# Times in a case are real; a worker with a clock fault records every ``now`` and ``lease_until`` off by
# its offset (Run.clock). A correct queue judges by ``now``, so none of these is a violation.
@dup_cause("clock")
def skewed_taker_takes_over_a_live_lease() -> Run:
    """w2's clock is 3 s ahead: at real 2.5 its now (5.5) is past w1's lease (until 5 on w1's true clock),
    so a correct queue hands it a; both act. On the real clock w1's lease had 2.5 s left."""
    r = one_task()
    r.clock(2, 0, 3.0, kind="clock_skew")
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.claim(2, 2.5, "a", 2)
    r.action(2, 2.7, "a", 2)
    r.finish(2, 2.9, "a", 2)
    r.finish(1, 3, "a", 1, status="rejected")
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("clock")
def holder_clock_jumps_ahead_and_its_finish_is_refused() -> Run:
    """w1 acts at 1; its clock jumps 4.5 s ahead at 1.5, so its finish at real 2 says now 6.5, past its
    lease (until 5) and refused; w2 takes a over once the lease really ran out (6) and acts again."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.clock(1, 1.5, 4.5)
    r.finish(1, 2, "a", 1, status="rejected")
    r.work(2, 6, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@dup_cause("lost_lease")
def skewed_clocks_but_the_holder_really_outlived_its_lease() -> Run:
    """w1's clock is 1 s ahead, so its lease ends at real 5 (its now 6); it is paused from 1 to 6.2. w2 (true
    clock) takes a over at 6, after the lease really ran out; w1 acts first, then w2: clock faults were there,
    but the pause lost the lease."""
    r = one_task()
    r.clock(1, 0, 1.0, kind="clock_skew")
    r.claim(1, 0, "a", 1)
    r.pause_start(1, 1, 5.2, task="a", gen=1, phase="working")
    r.claim(2, 6, "a", 2)
    r.pause_end(1, 6.2)
    r.action(1, 6.3, "a", 1)
    r.finish(1, 6.4, "a", 1, status="rejected")
    r.action(2, 6.5, "a", 2)
    r.finish(2, 7, "a", 2)
    r.snap(("a", "done", 2, None))
    return r


@case()
def holder_clock_jumps_back_and_finishes_inside_its_lease_by_that_clock() -> Run:
    """w1's lease ends at 5; its clock jumps 2 s back at 1.5, so its finish at real 6 says now 4: inside the
    lease the queue judged by that now, and accepted. Leases are judged by the now each call was given: valid."""
    r = one_task()
    r.claim(1, 0, "a", 1)
    r.action(1, 1, "a", 1)
    r.clock(1, 1.5, -2.0)
    r.finish(1, 6, "a", 1)
    r.snap(("a", "done", 1, None))
    return r


# ---- aimed faults: several kinds under way at once, paired per kind ----------------------------
FEW_AT_THE_GATE = "only 1 worker(s) reached the claim gate within 0.6 s"


@case()
def overlapping_aimed_faults() -> Run:
    """Two aimed faults freeze two holders and end in the other order they started; a third kind
    misses twice; a fourth is still under way when the history ends (the coordinator died)."""
    r = Run()
    r.register("a", "b", "c")
    for p in (1, 2, 3):
        r.spawn(p, f"w{p - 1}")
    r.claim(1, 0.1, "a", 1)  # lease until 5.1
    r.action(1, 0.5, "a", 1)
    r.aimed_start("stale_return", 0.6)
    r.pause_start(1, 0.7, 4.0, phase="acted", task="a", gen=1, detail="stale_return")
    r.aimed_start("expire_and_return", 0.8)
    r.claim(2, 0.9, "b", 1)  # lease until 5.9
    r.action(2, 1.0, "b", 1)
    r.pause_start(2, 1.1, 4.8, phase="acted", task="b", gen=1, detail="expire_and_return")
    r.claim(3, 5.2, "a", 2)  # a taken over: lease until 10.2
    r.pause_start(3, 5.3, 4.9, phase="working", task="a", gen=2, detail="stale_return")
    r.pause_end(1, 5.4)
    r.finish(1, 5.41, "a", 1, status="rejected")  # the stale generation's finish, refused
    r.aimed_end("stale_return", 5.45, task="a", gen=1, new_gen=2)
    r.pause_end(3, 5.46)
    r.pause_end(2, 5.95)
    r.finish(2, 5.96, "b", 1, status="rejected")  # called after b's lease ran out, refused
    r.aimed_end("expire_and_return", 5.97, task="b", gen=1, late=0.05)
    for t in (6.0, 6.2):
        r.aimed_start("claim_stampede", t)
        r.aimed_end("claim_stampede", t + 0.1, FEW_AT_THE_GATE)
    r.aimed_start("duplicate_register", 6.4)  # never ends
    r.action(3, 6.45, "a", 2)
    r.finish(3, 6.5, "a", 2)
    r.work(2, 7.0, "b", 2)
    r.work(1, 7.1, "c", 1)
    r.run_event(9.5, "drain_end")
    r.snap(("a", "done", 2, None), ("b", "done", 2, None), ("c", "done", 1, None))
    r.config = {"faults": {"kill": 0.0, "pause": 0.0, **dict.fromkeys(
        ("expire_and_return", "stale_return", "claim_stampede", "duplicate_register"), 0.5)}}
    return r


# ---- mid-run snapshot probes (takeover._internal.checker.probes): judged on what was answered before each ----
# A probe (process -2) reads the whole table mid-run; only answers that returned before its invoke are
# sure to be in it. Operations in flight across it, indeterminate ones, probes that never ended and
# power losses between an answer and the probe must never be flagged; a lost commit and a reset row are.
@case()
def probe_with_operations_in_flight() -> Run:
    """Probe 0 is invoked while w1's claim of a and w2's finish of b are under way: it may show a still
    pending and b still running. Probe 1 comes while w1's claim of b is killed mid-call: it shows b
    at a generation no claim returned, which that claim may have taken."""
    r = _two_workers()
    r.claim(2, 0.5, "b", 1)
    r.action(2, 1, "b", 1)
    r.claim(1, 2, "a", 1, done=2.3)
    r.finish(2, 2.1, "b", 1, done=2.4)
    r.probe(2.2, ("a", "pending", 0, None), ("b", "running", 1, 5.5), done=2.25)
    r.action(1, 3, "a", 1)
    r.finish(1, 3.5, "a", 1, status="info")  # its outcome unknown: a may stay running
    r.probe(3.6, ("a", "running", 1, 7.0), ("b", "done", 1, None))
    r.claim(1, 9, None, status="open")
    r.kill(1, 9.005, phase="claiming")
    r.probe(9.1, ("a", "running", 2, 14.0), ("b", "done", 1, None))
    r.probe(9.3, ("a", "done", 1, None), ("b", "pending", 0, None), status="open")  # killed: never judged
    r.probe(9.5, ("a", "pending", 0, None), status="info")
    r.spawn(3, "w3", t=9.2)
    r.claim(3, 15, "a", 3)
    r.action(3, 15.5, "a", 3)
    r.finish(3, 16, "a", 3)
    r.snap(("a", "done", 3, None), ("b", "done", 1, None))
    return r


@case()
def probe_across_power_loss() -> Run:
    """A power loss kills the probe process mid-read (its rows, written, have no ok: never judged); the
    probe after the reboot sees every answer that survived it."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.claim(2, 1.5, "b", 1)
    r.probe(3.9, ("a", "running", 1, 6.0), ("b", "pending", 0, None), status="open")
    r.power_loss(4, 1, 2)
    r.probe(4.5, ("a", "done", 1, None), ("b", "running", 1, 6.5))
    r.spawn(3, "w3", t=4.2)
    r.claim(3, 7, "b", 2)
    r.action(3, 7.5, "b", 2)
    r.finish(3, 8, "b", 2)
    r.probe(8.5, ("a", "done", 1, None), ("b", "done", 2, None))
    r.snap(("a", "done", 1, None), ("b", "done", 2, None))
    return r


@case("state_matches_history")
def probe_sees_a_lost_commit() -> Run:
    """w1's finish of a was answered True at 3.01; the probe at 3.2 shows a still running at generation
    1: the commit was lost (the final snapshot, taken after a late recovery, does not show it)."""
    r = _two_workers()
    r.work(1, 1, "a", 1)
    r.work(2, 1.5, "b", 1)
    r.probe(3.2, ("a", "running", 1, 6.0), ("b", "running", 1, 6.5))
    r.snap(("a", "done", 1, None), ("b", "done", 1, None))
    return r


@case("state_matches_history")
def probe_sees_a_replaced_row() -> Run:
    """The coordinator registers a again while w1 holds it at generation 1; the probe shows it back at
    pending, generation 0 (an upsert). The run was stopped before its final snapshot: only the probe
    holds the evidence."""
    r = _two_workers()
    r.claim(1, 1, "a", 1)
    r.reregister(2, 0, "a")
    r.probe(2.5, ("a", "pending", 0, None), ("b", "pending", 0, None))
    r.snapshot_error = "interrupted"
    return r


def _stale_heartbeat(extend_status: str, finish_status: str) -> Run:
    """w1 claims a (lease until 5) and is frozen; w2 takes it over at 6 (lease until 11); w1, resumed,
    heartbeats generation 1 at 7, then (if the heartbeat kept its lease) acts and finishes at 8;
    w2 finishes at 9 (the stale_heartbeat fault's window, takeover._internal.run.stale_heartbeat)."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.pause_start(1, 0.5, 6.0, task="a", gen=1, phase="working", detail="stale_heartbeat")
    r.claim(2, 6, "a", 2)
    r.pause_end(1, 6.5)
    r.extend(1, 7, "a", 1, status=extend_status)
    if extend_status == "ok":
        r.action(1, 7.5, "a", 1)
        r.finish(1, 8, "a", 1, status=finish_status)
    r.action(2, 8.5, "a", 2)
    r.finish(2, 9, "a", 2)
    r.work(2, 10, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


@case("lease_exclusive")
def stale_heartbeat_accepted() -> Run:
    """The queue renews generation 1's lease although generation 2 holds the task (a heartbeat that
    ignores the generation): the stale holder is told it holds the task until 12 while w2 does. Its
    finish is refused, so nothing but the heartbeat shows it (invariants._stale_extends)."""
    return _stale_heartbeat("ok", "rejected")


@case()
def stale_heartbeat_refused() -> Run:
    """A correct queue answers the stale holder's heartbeat ``lost``: w1 stops before it acts."""
    return _stale_heartbeat("lost", "rejected")


@case()
def heartbeat_in_flight_with_the_takeover() -> Run:
    """w1's heartbeat is invoked (at now=4.99, inside its lease) before w2's claim returned: either may
    have taken effect first, so its ok proves nothing stale."""
    r = _two_workers()
    r.claim(1, 0, "a", 1)
    r.extend(1, 4.99, "a", 1, done=6.2)
    r.claim(2, 6, "a", 2)
    r.action(2, 8.5, "a", 2)
    r.finish(2, 9, "a", 2)
    r.work(2, 10, "b", 1)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None))
    return r


# ---- a claim run twice by its client's retry (takeover._internal.checker.unknown_claims)
# ----------------------------------
def _retried_claim(db: str, *, unknown: str = "early", lost: bool = True) -> Run:
    """On a run's own Redis server (config ``db`` = ``redis``): w3 dies inside a claim at t=0 (dead at 0.01).
    At t=10 the server's answer to w1's claim is lost and its client sends the claim again: the first run took
    a (registered at 9) and the retry b, which the call returns. A probe at 10.5 sees a running at generation
    1, which no claim returned; once that lease ran out, w2 takes a at generation 2. ``unknown="late"``: w3's
    claim is still in flight then (killed at 10.2). ``unknown="paused"``: w3's claim ended ``info`` at 1 while
    the server was frozen from 0.5 to 9.5, so it ran when the server did."""
    r = Run(config={"db": db})
    r.register("c")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    r.spawn(3, "w3")
    if unknown == "paused":
        r.rec(0.5, 0, "invoke", "db_pause", value="9")
        r.claim(3, 0.6, None, status="info", done=1)
        r.rec(9.5, 0, "ok", "db_pause", value="9")
    else:
        r.claim(3, 0 if unknown == "early" else 9.8, None, status="open")
        r.kill(3, 0.005 if unknown == "early" else 10.2, phase="claiming")
    r.work(2, 1, "c", 1)
    r.register("a", "b", t=9)
    r.rec(10, 1, "invoke", "claim", worker="w1", now=10, lease=5.0)
    if lost:
        r.rec(10.001, 0, "invoke", "db_lost_reply", worker="w1", target=1)
        r.rec(10.005, 0, "ok", "db_lost_reply", worker="w1", target=1, value="40")
    r.rec(10.01, 1, "ok", "claim", task="b", gen=1, lease_until=15, now=10)
    r.probe(10.5, ("a", "running", 1, 15), ("b", "running", 1, 15), ("c", "done", 1, None))
    r.action(1, 11, "b", 1)
    r.finish(1, 12, "b", 1)
    r.work(2, 16, "a", 2)
    r.snap(("a", "done", 2, None), ("b", "done", 1, None), ("c", "done", 1, None))
    return r


@case("generation_monotonic", "state_matches_history")
def retried_claim_orphans_a_generation() -> Run:
    """The only unknown claim had ended (its process dead) seven seconds before a was registered: nothing but
    w1's claim can have taken generation 1 of a, and that call answered b. Found both by the gap (a's claims
    give 2 after 0) and by the probe (a at 1, above every claim)."""
    return _retried_claim("redis")


@case()
def retried_claim_on_a_database_without_known_ends() -> Run:
    """The same history on a database where a dead client's statement may still commit later (PostgreSQL, a
    user's server behind a network): w3's claim may have taken a, so nothing is proved (Jepsen's ``info``)."""
    return _retried_claim("postgres")


@case()
def unknown_claim_alive_explains_the_gap_on_redis() -> Run:
    """On Redis, w3's claim was still in flight when a was taken (killed at 10.2): it may have taken a, so the
    same gap and probe are explained, the lost reply notwithstanding."""
    return _retried_claim("redis", unknown="late")


@case()
def unknown_claim_held_by_a_frozen_server_explains_the_gap() -> Run:
    """w3's claim ended ``info`` at t=1, while the server was frozen (``db_pause`` 0.5-9.5): its bytes ran when
    the server did, after a was registered, so it may have taken a."""
    return _retried_claim("redis", unknown="paused")
