"""The reviewed table of equivalent mutants: mutant id -> why no run can tell it from the unmutated queue.

No tool decides equivalence, so each entry here was read and argued by a person; a mutant that survives
and is not here is a survivor, listed as such. "Equivalent" means: no sequence of contract calls, on any
clock, with any faults, can show the change as a departure from the spec (docs/spec.md). Two kinds are
argued here: changes no contract call can observe (a planner hint, a default no insert uses, a LIMIT the
code reads one row of), and changes of something the spec leaves open (which of several claimable tasks
a claim takes, the order of snapshot rows, what happens to arguments the contract rules out).

The ids must exist in the generated set (a unit test holds the table to that, so a change of the reference
queues cannot leave stale entries behind), and a listed mutant that some stage kills is reported as a
wrong entry, not silently counted equivalent.
"""

from __future__ import annotations

_DEFAULT = "the column's DEFAULT: every INSERT names the generation (0), so the default is never used"
_LIMIT = "LIMIT 2: the claim reads one row of the pick (fetchone), the same first row"
_ORDER = ("which of several claimable tasks a claim takes first: the queue contract promises no order among them "
          "(\"takes a pending task, or a running one whose lease ran out\")")
_HINT = "drops INDEXED BY: a planner hint, the same rows"
_SNAPSHOT_ORDER = "the order of snapshot() rows: the contract sets none, and every reader looks rows up by task id"
_NULL_LEASE = ("only a running task has a lease_until (register leaves it NULL, finish and resolve set it NULL, and "
               "a comparison with NULL is never true), so state = 'running' excludes nothing the lease conjunct keeps")
_PARTIAL_INDEX = ("a partial index's predicate: which rows the index holds, so whether the planner can use it, "
                  "never which rows a query returns")
_LOCK_KEY = ("the advisory lock's key: every process of a run loads the same module, so any constant orders the "
             "schema's creation the same")
_ARGUMENTS = ("argument validation: refuses fewer arguments the contract rules out (NaN, a bool, an empty task id, "
              "an unknown outcome, a lease <= 0); no caller passes them and the queue contract gives them no meaning")

_OPEN_AFTER_CLOSE_PG = (
    "close() that leaves its connection open (`is not None` made `is`: __init__ always connects, so the test is "
    "never true): every call is one autocommit statement, so the open session holds no transaction and no lock; "
    "the dropped queue object's connection is closed when it is collected, and a process that exits ends its "
    "session; no contract call can see the difference")

# The Redis reference's scripts (takeover.queues.redis_lease; operators of takeover.mutation.lua).
_LUA_RANGE = "a longer range of which the pick reads the first element ([1]): the same first element"
_LUA_RETURN = "the register script's return value: register() and register_many() ignore it (they return None)"
_LUA_WORKER = "the task's worker field: no contract call returns it (a snapshot row has no worker)"
_LUA_SAME_END = "> made >=: when the new lease end equals the old one, writing it again changes nothing"

