"""takeover: a stress harness for lease-based task queues on SQLite."""

__version__ = "0.1.0"
