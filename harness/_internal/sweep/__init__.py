"""``takeover sweep``: a grid of real stress runs to choose a lease length with measurements.

Modules: ``grid`` (the grid file and its cells), ``model`` (what each task-time distribution
predicts), ``metrics`` (one cell's numbers from its checked run folder), ``runner`` (runs the
cells one after another, with progress, into ``sweep.csv``), ``recommend`` (the recommendation
table). The report is rendered by ``takeover._internal.sweep.report``.
"""
