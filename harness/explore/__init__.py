"""``takeover explore``: random contract calls in one process, judged step by step by the spec's
model, shrunk to a minimal sequence by Hypothesis (:mod:`takeover.explore.core`)."""

from takeover.explore.core import ExploreResult, explore_queue

__all__ = ["ExploreResult", "explore_queue"]
