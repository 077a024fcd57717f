"""The queue contract: the only way takeover touches a queue.

A queue is named ``MODULE:ATTR`` (or ``exec:COMMAND``, a queue in any language behind a process that
speaks this contract over JSON lines: takeover._internal.bridge, docs/reference/protocol.md). ``ATTR(database)`` is
called in every process that uses the queue (the coordinator, each worker incarnation, each scenario reopen)
and returns an object
with the five methods of :class:`LeaseQueue`. ``database`` is the run's database (takeover._internal.db,
chosen with ``--db``): a SQLite file's path (``--db sqlite``, the default), or the
``postgresql://`` URL of a fresh, empty PostgreSQL database (``--db postgres`` or a URL), created
for the run (for each scenario) and dropped afterwards, or the ``redis://HOST:PORT/N`` URL of an empty
Redis database (``--db redis`` or a URL). Every process of a run gets the same string.

Which kinds a queue takes it says with an attribute of ``ATTR``: ``databases = ("postgres",)``,
``("redis",)``, or ``("sqlite", "postgres")`` for both. A queue without one takes SQLite paths only, as every queue did
before PostgreSQL; given the other kind, takeover stops with one line and exit 2 before anything runs.

Everything takeover concludes about a queue comes from what these methods return, recorded in the
history, so a user's own queue is tested exactly like the reference one.

``now`` is seconds on the harness clock: ``time.time()`` in stress runs, logical seconds in the
scenarios. A queue must use the ``now`` it is given and not read a clock of its own; a queue
whose library reads the wall clock needs an adapter (see docs/adapters.md).

Semantics the harness checks (the spec, docs/spec.md):

* ``register(task_id, now)`` makes a task ``pending`` with generation 0. Registering an existing
  task changes nothing.
* ``claim(worker, now, lease)`` atomically takes one claimable task — ``pending``, or ``running``
  with ``lease_until <= now`` — makes it ``running``, raises its generation by one and sets
  ``lease_until = now + lease``. It returns ``(task_id, generation, lease_until)``, or ``None``
  when nothing is claimable.
* ``finish(task_id, generation, outcome, now)`` with outcome ``"done"`` or ``"uncertain"`` is
  accepted (returns True) only when the generation is the current one, the task is ``running``
  and ``now < lease_until``; it then records the outcome and clears the lease.
* ``done`` and ``uncertain`` are never claimable again.
* ``snapshot()`` returns ``(task_id, state, generation, lease_until)`` for every task.
* ``close()`` releases the connection; what was committed survives it.

Optional extensions (used only when present, see :func:`has_extension`; a queue without them is
tested without the feature and the report says so):

* ``register_many(task_ids, now)``: register a batch in one transaction.
* ``extend(task_id, generation, now, lease) -> float | None`` (heartbeats): when the generation is
  the current one, the task is ``running`` and ``now < lease_until``, set ``lease_until`` to
  ``now + lease`` (never shorter than it was) and return it; otherwise return None: the lease is
  lost and the worker must stop before acting.
* ``resolve(task_id, generation, resolution, now) -> bool`` (reconciliation of ``uncertain``):
  resolution ``"done"`` (the action is known to have happened) or ``"pending"`` (known not to have
  happened: claimable again, a retry's claim raises the generation as usual). Accepted (True)
  only when the task is ``uncertain`` at that generation. ``done`` by resolve is terminal.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from takeover._internal import answers, bridge, locate
from takeover._internal.locate import canonical_module
from takeover._internal.queue_types import Claim, SnapshotRow
from takeover.errors import ContractError

STATES = answers.STATES
TERMINAL_STATES = ("done", "uncertain")
OUTCOMES = ("done", "uncertain")

REFERENCE_QUEUE = "takeover.queues.sqlite_lease:SQLiteLeaseQueue"
POSTGRES_REFERENCE_QUEUE = "takeover.queues.postgres_lease:PostgresLeaseQueue"
REDIS_REFERENCE_QUEUE = "takeover.queues.redis_lease:RedisLeaseQueue"


def reference_queue(db: str) -> str:
    """The default queue for a ``--db`` value: the reference queue of that kind of database."""
    from takeover._internal.db import POSTGRES, REDIS, kind

    return {POSTGRES: POSTGRES_REFERENCE_QUEUE, REDIS: REDIS_REFERENCE_QUEUE}.get(kind(db), REFERENCE_QUEUE)



# name -> number of positional parameters after self; the contract in one table.
REQUIRED_METHODS: dict[str, int] = {
    "register": 2,
    "claim": 3,
    "finish": 4,
    "snapshot": 0,
    "close": 0,
}


@runtime_checkable
class LeaseQueue(Protocol):
    """What ``ATTR(database)`` must return."""

    def register(self, task_id: str, now: float) -> None: ...

    def claim(self, worker: str, now: float, lease: float) -> Claim | None: ...

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool: ...

    def snapshot(self) -> list[SnapshotRow]: ...

    def close(self) -> None: ...


class ExtendingQueue(Protocol):
    """A queue with the optional heartbeat method (``extend``); see :func:`has_extension`."""

    def extend(self, task_id: str, generation: int, now: float, lease: float) -> float | None: ...


QueueFactory = Callable[[str], LeaseQueue]

def load_queue_factory(spec: str) -> QueueFactory:
    """Resolve ``MODULE:ATTR`` to a callable, with a one-line error naming what is wrong.

    The module is looked for in the current folder first, as ``python -m`` does (:mod:`takeover._internal.locate`).
    ``exec:COMMAND`` is a queue in any language, spoken to over JSON lines (:mod:`takeover._internal.bridge`).
    """
    if bridge.is_exec(spec):
        return bridge.ExecFactory(spec)
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ContractError(f"--queue must be MODULE:ATTR, got {spec!r}")
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise ContractError(f"--queue must be MODULE:ATTR, got {spec!r}")
    module_name = canonical_module(module_name)
    locate.cwd_first(spec)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ContractError(f"queue module {module_name!r} not found ({exc.name} is missing); "
                            f"{locate.not_found_hint()}") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's module's
        raise ContractError(
            f"queue module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ContractError(f"queue module {module_name!r} has no attribute {attr!r}") from None
    if not callable(factory):
        raise ContractError(f"queue {spec!r} is not callable; ATTR(database) must build the queue")
    return factory


def check_queue_object(queue: object, spec: str) -> None:
    """Fail early, naming the missing or wrong piece, rather than mid-run in a worker."""
    for name, arity in REQUIRED_METHODS.items():
        method = getattr(queue, name, None)
        if method is None:
            raise ContractError(f"queue {spec!r} has no method {name}() (required by the queue contract)")
        if not callable(method):
            raise ContractError(f"queue {spec!r}: {name} is not a method")
        try:
            params = inspect.signature(method).parameters.values()
        except (TypeError, ValueError):
            continue  # builtins without a signature: trust them
        positional = [
            p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        required = [p for p in positional if p.default is p.empty]
        variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
        if len(required) > arity or (len(positional) < arity and not variadic):
            raise ContractError(
                f"queue {spec!r}: {name}() takes {len(positional)} positional argument(s), "
                f"the contract passes {arity}"
            )


def open_queue(spec: str, database: str, factory: QueueFactory | None = None) -> LeaseQueue:
    """Build a queue for ``database`` (a SQLite path or a postgresql:// URL) and check it against the
    contract; a queue that does not take that kind of database is refused first (``databases``)."""
    from takeover._internal.db import check_queue_takes, redact

    factory = factory or load_queue_factory(spec)
    check_queue_takes(spec, factory, database)
    try:
        queue = factory(database)
    except ContractError:
        raise
    except KeyboardInterrupt:  # on this thread a Ctrl-C: the command's to handle (exit 130)
        raise
    except BaseException as exc:  # noqa: BLE001 - the constructor's failure in one line, sys.exit() included
        detail = answers.exception_text(exc)
        raise ContractError(f"queue {spec!r} failed to open {redact(database)}: {detail}") from None
    check_queue_object(queue, spec)
    return queue


# The optional methods; config.json records which of them the queue had (``queue_capabilities``).
EXTENSIONS = ("register_many", "extend", "resolve")


def has_extension(queue: object, name: str) -> bool:
    """Optional contract methods (``extend``, ``resolve``) are used only when present."""
    return callable(getattr(queue, name, None))


def capabilities(queue: object) -> dict[str, bool]:
    """Which optional methods an open queue offers: recorded in the run folder, so that a stored run
    says what its queue could do without anyone importing the queue's code to find out."""
    return {name: has_extension(queue, name) for name in EXTENSIONS}


# -- run-time shape checks ----------------------------------------------------------------------
# check_queue_object() can only see names and arities; what the methods *return* is seen at run
# time, and checked in one place for every command: takeover._internal.answers. These are its checks under the
# names the callers have long used.
validate_claim_result = answers.claim
validate_finish_result = answers.finish
validate_snapshot = answers.snapshot
