"""``takeover explore``: random contract calls in one process, judged step by step by the spec's
model, shrunk to a minimal sequence by Hypothesis (:mod:`takeover._internal.explorer.core`)."""

from takeover._internal.explorer.core import explore_queue
from takeover._internal.explorer.words import ExploreResult

__all__ = ["ExploreResult", "explore_queue"]
