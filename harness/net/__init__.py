"""The run's hosts and network (``--hosts N``): workers on separate network namespaces, reaching the
database over a bridge, so that a partition, a dropped connection or a database crash can be injected
as a network does it (takeover.net.hosts, takeover.net.faults)."""
