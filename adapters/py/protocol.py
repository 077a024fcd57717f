"""takeover's queue contract over JSON lines (docs/reference/protocol.md), the adapter's side, for a queue in
Python that cannot live in takeover's own environment: Python's standard library only, so it runs in any
virtual environment (arq 0.28.0 pins redis-py below 6, takeover's environment has a newer one: the arq
adapter runs in ``.venv-arq``, ``make arq``).

``serve_blocking(hello, open)`` answers with a queue object of synchronous methods (the contract's, as a
Python queue has them: ``serve.py`` hosts any such class); ``serve_async(hello, open)`` with one whose
methods are coroutines, on an event loop that keeps running while the adapter waits for the next request,
so the library's own timers (arq's job timeout) fire when they are due, not at the next call. After
``close`` (or when stdin closes) ``serve_async`` leaves at once: the library's tasks under way are not
cancelled, so no shutdown path of the library runs (a worker takeover ends has crashed, to the library).

Either prints the hello line first, opens the queue on ``TAKEOVER_DB``, then answers each request on stdin,
strictly in order, with ``{"id", "result"}`` or ``{"id", "error"}`` on stdout, and exits when stdin closes
(closing the queue if takeover did not). Nothing else is printed on stdout: logs go to stderr.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

VERSION = 1


def check_time(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number of seconds, got {json.dumps(value)}")
    return float(value)


def check_lease(value: Any) -> float:
    lease = check_time("lease", value)
    if lease <= 0:  # a lease that has run out when granted could never be finished (now < lease_until)
        raise ValueError(f"lease must be positive, got {lease!r}")
    return lease


def check_task_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"task_id must be a non-empty string, got {json.dumps(value)}")
    return value


def check_outcome(value: Any) -> str:
    if value not in ("done", "uncertain"):
        raise ValueError(f"outcome must be done or uncertain, got {json.dumps(value)}")
    return value


def _call(queue: Any, r: dict[str, Any]) -> Any:
    """The queue's method for request ``r``, called with its checked arguments (a coroutine when it is one)."""
    op = r.get("op")
    if op == "register":
        return queue.register(check_task_id(r.get("task_id")), check_time("now", r.get("now")))
    if op == "claim":
        return queue.claim(r.get("worker"), check_time("now", r.get("now")), check_lease(r.get("lease")))
    if op == "finish":
        generation = r.get("generation")
        if isinstance(generation, bool) or not isinstance(generation, int):
            raise ValueError(f"generation must be an integer, got {json.dumps(generation)}")
        return queue.finish(check_task_id(r.get("task_id")), generation, check_outcome(r.get("outcome")),
                            check_time("now", r.get("now")))  # fmt: skip
    if op == "extend":
        return queue.extend(check_task_id(r.get("task_id")), r.get("generation"), check_time("now", r.get("now")),
                            check_lease(r.get("lease")))  # fmt: skip
    if op == "register_many":
        ids = r.get("task_ids")
        if not isinstance(ids, list):
            raise ValueError(f"task_ids must be a list, got {json.dumps(ids)}")
        return queue.register_many([check_task_id(i) for i in ids], check_time("now", r.get("now")))
    if op == "snapshot":
        return queue.snapshot()
    if op == "close":
        return queue.close()
    raise ValueError(f"unknown op {json.dumps(op)}")


def _answer(rid: Any, result: Any) -> bytes:
    """The answer line: tuples as JSON arrays, anything else as it is, so a malformed answer reaches takeover
    as it was given (takeover names it); one that JSON cannot carry is the call's error."""
    try:
        text = json.dumps({"id": rid, "result": result}, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        text = json.dumps({"id": rid, "error": f"an answer JSON cannot carry: {exc}: {result!r:.200}"})
    return (text + "\n").encode()


def _error(rid: Any, exc: BaseException) -> bytes:
    return (json.dumps({"id": rid, "error": f"{type(exc).__name__}: {exc}"}) + "\n").encode()


def _write(data: bytes) -> None:
    while data:
        data = data[os.write(1, data) :]


def _hello(hello: dict[str, Any]) -> None:
    _write((json.dumps({"takeover": VERSION, **hello}) + "\n").encode())


def _parse(line: bytes) -> dict[str, Any]:
    try:
        request = json.loads(line)
    except ValueError:
        print(f"adapter: a request that is not JSON: {line[:200]!r}", file=sys.stderr, flush=True)
        sys.exit(2)
    return request


def serve_blocking(hello: dict[str, Any], open_queue: Callable[[str], Any]) -> None:
    """Answer with a queue of synchronous methods: a blocking read of stdin between requests."""
    _hello(hello)
    queue, failed = None, None
    try:
        queue = open_queue(os.environ["TAKEOVER_DB"])
    except Exception as exc:  # noqa: BLE001 - answered to every request, as a queue that cannot open
        failed = f"the queue did not open: {type(exc).__name__}: {exc}"
    closed = False
    for line in sys.stdin.buffer:
        request = _parse(line)
        rid, op = request.get("id"), request.get("op")
        try:
            if failed is not None:
                raise RuntimeError(failed)
            reply = _answer(rid, _call(queue, request))
            closed = closed or op == "close"
        except Exception as exc:  # noqa: BLE001 - the call raising is an {"error"} answer
            reply = _error(rid, exc)
        _write(reply)
    if queue is not None and not closed:
        queue.close()


def serve_async(hello: dict[str, Any], open_queue: Callable[[str], Any]) -> None:
    """Answer with a queue whose methods are coroutines (``open_queue`` one too), on an event loop that runs
    between requests: stdin is read through the loop."""
    _hello(hello)
    asyncio.run(_serve_async(open_queue))


async def _serve_async(open_queue: Callable[[str], Any]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 21)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    queue, failed, op = None, None, None
    try:
        queue = await open_queue(os.environ["TAKEOVER_DB"])
    except Exception as exc:  # noqa: BLE001 - answered to every request, as a queue that cannot open
        failed = f"the queue did not open: {type(exc).__name__}: {exc}"
    while line := await reader.readline():
        request = _parse(line)
        rid, op = request.get("id"), request.get("op")
        try:
            if failed is not None:
                raise RuntimeError(failed)
            result = _call(queue, request)
            if inspect.isawaitable(result):
                result = await result
            reply = _answer(rid, result)
        except Exception as exc:  # noqa: BLE001 - the call raising is an {"error"} answer
            reply = _error(rid, exc)
        _write(reply)
        if op == "close":
            break
    if queue is not None and op != "close":
        await queue.close()
    # At once, without the loop's shutdown: it would cancel the library's tasks under way, and their
    # cancellation paths (arq's retry of a cancelled job) are a graceful shutdown, which a worker that takeover
    # ends is not (docs/reference/protocol.md: the adapter lives and dies with its process).
    sys.stdout.flush()
    os._exit(0)
