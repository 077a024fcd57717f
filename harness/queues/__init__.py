"""Queues takeover ships: the reference lease queue, and (in tests/quality) planted-bug variants."""
