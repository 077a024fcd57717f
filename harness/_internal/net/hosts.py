"""``--hosts N``: N hosts on a network of the run's own, and the database server on it.

Why: on PostgreSQL, a production queue's workers run on several machines and reach the database over
a network, and what breaks such queues are network faults: a worker cut off keeps its task while the
server ends its session and another worker takes the job over. A Unix socket on one machine cannot
show that (the server always sees a killed client go). Here every host is a network namespace
(takeover._internal.net.namespaces) with one veth end; the other ends are ports of a bridge in a namespace of
the run's own, where the run's private PostgreSQL server (takeover._internal.db.server) listens on
``10.200.0.1`` as well as on its Unix socket. Hosts are ``10.200.1.i``. No address, route or rule is
ever made outside these namespaces and none of them has a route anywhere else: the run's traffic
cannot leave it.

Who reaches what:

- workers run inside their host's namespace (placed round-robin: slot ``s`` on host ``s % N + 1``) and
  reach the database over TCP, with keepalives, a TCP user timeout and a connect timeout in their URL so
  that no call hangs on a dead socket for long; each incarnation names itself in ``application_name``
  (``takeover-w3-17``), which is how a connection kill finds its session;
- the coordinator, the checker and the probes use the server's Unix socket: they are not a host, and
  no network fault reaches them;
- the external service listens on a socket file, reachable from every host whatever the network
  does: a partitioned worker still performs its action, as a real one would.

Both ends are set for a short-lived partition to be noticed (:data:`SERVER_SETTINGS`, :func:`client_params`):
the server ends a cut-off client's session within seconds (its row locks and advisory locks go with
it), and the client's call fails within seconds instead of the kernel's 15 minutes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import TracebackType
from urllib.parse import quote, urlencode

from takeover._internal.net.namespaces import Namespace
from takeover.errors import UsageError

DB_ADDRESS = "10.200.0.1"
PREFIX = 16  # 10.200.0.0/16: the run's namespaces only
MAX_HOSTS = 64
BRIDGE = "br0"
PORT = 5432

# The server's side of a cut-off client: keepalive probes from 1 s of silence, 1 s apart, 2 unanswered =
# dead; unacknowledged data for 2 s = dead. So a partition of a few seconds ends the session (and frees
# its locks) while the worker, on its side of the cut, still believes it holds its task.
SERVER_SETTINGS = {
    "tcp_keepalives_idle": "1",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "2",
    "tcp_user_timeout": "2000",
    # After a crash the server syncs its data folder before recovery: file by file (the default) took 1-3 s
    # of a restart on a loaded machine, one syncfs() of the file system a few milliseconds.
    "recovery_init_sync_method": "syncfs",
}
CONNECT_TIMEOUT = 2  # seconds: libpq's least
# No statement of a worker runs longer than this (a lock wait behind a cut-off session included): with the
# keepalives and the TCP user timeout, every queue call of a worker returns within seconds, whatever the network.
STATEMENT_TIMEOUT_MS = 5000


def host_name(host: int) -> str:
    return f"h{host}"


def host_address(host: int) -> str:
    return f"10.200.1.{host}"


def host_of(slot: int, hosts: int) -> int:
    """Round-robin: worker slot ``s`` runs on host ``s % N + 1`` (every incarnation of a slot on the same one)."""
    return slot % hosts + 1


def placement(workers: int, hosts: int) -> dict[str, str]:
    """Where each worker runs (config.json's ``placement``): ``{"w0": "h1", "w1": "h2", ...}``."""
    return {f"w{s}": host_name(host_of(s, hosts)) for s in range(workers)}


def application_name(slot: int, process: int) -> str:
    return f"takeover-w{slot}-{process}"


def client_params(slot: int, process: int) -> dict[str, str]:
    """libpq parameters of a worker's URL: fail within seconds on a dead path or a stuck statement, and say
    who it is."""
    return {"connect_timeout": str(CONNECT_TIMEOUT), "keepalives": "1", "keepalives_idle": "1",
            "keepalives_interval": "1", "keepalives_count": "2", "tcp_user_timeout": "2000",
            "application_name": application_name(slot, process),
            "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}"}  # fmt: skip


def check_available(hosts: int) -> None:
    """What ``--hosts`` needs on this machine, or one line saying what is missing (exit 2)."""
    if hosts > MAX_HOSTS:
        raise UsageError(f"hosts must be at most {MAX_HOSTS}, got {hosts}")
    if os.geteuid() != 0:
        raise UsageError("--hosts needs root: it makes network namespaces, veth pairs and firewall rules "
                         "(user namespaces are not used); run takeover as root, or without --hosts")
    missing = [p for p in ("ip", "iptables", "nsenter", "cat") if shutil.which(p) is None]
    if missing:
        raise UsageError(f"--hosts needs {', '.join(missing)} on PATH (Debian: apt-get install iproute2 iptables "
                         "util-linux)")


class Network:
    """``with Network(3) as net:`` three hosts joined to the database's namespace; gone afterwards."""

    def __init__(self, hosts: int) -> None:
        self.count = hosts
        self.db: Namespace | None = None
        self.hosts: dict[int, Namespace] = {}

    def __enter__(self) -> Network:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        check_available(self.count)
        self.db = Namespace("db")
        batch = ["link set lo up", f"link add {BRIDGE} type bridge", f"addr add {DB_ADDRESS}/{PREFIX} dev {BRIDGE}",
                 f"link set {BRIDGE} up"]  # fmt: skip
        for host in range(1, self.count + 1):
            ns = self.hosts[host] = Namespace(host_name(host))
            # Made inside the database's namespace with its peer sent straight into the host's: neither end
            # ever exists in the machine's namespace.
            batch += [f"link add {host_name(host)} type veth peer name eth0 netns {ns.holder.pid}",
                      f"link set {host_name(host)} master {BRIDGE}", f"link set {host_name(host)} up"]  # fmt: skip
        self.db.run(["ip", "-batch", "-"], "\n".join(batch) + "\n")
        for host, ns in self.hosts.items():
            ns.run(["ip", "-batch", "-"], f"link set lo up\naddr add {host_address(host)}/{PREFIX} dev eth0\n"
                   "link set eth0 up\n")

    @property
    def db_path(self) -> str:
        assert self.db is not None
        return self.db.path

    def host_path(self, host: int) -> str:
        return self.hosts[host].path

    # -- the firewall: every rule drops what arrives, so no sender is ever told --------------------------------
    def _rule(self, ns: Namespace, add: bool, source: str, extra: tuple[str, ...] = ()) -> None:
        ns.run(["iptables", "-w", "-A" if add else "-D", "INPUT", "-s", source, *extra, "-j", "DROP"])

    def cut(self, hosts: list[int], one_way: bool = False, heal: bool = False) -> None:
        """Cut ``hosts`` from the database (``heal``: restore them). Both ways: the database drops what
        the host sends and the host what the database sends; ``one_way``: requests arrive, replies are lost."""
        assert self.db is not None
        for host in hosts:
            if not one_way:
                self._rule(self.db, not heal, host_address(host))
            self._rule(self.hosts[host], not heal, DB_ADDRESS)

    def lose(self, probability: float) -> None:
        """Every host's path drops that share of packets, each way (``-m statistic``), for the whole run."""
        assert self.db is not None
        stat = ("-m", "statistic", "--mode", "random", "--probability", f"{probability:.6f}")
        for host, ns in self.hosts.items():
            self._rule(self.db, True, host_address(host), stat)
            self._rule(ns, True, DB_ADDRESS, stat)

    def lost_packets(self) -> int:
        """How many packets the loss rules (:meth:`lose`) have dropped so far, both ways, every host: the
        evidence that ``--net-loss`` reached the run (TCP retransmits what was lost, so no call shows it)."""
        total = 0
        for ns in [*self.hosts.values(), *([self.db] if self.db is not None else [])]:
            for line in ns.run(["iptables", "-w", "-L", "INPUT", "-v", "-x", "-n"], check=False).splitlines():
                fields = line.split()
                if "statistic" in line and fields and fields[0].isdigit():
                    total += int(fields[0])
        return total

    def close(self) -> None:
        for ns in [*self.hosts.values(), *([self.db] if self.db is not None else [])]:
            ns.close()
        self.hosts.clear()
        self.db = None


def worker_url(database_name: str, slot: int, process: int, port: int = PORT) -> str:
    """A worker's URL to the run's database over the network (see :func:`client_params`)."""
    query = urlencode(client_params(slot, process), quote_via=quote)  # %20, not +: libpq takes no + for a space
    return f"postgresql://postgres@{DB_ADDRESS}:{port}/{quote(database_name)}?{query}"


def service_socket(folder: Path) -> str:
    """The service's socket file for a run with hosts: a path, which every namespace reaches (an abstract
    name would belong to the coordinator's network namespace alone)."""
    return str(Path(folder) / "service.sock")
