"""Every answer of the queue under test, checked in one place: what stress, the scenarios, explore, replay
and check accept from a queue's methods, and the words they use when an answer is not that.

Why one module: the queue is input, as a file is. Its answers are what every verdict is built on, so a
NaN lease end, a 5 MB string for a claim or ``None`` for a finish must be named where it arrives, the
same way wherever it arrives, and never be turned into a number (or a diagnosis of queue semantics)
further on. Two kinds of departure:

* a **malformed** answer (:class:`MalformedAnswer`): not the contract's type or shape (a claim that is
  not ``None`` or ``(str, int >= 1, finite float)``, a finish that is not a bool, NaN, an infinity, a
  task id of a megabyte, ...), or a call that escaped with ``SystemExit``, ``KeyboardInterrupt`` or
  another ``BaseException`` a queue must never raise. The run records it (an ``answer`` record,
  docs/history.md) and is INVALID under the check :data:`CHECK`.
* a **lease departure** (:func:`lease_departure`): a well-formed lease end other than the one asked for,
  ``now + lease`` for a claim, ``max(old, now + lease)`` for an extend. The checker judges
  ``finish_within_lease`` and ``lease_exclusive`` by the lease ends a queue answered, so an answer of
  ``now + 1000 * lease`` would make a late finish look in time: named under :data:`CHECK` too, with both
  values, never passed silently.

The checks are a few ``isinstance`` tests: they sit on the worker's hot path (one claim, one finish per
task). Nothing here imports the runner or the checker; both lean on it.
"""

from __future__ import annotations

import itertools
import math
import reprlib
from typing import Any

from takeover._internal.history import message_of
from takeover._internal.queue_types import Claim, SnapshotRow
from takeover.errors import ContractError

# The check's public name (summary.json's invariants, the report, docs/explanation/invariants.md).
CHECK = "answers_well_formed"
# The history record of a malformed answer: ``{"type": "info", "f": ANSWER_RECORD, "value": METHOD,
# "detail": WHAT, ...}`` right after the call's own ``info`` completion (docs/history.md).
ANSWER_RECORD = "answer"

STATES = ("pending", "running", "done", "uncertain")
# How far a lease end may sit from the one asked for: the libraries behind the adapters keep times in
# microseconds or nanoseconds (litequeue, pgqueuer), so their ``now + lease`` comes back rounded; a
# millisecond is far above that rounding and far below any lease a run uses.
LEASE_TOLERANCE = 1e-3
# Above this a task id is no id a run registered (they are a few characters): a queue handing out
# megabytes is broken, and the history must not carry them.
MAX_TASK_ID = 1024
# Generations are counted by the checker in 64-bit floats: exact up to 2**53.
MAX_GENERATION = 2**53
QUOTE = 120  # characters of an answer quoted in a departure's sentence

class _Short(reprlib.Repr):
    """reprlib's bounded repr, dicts in their own order (reprlib sorts their keys): the answer as it was."""

    def repr_dict(self, x: dict[Any, Any], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = itertools.islice(x, self.maxdict)
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(x[k], level - 1)}" for k in shown]
        return "{" + ", ".join(pieces + (["..."] if len(x) > self.maxdict else [])) + "}"


_repr = _Short()
_repr.maxstring = QUOTE
_repr.maxother = QUOTE
_repr.maxlong = 40
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 6
_repr.maxlevel = 3


def quote(value: object) -> str:
    """``value`` as a short, one-line text: a 5 MB string or a list of them is cut, with its length
    said; an object whose ``__repr__`` raises is named by its type. Never raises."""
    try:
        text = _repr.repr(value)
    except BaseException:  # noqa: BLE001 - a queue's object may break its own repr in any way
        if isinstance(value, int) and not isinstance(value, bool):
            text = f"<an int of {value.bit_length()} bits>"
        else:
            text = f"<{type(value).__name__} object>"
    if isinstance(value, str | bytes) and len(value) > QUOTE:
        text += f" ({len(value)} characters)" if isinstance(value, str) else f" ({len(value)} bytes)"
    text = " ".join(text.split())
    return text if len(text) <= 2 * QUOTE else text[: 2 * QUOTE] + "..."


