"""``takeover explore``: random contract calls in one process, judged step by step by the spec's
model, shrunk to a minimal sequence by Hypothesis (:mod:`takeover.explorer.core`)."""

from takeover.explorer.core import explore_queue
from takeover.explorer.words import ExploreResult

__all__ = ["ExploreResult", "explore_queue"]
