"""Registering tasks with the queue, each with an invoke and a completion in the history.

Why on its own: the coordinator registers a run's tasks at the start and, with ``--arrival-rate``,
a few more on every turn of its loop, and a scripted test registers by hand before it drives a
queue itself. All of them must record registration the same way, because the checker's
``no_lost_task`` and ``state_matches_history`` start from these records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from takeover._internal import answers
from takeover._internal.history import HistoryWriter, error_text
from takeover._internal.run.queue_caller import QueueHung
from takeover.contract import has_extension


def _direct(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit() from the queue is its failure (takeover._internal.answers)
        raise answers.escaped(name, exc) from None


def _failed(hist: HistoryWriter, tid: str, exc: Exception) -> None:
    """A register that raised: ``info``; one that escaped with sys.exit() or a BaseException is also
    recorded as a malformed answer (the ``answer`` record the check answers_well_formed reads)."""
    hist.write("info", "register", task=tid, error=error_text(exc))
    if isinstance(exc, answers.QueueEscaped):
        hist.write("info", answers.ANSWER_RECORD, value="register", task=tid, detail=exc.what)


def register_tasks(
    queue: Any, hist: HistoryWriter, ids: list[str], now: float, call: Callable[..., Any] = _direct
) -> int:
    """Register tasks with an invoke/completion pair each; one transaction when the queue allows.

    ``call(name, fn, *args)`` makes the queue call (the coordinator passes one with a deadline: a
    hung register is ``info``). Returns how many registrations are known to have taken effect.
    """
    if not ids:
        return 0
    for tid in ids:
        hist.write("invoke", "register", task=tid, now=now)
    if has_extension(queue, "register_many"):
        try:
            call("register_many", queue.register_many, ids, now)
        except Exception as exc:  # noqa: BLE001 - unknown outcome, recorded as such
            for tid in ids:
                _failed(hist, tid, exc)
            return 0
        for tid in ids:
            hist.write("ok", "register", task=tid)
        return len(ids)
    count = 0
    for tid in ids:
        try:
            call("register", queue.register, tid, now)
        except QueueHung as exc:  # the queue is wedged: the rest would only wait behind it
            for rest in ids[ids.index(tid) :]:
                hist.write("info", "register", task=rest, error=error_text(exc))
            break
        except Exception as exc:  # noqa: BLE001
            _failed(hist, tid, exc)
            continue
        hist.write("ok", "register", task=tid)
        count += 1
    return count
