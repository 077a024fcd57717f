"""The queue contract: the only way takeover touches a queue.

A queue is named ``MODULE:ATTR``. ``ATTR(db_path)`` is called in every process that uses the
queue (the coordinator, each worker incarnation, each scenario reopen) and returns an object
with the five methods of :class:`LeaseQueue`. Everything takeover concludes about a queue comes
from what these methods return, recorded in the history, so a user's own queue is tested exactly
like the reference one.

``now`` is seconds on the harness clock: ``time.time()`` in stress runs, logical seconds in the
scenarios. A queue must use the ``now`` it is given and not read a clock of its own; a queue
whose library reads the wall clock needs an adapter (see docs/adapters.md).

Semantics the harness checks (the spec, ``scenarios-en.md``):

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
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from harness.errors import ContractError

STATES = ("pending", "running", "done", "uncertain")
TERMINAL_STATES = ("done", "uncertain")
OUTCOMES = ("done", "uncertain")

Claim = tuple[str, int, float]
SnapshotRow = tuple[str, str, int, float | None]

REFERENCE_QUEUE = "harness.queues.sqlite_lease:SQLiteLeaseQueue"

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
    """What ``ATTR(db_path)`` must return."""

    def register(self, task_id: str, now: float) -> None: ...

    def claim(self, worker: str, now: float, lease: float) -> Claim | None: ...

    def finish(self, task_id: str, generation: int, outcome: str, now: float) -> bool: ...

    def snapshot(self) -> list[SnapshotRow]: ...

    def close(self) -> None: ...


QueueFactory = Callable[[str], LeaseQueue]


def load_queue_factory(spec: str) -> QueueFactory:
    """Resolve ``MODULE:ATTR`` to a callable, with a one-line error naming what is wrong."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ContractError(f"--queue must be MODULE:ATTR, got {spec!r}")
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise ContractError(f"--queue must be MODULE:ATTR, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ContractError(f"queue module {module_name!r} not found ({exc.name} is missing)") from None
    except Exception as exc:  # noqa: BLE001 - any import-time failure is the user's module's
        raise ContractError(
            f"queue module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    try:
        factory = getattr(module, attr)
    except AttributeError:
        raise ContractError(f"queue module {module_name!r} has no attribute {attr!r}") from None
    if not callable(factory):
        raise ContractError(f"queue {spec!r} is not callable; ATTR(db_path) must build the queue")
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


def open_queue(spec: str, db_path: str, factory: QueueFactory | None = None) -> LeaseQueue:
    """Build a queue for ``db_path`` and check it against the contract."""
    factory = factory or load_queue_factory(spec)
    try:
        queue = factory(db_path)
    except ContractError:
        raise
    except Exception as exc:  # noqa: BLE001 - report the user's constructor failure in one line
        raise ContractError(f"queue {spec!r} failed to open {db_path}: {type(exc).__name__}: {exc}") from None
    check_queue_object(queue, spec)
    return queue


def has_extension(queue: object, name: str) -> bool:
    """Optional contract methods (``extend``, ``resolve``) are used only when present."""
    return callable(getattr(queue, name, None))