def exception_text(exc: BaseException) -> str:
    """An exception as one line: its type and message, even when its ``__str__`` raises."""
    text = " ".join(message_of(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MalformedAnswer(ContractError):
    """A queue's answer that is not what the contract says its method returns (or a call that escaped
    with a ``BaseException``). ``method`` and ``what`` (the sentence, the answer quoted) go into the
    history's ``answer`` record; the message is the one line a command prints."""

    def __init__(self, spec: str, method: str, what: str) -> None:
        super().__init__(f"queue {spec!r}: {what}")
        self.method = method
        self.what = what


class QueueEscaped(Exception):  # noqa: N818 - it names what happened, as QueueHung does
    """A queue call that ended with a ``BaseException`` that is not an ``Exception`` (``sys.exit``,
    ``KeyboardInterrupt`` raised by the queue itself, ...). Caught at the contract boundary and raised as
    this ordinary exception, so it is the queue's failure, never the end of a worker or of takeover."""

    def __init__(self, method: str, exc: BaseException) -> None:
        self.method = method
        self.what = f"{method}() raised {exception_text(exc)}, which a queue must never raise (it ends the process)"
        super().__init__(self.what)


def escaped(method: str, exc: BaseException) -> Exception:
    """What a queue call's exception becomes at the boundary: an ``Exception`` as it is, anything else
    (``SystemExit``, ``KeyboardInterrupt``, a bare ``BaseException``) as :class:`QueueEscaped`."""
    return exc if isinstance(exc, Exception) else QueueEscaped(method, exc)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    try:
        return math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an int beyond a float's range
        return False


def claim(value: Any, spec: str) -> Claim | None:
    """``claim()`` must return None or ``(task_id: str, generation: int >= 1, lease_until: finite float)``."""
    if value is None:
        return None
    want = "None or (task_id: str, generation: int, lease_until: float)"
    if type(value) is not tuple and not isinstance(value, tuple | list) or len(value) != 3:
        raise MalformedAnswer(spec, "claim", f"claim() returned {quote(value)}; the contract wants {want}")
    task_id, generation, lease_until = value
    if type(task_id) is not str and not isinstance(task_id, str):
        raise MalformedAnswer(spec, "claim",
                              f"claim() returned task_id {quote(task_id)}, not a str{_bytes_hint(task_id)}")
    if len(task_id) > MAX_TASK_ID:
        raise MalformedAnswer(spec, "claim", f"claim() returned task_id {quote(task_id)}: longer than "
                                             f"{MAX_TASK_ID} characters, no task a run registered")
    if type(generation) is not int and not is_int(generation):
        raise MalformedAnswer(spec, "claim", f"claim() returned generation {quote(generation)}, not an int")
    if not 1 <= generation <= MAX_GENERATION:
        raise MalformedAnswer(spec, "claim", f"claim() returned generation {quote(generation)}; a claim raises "
                                             "the generation to 1 or more")
    if type(lease_until) is not float and not is_number(lease_until):
        raise MalformedAnswer(spec, "claim", f"claim() returned lease_until {quote(lease_until)}, not a number")
    if not _finite(lease_until):
        raise MalformedAnswer(spec, "claim", f"claim() returned lease_until {quote(lease_until)}, not a finite "
                                             "number (the history could not hold it: it would read null)")
    return str(task_id), int(generation), float(lease_until)


def _bool(method: str, value: Any, spec: str) -> bool:
    if value is not True and value is not False:
        raise MalformedAnswer(spec, method, f"{method}() returned {quote(value)}; the contract wants True "
                                            "(accepted) or False")
    return value


def finish(value: Any, spec: str) -> bool:
    """``finish()`` must return a bool: True accepted, False rejected (None is not "rejected")."""
    return _bool("finish", value, spec)


def resolve(value: Any, spec: str) -> bool:
    """``resolve()`` must return a bool, as finish does."""
    return _bool("resolve", value, spec)


def extend(value: Any, spec: str) -> float | None:
    """``extend()`` must return the new lease end (a finite number) or None (the lease is lost)."""
    if value is None:
        return None
    if type(value) is not float and not is_number(value):
        raise MalformedAnswer(spec, "extend", f"extend() returned {quote(value)}; the contract wants the new "
                                              "lease_until or None")
    if not _finite(value):
        raise MalformedAnswer(spec, "extend", f"extend() returned lease_until {quote(value)}, not a finite number")
    return float(value)


def snapshot(rows: Any, spec: str) -> list[SnapshotRow]:
    """``snapshot()`` must return ``[(task_id, state, generation, lease_until | None), ...]``."""
    if not isinstance(rows, list | tuple):
        raise MalformedAnswer(spec, "snapshot", f"snapshot() returned {type(rows).__name__} {quote(rows)}, "
                                                "not a list of rows")
    out: list[SnapshotRow] = []
    for row in rows:
        if not isinstance(row, tuple | list) or len(row) != 4:
            raise MalformedAnswer(spec, "snapshot", f"snapshot() row {quote(row)} is not (task_id, state, "
                                                    "generation, lease_until)")
        task_id, state, generation, lease_until = row
        bad = _row_problem(task_id, state, generation, lease_until)
        if bad:
            raise MalformedAnswer(spec, "snapshot", f"snapshot() row {quote(row)}: {bad}")
        out.append((task_id, state, generation, None if lease_until is None else float(lease_until)))
    return out


def _bytes_hint(value: Any) -> str:
    """Why a text came back as bytes, the usual way: a Redis client that was not asked to decode."""
    if not isinstance(value, bytes):
        return ""
    return " (bytes: decode them; a Redis client answers bytes unless asked, redis-py with decode_responses=True)"


def _row_problem(task_id: Any, state: Any, generation: Any, lease_until: Any) -> str:
    if not isinstance(task_id, str):
        return f"task_id is not a str{_bytes_hint(task_id)}"
    if len(task_id) > MAX_TASK_ID:
        return f"task_id is longer than {MAX_TASK_ID} characters"
    if state not in STATES:
        return f"state {quote(state)} is not one of {', '.join(STATES)}{_bytes_hint(state)}"
    if not is_int(generation):
        return "generation is not an int"
    if not 0 <= generation <= MAX_GENERATION:
        return "generation is not 0 or more"
    if lease_until is not None and not (is_number(lease_until) and _finite(lease_until)):
        return "lease_until is not a finite number or None"
    return ""


def lease_departure(method: str, got: float, now: float, lease: float, old: float | None = None, *,
                    tolerance: float = LEASE_TOLERANCE, context: bool = True) -> str | None:
    """The sentence naming a lease end other than the one asked for, both values in it; None when
    ``got`` is it (within ``tolerance``). A claim asks for ``now + lease``; an extend for
    ``max(old, now + lease)`` (it never shortens a lease; ``old`` unknown: ``now + lease`` or more).
    The scenarios (logical seconds, exact) say it as they always have: ``context=False``, no tolerance."""
    want = now + lease
    if method == "extend" and old is not None:
        want = max(old, want)
    if abs(got - want) <= tolerance:
        return None
    if method == "extend" and old is None and got > want:
        return None
    if not context:
        return f"{method} returned lease_until {got!r}, expected {want:g}"
    how = "now + lease" if want == now + lease else "its lease before, longer than now + lease"
    return f"{method} returned lease_until {got!r}, expected {want!r} ({how}; now={now!r}, lease={lease!r})"