EQUIVALENT: dict[str, str] = {
    "redis_lease:REGISTER:int-7": _LUA_RETURN,
    "redis_lease:REGISTER:int-8": _LUA_RETURN,
    "redis_lease:PICK_EXPIRED:int-4": _LUA_RANGE,
    "redis_lease:PICK_PENDING:int-3": _LUA_RANGE,
    "redis_lease:PICK_PENDING:int-4": _LUA_RANGE,
    "redis_lease:EXTEND:relational-1": _LUA_SAME_END,
    "redis_lease:RESOLVE:drop-call-3": _LUA_WORKER,
    "sqlite_lease:SCHEMA:int-1": _DEFAULT,
    "sqlite_lease:SCHEMA:int-2": _DEFAULT,
    "sqlite_lease:PICK_EXPIRED:drop-conjunct-1": _NULL_LEASE,
    "sqlite_lease:FINISH:drop-conjunct-3": _NULL_LEASE,
    "sqlite_lease:EXTEND:drop-conjunct-3": _NULL_LEASE,
    "sqlite_lease:PICK_EXPIRED:int-2": _LIMIT,
    "sqlite_lease:PICK_PENDING:int-2": _LIMIT,
    "sqlite_lease:PICK_EXPIRED:drop-order-by-1": _ORDER,
    "sqlite_lease:PICK_EXPIRED:order-desc-1": _ORDER,
    "sqlite_lease:PICK_EXPIRED:drop-indexed-by-1": _HINT,
    "sqlite_lease:PICK_PENDING:drop-indexed-by-1": _HINT,
    "sqlite_lease:SQLiteLeaseQueue.claim:constant-1": "the pick selects one column: row[-1] is row[0]",
    "sqlite_lease:SQLiteLeaseQueue.extend:constant-1": "RETURNING gives one column: row[-1] is row[0]",
    "sqlite_lease:SQLiteLeaseQueue.claim:early-return-6": "a bare return before `return None`: the same None",
    # Not here: the register, finish, extend, resolve and register_many no-transaction mutants, listed once as
    # "a transaction around one statement removed". The queue's connection has busy_timeout=0 and waits for the
    # write lock only in write_transaction's own spin; without it the lone statement fails at once with "database
    # is locked" while another worker writes. Explore's overlapping steps show it (a call raised under contention).
    "sqlite_lease:SQLiteLeaseQueue.snapshot:drop-order-by-1": _SNAPSHOT_ORDER,
    "sqlite_lease:SQLiteLeaseQueue.snapshot:order-desc-1": _SNAPSHOT_ORDER,
    "sqlite_lease:check_time:early-return-1": _ARGUMENTS,
    "sqlite_lease:check_time:early-return-2": _ARGUMENTS,
    "sqlite_lease:check_time:boolean-1": _ARGUMENTS,
    "sqlite_lease:check_lease:early-return-1": _ARGUMENTS,
    "sqlite_lease:check_lease:early-return-2": _ARGUMENTS,
    "sqlite_lease:check_lease:early-return-3": _ARGUMENTS,
    "sqlite_lease:check_lease:relational-1": _ARGUMENTS,
    "sqlite_lease:check_lease:constant-1": _ARGUMENTS,
    "sqlite_lease:check_task_id:early-return-1": _ARGUMENTS,
    "sqlite_lease:check_task_id:early-return-2": _ARGUMENTS,
    "sqlite_lease:check_task_id:boolean-1": _ARGUMENTS,
    "sqlite_lease:SQLiteLeaseQueue.finish:early-return-2": _ARGUMENTS,
    "sqlite_lease:SQLiteLeaseQueue.resolve:early-return-2": _ARGUMENTS,
    "sqlite_lease:SQLiteLeaseQueue._rollback:early-return-1": "_rollback is never called by this class (kept for "
                                                              "subclasses that manage their own transactions)",
    "sqlite_lease:SQLiteLeaseQueue._rollback:early-return-2": "_rollback is never called by this class (kept for "
                                                              "subclasses that manage their own transactions)",
    "sqlite_lease:SQLiteLeaseQueue.close:early-return-1": (
        "close() that leaves its connection open: every method commits or rolls back before it returns, so the "
        "connection holds no transaction and no lock; the queue object is dropped after close() and CPython "
        "closes the connection with it (a process that exits closes it too); only the WAL's checkpoint at the "
        "last close is skipped, which no contract call can see"),
    # PostgreSQL
    "postgres_lease:SCHEMA:int-1": _DEFAULT,
    "postgres_lease:SCHEMA:int-2": _DEFAULT,
    **{f"postgres_lease:SCHEMA:{m}": _PARTIAL_INDEX
       for m in ("drop-conjunct-1", "drop-conjunct-2", *(f"state-{n}" for n in range(13, 19)))},
    "postgres_lease:SCHEMA_LOCK:constant-1": _LOCK_KEY,
    "postgres_lease:SCHEMA_LOCK:constant-2": _LOCK_KEY,
    "postgres_lease:PICK_EXPIRED:drop-conjunct-1": _NULL_LEASE,
    "postgres_lease:FINISH:drop-conjunct-3": _NULL_LEASE,
    "postgres_lease:EXTEND:drop-conjunct-3": _NULL_LEASE,
    "postgres_lease:PICK_EXPIRED:drop-order-by-1": _ORDER,
    "postgres_lease:PICK_EXPIRED:order-desc-1": _ORDER,
    "postgres_lease:PICK_PENDING:drop-order-by-1": _ORDER,
    "postgres_lease:PICK_PENDING:order-desc-1": _ORDER,
    "postgres_lease:REGISTER_MANY:drop-order-by-1": _ORDER + "; here the order a batch's tasks get their seq",
    "postgres_lease:REGISTER_MANY:order-desc-1": _ORDER + "; here the order a batch's tasks get their seq",
    "postgres_lease:SNAPSHOT:drop-order-by-1": _SNAPSHOT_ORDER,
    "postgres_lease:SNAPSHOT:order-desc-1": _SNAPSHOT_ORDER,
    "postgres_lease:PostgresLeaseQueue.finish:early-return-2": _ARGUMENTS,
    "postgres_lease:PostgresLeaseQueue.extend:constant-1": "RETURNING gives one column: row[-1] is row[0]",
    "postgres_lease:PostgresLeaseQueue.resolve:early-return-2": _ARGUMENTS,
    **{f"postgres_lease:PostgresLeaseQueue.close:{m}": _OPEN_AFTER_CLOSE_PG
       for m in ("early-return-1", "early-return-2", "relational-1")},
}
