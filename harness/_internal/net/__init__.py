"""The run's hosts and network (``--hosts N``): workers on separate network namespaces, reaching the
database over a bridge, so that a partition, a dropped connection or a database crash can be injected
as a network does it.

One floor, below the databases and the run's configuration: the namespaces (namespaces.py), the hosts'
network and its addresses (hosts.py) and the database's proxy (proxy.py) need nothing of takeover but its
errors. What stands on them lives with its users: the run's hosts with their server
(takeover._internal.run.net_site) and the faults the run injects (takeover._internal.run.net_faults)."""
