"""Hand-written histories: a tiny DSL that writes a real run folder (history, ledger, snapshot, config).

Why real files: the checker is tested exactly as users run it, through ``check_and_report`` on a
folder, with the ledger written by the real :class:`takeover._internal.run.ledger.Ledger`. Times are explicit so
each case states precisely which operations overlap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal.run.ledger import Ledger

LEASE = 5.0
T0 = 1_000.0  # absolute times are T0 + the small numbers used in the cases


@dataclass
class Run:
    """Records in file order; helpers append invoke/completion pairs with explicit times."""

    records: list[dict[str, Any]] = field(default_factory=list)
    ledger_rows: list[dict[str, Any]] = field(default_factory=list)
    snapshot: list[list[Any]] | None = None
    snapshot_error: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    reregistered: list[dict[str, Any]] = field(default_factory=list)  # records of repeated registrations
    offsets: dict[int, float] = field(default_factory=dict)  # each process's clock offset so far (clock faults)
    probes: list[dict[str, Any]] = field(default_factory=list)  # probes.jsonl's lines (mid-run snapshot probes)

    def rec(self, t: float, process: int, type_: str, f: str, **fields: Any) -> None:
        record = {"time": T0 + t, "process": process, "type": type_, "f": f}
        for key, value in fields.items():
            if value is None:
                continue
            if key in ("now", "lease_until"):  # read from the process's clock: real time plus its offset
                value = T0 + value + self.offsets.get(process, 0.0)
            record[key] = value if key != "value" or isinstance(value, str) else json.dumps(value)
        self.records.append(record)

    # -- coordinator -------------------------------------------------------------------------
    def register(self, *tasks: str, t: float = 0.0) -> None:
        for task in tasks:
            self.rec(t, 0, "invoke", "register", task=task, now=t)
            self.rec(t, 0, "ok", "register", task=task)

    def reregister(self, t: float, process: int, *tasks: str, status: str = "ok") -> None:
        """Known tasks registered again, as ``register_tasks`` records a batch: every invoke, then
        every completion (a task named twice in one batch overlaps itself)."""
        self.reregister_start(t, process, *tasks)
        self.reregister_end(t + 0.01, process, *tasks, status=status)

    def reregister_start(self, t: float, process: int, *tasks: str) -> None:
        for task in tasks:
            self.rec(t, process, "invoke", "register", task=task, now=t)
            self.reregistered.append(self.records[-1])

    def reregister_end(self, t: float, process: int, *tasks: str, status: str = "ok") -> None:
        """``status``: ok / info (the completion names its task, as ``register_tasks`` writes it) /
        bare_info (only an error, as docs/history.md allows) / open (killed mid-call: nothing)."""
        for task in tasks:
            if status == "ok":
                self.rec(t, process, "ok", "register", task=task)
            elif status == "info":
                self.rec(t, process, "info", "register", task=task, error="database is locked")
            elif status == "bare_info":
                self.rec(t, process, "info", "register", error="database is locked")
            else:
                continue
            self.reregistered.append(self.records[-1])

    def without_reregisters(self) -> Run:
        """The same run with every repeated registration's records taken out."""
        kept = [rec for rec in self.records if not any(rec is r for r in self.reregistered)]
        return Run(kept, self.ledger_rows, self.snapshot, self.snapshot_error, self.config)

    def spawn(self, process: int, worker: str, t: float = 0.0) -> None:
        self.rec(t, 0, "ok", "spawn", target=process, worker=worker, pid=10_000 + process)

    def kill(self, target: int, t: float, *, phase: str = "working", aim: str = "random",
             task: str | None = None, gen: int | None = None, exited: bool = True) -> None:
        self.rec(t, 0, "invoke", "kill", target=target, phase=phase, value=aim, task=task, gen=gen)
        if exited:
            self.rec(t + 0.01, 0, "ok", "kill", target=target)
            self.rec(t + 0.01, 0, "ok", "exit", target=target, value="-9")

    def pause(self, target: int, start: float, end: float, *, phase: str = "working",
              task: str | None = None, gen: int | None = None) -> None:
        """Appends both records now: callers add them in time order around the pause themselves."""
        self.rec(start, 0, "invoke", "pause", target=target, phase=phase, value=str(end - start),
                 task=task, gen=gen)
        self.rec(end, 0, "ok", "pause", target=target)

    def pause_start(self, target: int, start: float, seconds: float, **kw: Any) -> None:
        self.rec(start, 0, "invoke", "pause", target=target, value=str(seconds), **kw)

    def pause_end(self, target: int, end: float) -> None:
        self.rec(end, 0, "ok", "pause", target=target)

    def aimed_start(self, kind: str, t: float, **fields: Any) -> None:
        """An aimed fault starts: process 0, no target (docs/history.md); a stale_return's ``order``."""
        self.rec(t, 0, "invoke", kind, **fields)

    def aimed_end(self, kind: str, t: float, reached: str = "hit", **fields: Any) -> None:
        """An aimed fault ends: ``reached`` is ``hit`` or the reason it missed."""
        value = "hit" if reached == "hit" else f"missed: {reached}"
        self.rec(t, 0, "ok", kind, value=value, detail=fields.pop("detail", reached), **fields)

    def clock(self, p: int, t: float, step: float, *, kind: str = "clock_jump") -> None:
        """Worker ``p`` records a clock fault at ``t`` (``clock_skew`` when it starts, ``clock_jump`` later):
        every ``now`` and ``lease_until`` it records from then on is ``step`` seconds further off the real
        clock, which the case's times stay on."""
        self.offsets[p] = self.offsets.get(p, 0.0) + step
        fields = {"target": p, "worker": f"w{p}", "value": repr(step)}
        self.rec(t, p, "invoke", kind, **fields)
        self.rec(t, p, "ok", kind, **fields)

    def run_event(self, t: float, value: str) -> None:
        self.rec(t, 0, "info", "run", value=value)

    def resolve(self, t: float, task: str, gen: int, value: str, *, status: str = "ok") -> None:
        """Reconciliation after the drain: ``status`` ok / rejected / info / open."""
        self.rec(t, 0, "invoke", "resolve", task=task, gen=gen, value=value, now=t)
        if status == "ok":
            self.rec(t + 0.01, 0, "ok", "resolve", task=task, gen=gen, value=value)
        elif status == "rejected":
            self.rec(t + 0.01, 0, "fail", "resolve", task=task, gen=gen, value=value, error="rejected")
        elif status == "info":
            self.rec(t + 0.01, 0, "info", "resolve", task=task, gen=gen, value=value, error="database is locked")

    # -- workers -----------------------------------------------------------------------------
    def claim(self, p: int, t: float, task: str | None, gen: int | None = None, *, done: float | None = None,
              lease: float = LEASE, status: str = "ok", worker: str | None = None) -> None:
        """A claim invoked at ``t``; ``status`` ok / empty / info / open (no completion)."""
        worker = worker or f"w{p}"
        self.rec(t, p, "invoke", "claim", worker=worker, now=t, lease=lease)
        end = t + 0.01 if done is None else done
        if status == "ok":
            self.rec(end, p, "ok", "claim", task=task, gen=gen, lease_until=t + lease, now=t)
        elif status == "empty":
            self.rec(end, p, "fail", "claim", error="empty")
        elif status == "info":
            self.rec(end, p, "info", "claim", error="database is locked")

    def action(self, p: int, t: float, task: str, gen: int, *, reply: str = "ok", status: str = "ok",
               ledger: bool = True, performed: bool = True) -> None:
        self.rec(t, p, "invoke", "action", task=task, gen=gen, now=t)
        if status == "ok":
            self.rec(t + 0.01, p, "ok", "action", task=task, gen=gen, value=reply)
        elif status == "info":
            self.rec(t + 0.01, p, "info", "action", task=task, gen=gen, error="timeout")
        if ledger:
            self.ledger_rows.append({"task": task, "gen": gen, "process": p, "t": T0 + t + 0.005,
                                     "lose": status == "info", "performed": performed})

    def finish(self, p: int, t: float, task: str, gen: int, outcome: str = "done", *,
               status: str = "ok", done: float | None = None) -> None:
        """``status``: ok (accepted) / rejected / info / open."""
        self.rec(t, p, "invoke", "finish", task=task, gen=gen, outcome=outcome, now=t)
        end = t + 0.01 if done is None else done
        if status == "ok":
            self.rec(end, p, "ok", "finish", task=task, gen=gen, outcome=outcome, value="true")
        elif status == "rejected":
            self.rec(end, p, "fail", "finish", task=task, gen=gen, outcome=outcome, error="rejected")
        elif status == "info":
            self.rec(end, p, "info", "finish", error="database is locked")

    def extend(self, p: int, t: float, task: str, gen: int, *, status: str = "ok", lease: float = LEASE,
               done: float | None = None) -> None:
        """A heartbeat at ``t``; ``status`` ok (lease now t + lease) / lost / info / open."""
        self.rec(t, p, "invoke", "extend", task=task, gen=gen, now=t, lease=lease)
        end = t + 0.01 if done is None else done
        if status == "ok":
            self.rec(end, p, "ok", "extend", task=task, gen=gen, lease_until=t + lease)
        elif status == "lost":
            self.rec(end, p, "fail", "extend", task=task, gen=gen, error="lost")
        elif status == "info":
            self.rec(end, p, "info", "extend", error="database is locked")

    def work(self, p: int, t: float, task: str, gen: int, outcome: str = "done", **finish_kw: Any) -> None:
        """The common path: claim at t, act at t+1, finish at t+2 (all within a 5 s lease)."""
        self.claim(p, t, task, gen)
        self.action(p, t + 1, task, gen)
        self.finish(p, t + 2, task, gen, outcome, **finish_kw)

    def power_loss(self, t: float, *processes: int, number: int = 1) -> None:
        """A power loss as the coordinator records it: invoke, the workers' exits, ok."""
        self.rec(t, 0, "invoke", "power_loss", value=str(number), workers=len(processes))
        for p in processes:
            self.rec(t + 0.01, 0, "ok", "exit", target=p, worker=f"w{p}", pid=10_000 + p, value="-9",
                     detail="power_loss")
        self.rec(t + 0.1, 0, "ok", "power_loss", value=str(number), workers=len(processes))

    # -- the probe process (takeover._internal.run.probes) ---------------------------------------------------
    def probe(self, t: float, *rows: tuple[str, str, int, float | None], done: float | None = None,
              status: str = "ok", number: int | None = None, total: int | None = None) -> None:
        """A mid-run probe invoked at ``t`` that read ``rows``; ``status`` ok / info / open (killed: its rows
        may still be in probes.jsonl, as when the process died between the two writes)."""
        number = len(self.probes) if number is None else number
        self.rec(t, -2, "invoke", "probe", value=str(number))
        end = t + 0.01 if done is None else done
        if status != "info":
            self.probes.append({"probe": number, "total": len(rows) if total is None else total,
                                "tasks": [[task, state, gen, None if lu is None else T0 + lu]
                                          for task, state, gen, lu in rows]})
        if status == "ok":
            self.rec(end, -2, "ok", "probe", value=str(number), detail=f"rows={len(rows)}")
        elif status == "info":
            self.rec(end, -2, "info", "probe", value=str(number), error="database is locked")

    # -- the end -----------------------------------------------------------------------------
    def snap(self, *rows: tuple[str, str, int, float | None]) -> None:
        self.snapshot = [[task, state, gen, None if lu is None else T0 + lu] for task, state, gen, lu in rows]

    def write(self, folder: Path, *, raw_tail: bytes = b"", config: dict[str, Any] | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in self.records)
        (folder / "history.jsonl").write_bytes(lines.encode() + raw_tail)
        cfg = {"queue": "takeover.queues.sqlite_lease:SQLiteLeaseQueue", "seed": 1, "workers": 2,
               "tasks": 0, "duration": 10, "lease": LEASE, "profile": "hand", "remedy": "none",
               "faults": {}, "command": "takeover stress --profile hand --seed 1"}
        cfg.update(self.config)
        cfg.update(config or {})
        (folder / "config.json").write_text(json.dumps(cfg))
        if self.snapshot is not None:
            (folder / "snapshot.json").write_text(json.dumps({"time": T0 + 100, "tasks": self.snapshot}))
        elif self.snapshot_error is not None:
            (folder / "snapshot.json").write_text(json.dumps({"time": T0 + 100, "error": self.snapshot_error}))
        if self.probes:
            (folder / "probes.jsonl").write_text("".join(json.dumps(p) + "\n" for p in self.probes))
        ledger = Ledger(str(folder / "ledger.sqlite"))
        for row in self.ledger_rows:
            ledger.act(row["task"], row["gen"], worker=f"w{row['process']}", process=row["process"],
                       lose_reply=row["lose"], t=row["t"])
        if any(not row["performed"] for row in self.ledger_rows):
            conn = ledger._conn
            for n, row in enumerate(self.ledger_rows, start=1):
                if not row["performed"]:
                    conn.execute("UPDATE actions SET performed = 0, result = 'refused', reply = 'error' "
                                 "WHERE seq = ?", (n,))
        ledger.close()
        return folder


def one_task() -> Run:
    """Task a registered, workers w1 (process 1) and w2 (process 2) started: how most one-task histories open."""
    r = Run()
    r.register("a")
    r.spawn(1, "w1")
    r.spawn(2, "w2")
    return r
