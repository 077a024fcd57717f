"""What the remedies, heartbeats and reconciliation did in a run: the summary's ``remedy``,
``heartbeat`` and ``reconcile`` sections.

Why here and not in counts.py: these are per-feature tallies a reader compares across runs (which
remedy removed duplicates, whether heartbeats were really in effect), read straight from the
service's ledger and the history, so they stay correct whatever the invariants conclude.
"""

from __future__ import annotations

from takeover._internal import store
from takeover._internal.checker.facts import Facts
from takeover._internal.checker.resolves import resolves
from takeover.summary_types import Extends, FeatureSections, Heartbeat, Reconcile, Remedy

RESULTS = ("performed", "deduplicated", "refused")


def remedy_counts(fx: Facts) -> Remedy:
    """``{"name", "performed", "deduplicated", "refused", "requests"}`` from ledger.sqlite."""
    name = str(fx.config.get("remedy") or "none")
    ledger = fx.run.ledger
    if ledger is None:
        return {"name": name, "performed": None, "deduplicated": None, "refused": None, "requests": None,
                "note": "no ledger"}
    if "result" in ledger.columns:
        # Counted as stored (a categorical of a few values): only the text keys below are read, and
        # no 100k-row conversion to text is needed for them.
        by = ledger["result"].value_counts()
        performed, deduplicated, refused = (int(by.get(k, 0)) for k in RESULTS)
        return {"name": name, "performed": performed, "deduplicated": deduplicated, "refused": refused,
                "requests": int(len(ledger))}
    # A ledger from before results were recorded: performed or not is all it knows.
    return {"name": name, "performed": int(ledger["performed"].sum()), "deduplicated": None, "refused": None,
            "requests": int(len(ledger))}


def queue_has(fx: Facts, method: str) -> bool | None:
    """Whether the run's queue offered an optional method (``extend``, ``resolve``, ``register_many``);
    None when the run folder cannot tell.

    The coordinator records the answer in ``config.json`` (``queue_capabilities``) when it opens the
    queue, so the checker never imports the queue's code: a run re-checked on a machine without the
    queue installed concludes the same. A run stored before that was recorded, or whose queue never
    opened, has only its history to go by: an extend recorded there proves the queue had extend().
    """
    recorded = fx.config.get(store.QUEUE_CAPABILITIES)
    if isinstance(recorded, dict) and isinstance(recorded.get(method), bool):
        return recorded[method]
    if method == "extend" and len(fx.ops.extends):
        return True
    return None


def heartbeat_summary(fx: Facts) -> Heartbeat:
    """Whether heartbeats were in effect, and how the extends went."""
    interval = float(fx.config.get("heartbeat") or 0.0)
    e = fx.ops.extends  # always carries its columns (ops._assemble), so an empty frame counts 0
    extends: Extends = {"ok": int((e["status"] == "ok").sum()), "lost": int((e["status"] == "fail").sum()),
                        "indeterminate": int(e["indeterminate"].sum())}
    out: Heartbeat = {"interval": interval, "extends": extends, "in_effect": False}
    if interval <= 0:
        out["note"] = "no heartbeats requested (fixed lease)"
        return out
    supported = queue_has(fx, "extend")
    if supported is False:
        out["note"] = "the queue has no extend(): the run ran WITHOUT heartbeats"
    else:
        out["in_effect"] = True if supported else bool(len(e))
        if not len(e):
            out["note"] = "heartbeats on, but no task ran long enough to extend its lease"
    return out


def reconcile_summary(fx: Facts) -> Reconcile | None:
    """What reconciliation resolved and how; None when the run was never reconciled."""
    r = resolves(fx)
    if not len(r):
        return None
    ok = r[r["status"] == "ok"]
    return {"resolves": int(len(r)),
            "done": int((ok["resolution"] == "done").sum()),
            "pending": int((ok["resolution"] == "pending").sum()),
            "rejected": int((r["status"] == "fail").sum()),
            "indeterminate": int(r["status"].isin(["info", "open"]).sum()),
            "tasks": [fx.name(t) for t in ok["task"].head(20)]}


def feature_sections(fx: Facts) -> FeatureSections:
    """The three summary sections, for ``analyse`` to merge into summary.json."""
    return {"remedy": remedy_counts(fx), "heartbeat": heartbeat_summary(fx), "reconcile": reconcile_summary(fx)}
