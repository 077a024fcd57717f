"""``--hosts`` and the network faults as options: what is refused before anything starts, where workers go,
and how a partition's hosts are drawn (takeover._internal.net). The real runs are tests/system/test_hosts.py's."""

from __future__ import annotations

import random

import pytest

from takeover._internal.commands import stress
from takeover._internal.net.hosts import placement, worker_url
from takeover._internal.run.net_faults import hosts_cut
from takeover.errors import UsageError
from tests.unit.test_options import parser_for


def _resolve(*argv: str):
    return stress.resolve(parser_for(stress.configure).parse_args(["--profile", "smoke", *argv]))


@pytest.mark.parametrize(("argv", "words"), [
    (("--hosts", "2"), "--hosts needs --db postgres or --db redis (SQLite's WAL needs one machine)"),
    (("--hosts", "2", "--db", "postgresql://u@example.invalid/x"), "--hosts needs --db postgres"),
    (("--partition-rate", "0.3"), "partition-rate: network faults need --hosts N"),
    (("--db", "postgres", "--db-restart-rate", "0.1"), "db-restart-rate: network faults need --hosts N"),
    (("--db", "postgres", "--hosts", "2", "--net-loss", "2"), "net-loss is a probability"),
])  # fmt: skip
def test_what_hosts_need_is_refused_in_one_line(argv: tuple[str, ...], words: str):
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        _resolve(*argv)
    assert "\n" not in str(caught.value)


def test_workers_go_round_robin_and_each_names_itself_to_the_server():
    assert placement(5, 2) == {"w0": "h1", "w1": "h2", "w2": "h1", "w3": "h2", "w4": "h1"}
    url = worker_url("takeover_run_x", 3, 17)
    assert url.startswith("postgresql://postgres@10.200.0.1:5432/takeover_run_x?")
    assert "application_name=takeover-w3-17" in url and "options=-c%20statement_timeout%3D5000" in url
    assert "tcp_user_timeout=2000" in url and "connect_timeout=2" in url


def test_a_partition_cuts_one_host_a_minority_or_a_majority_and_depends_on_the_seed_alone():
    sizes = {"one": 1, "one_way": 1, "minority": 2, "majority": 3}
    seen = set()
    for seed in range(40):
        shape, hosts = hosts_cut(random.Random(seed), 5)
        assert len(hosts) == sizes[shape] and set(hosts) <= {1, 2, 3, 4, 5} and hosts == sorted(set(hosts))
        assert hosts_cut(random.Random(seed), 5) == (shape, hosts)
        seen.add(shape)
    assert seen == set(sizes)
    assert hosts_cut(random.Random(1), 1)[1] == [1]  # one host: every shape cuts it
