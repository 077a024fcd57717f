"""The runner: everything that happens while a run is under way, and nothing that judges it.

A run is real processes around one queue file: the coordinator's loop (:mod:`.coordinator`) starts
and watches them (:mod:`.supervision`), the nemesis decides the faults (:mod:`.nemesis`) and the
effectors carry them out on those processes (:mod:`.effectors`), the external service performs and
records the side effects (:mod:`.service`, :mod:`.ledger`), and every worker publishes its phase on a
shared board (:mod:`.phases`). What the run leaves behind is the run folder; the checker reads that
folder and never this package.

The workload (what a worker process does) is not part of it: the caller hands the coordinator the
worker's entry point, so this package never imports ``takeover.workloads``. The workload, in turn,
may use what a worker needs from here: the board, the service client. (The lifeline, how every child
dies with its parent, is :mod:`takeover._internal.lifeline`: the power-loss daemon and the API's child need it too.)

Importing this package loads nothing: a worker that needs only the board does not pay for the rest.
"""
