"""The command line's error contract: bad input is one line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from takeover.cli import COMMANDS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "takeover", *args], capture_output=True, text=True, timeout=60)


def test_every_command_is_offered() -> None:
    out = run("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"    {name}" in out.stdout, name


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["bogus"], "takeover: error: argument COMMAND: invalid choice: 'bogus'"),
        (["stress", "--lease"], "takeover: error: stress: argument --lease: expected one argument"),
        (["stress", "--no-such-option"], "takeover: error: unrecognized arguments: --no-such-option"),
        (["check"], "takeover: error: check: the following arguments are required"),
        (["selftest", "--duration", "0"], "takeover: error: --duration must be a positive number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(expected), lines[0]
    assert "Traceback" not in out.stderr


_RUN_OPTIONS = (
    "--profile --queue --workers --tasks --duration --lease --seed --swarm --out --remedy --heartbeat --arrival-rate "
    "--task-time-dist --task-time-mean --task-time-spread --task-time-max --task-time-file --task-time-scale "
    "--local-step --poll --client-timeout "
    "--drain-timeout --kill-rate --kill-before-action-rate --kill-after-action-rate --kill-during-finish-rate "
    "--pause-rate --expire-and-return-rate --stale-return-rate --claim-stampede-rate "
    "--duplicate-register-rate --freeze-in-call-rate --stale-heartbeat-rate --lease-edge-rate --aim-unreached-rate "
    "--lose-reply-rate --slow-rate --pause-time-file --pause-time-scale --clock-skew-max "
    "--clock-jump-rate --clock-jump-max --power-loss-rate --probe-rate "
    "--hosts --partition-rate --conn-kill-rate --db-restart-rate --db-pause-rate --db-lost-reply-rate "
    "--redis-persistence --net-delay --net-loss"
).split()


@pytest.mark.parametrize(
    ("command", "listed"),
    [
        ("stress", ["-h", *_RUN_OPTIONS, "--db", "--keep-db", "--no-faults", "--reconcile", "--fail-on-duplicates",
                    "--max-duplicates-per-1000"]),
        ("soak", ["-h", "--minutes", "--checkpoint", "--sample", "--seed-bank", "--no-replay", "--keep",
                  *(o for o in _RUN_OPTIONS if o != "--duration"), "--db", "--keep-db", "--no-faults",
                  "--fail-on-duplicates", "--max-duplicates-per-1000", "--cluster", "--shard"]),
        ("sweep", ["-h", "--grid", "--seeds", "--seed", "--out", "--lease", "--fault-scale", "--power-loss", "--mode",
                   "--target", "--queue", "--workers", "--tasks", "--duration", "--swarm", "--clock-skew-max",
                   "--clock-jump-rate", "--clock-jump-max", "--power-loss-rate", "--probe-rate", "--hosts",
                   "--partition-rate", "--conn-kill-rate", "--db-restart-rate", "--db-pause-rate",
                   "--db-lost-reply-rate", "--redis-persistence", "--net-delay", "--net-loss", "--db",
                   "--keep-db", "--dry-run",
                   "--cluster", "--shard"]),
        # hunt takes every stress option but those it sets per run (duration, seed, swarm, out)
        ("hunt", ["-h", "--profile", "--queue", "--workers", "--tasks", "--lease", "--remedy", "--heartbeat",
                  *_RUN_OPTIONS[_RUN_OPTIONS.index("--arrival-rate"):],
                  "--seed", "--budget", "--run-seconds", "--out", "--db", "--keep-db", "--keep-valid", "--cluster",
                  "--shard"]),
        # tune takes the hosts and the network faults from the same table, after its own options
        ("tune", ["-h", "--task-times", "--target", "--time-scale", "--budget", "--queue", "--db", "--keep-db", "--out",
                  "--crash-rate-per-hour", "--pause-rate-per-hour", "--pause-p50", "--pause-p99", "--pause-max",
                  "--lost-reply-rate", "--tasks-per-hour", "--seed",
                  *(o for o in _RUN_OPTIONS[_RUN_OPTIONS.index("--hosts"):] if o != "--redis-persistence"),
                  "--cluster", "--shard"]),
    ],
)  # fmt: skip
def test_help_lists_each_commands_options_in_order(command: str, listed: list[str]) -> None:
    """Options are public names: a derived parser must list the same ones (soak hides what it refuses)."""
    out = run(command, "--help")
    assert out.returncode == 0
    options = [line.split()[0].rstrip(",") for line in out.stdout.splitlines() if line.startswith("  -")]
    assert options == listed


def test_a_command_imports_no_other_commands_libraries() -> None:
    """``takeover stress`` and ``takeover scenarios`` start without explore's Hypothesis or replay's pandas (about
    0.4 s of CPU each time a test or a user starts them); the command that needs one imports it."""
    probe = ("import sys\nfrom takeover.cli import main\n"
             "for argv in (['stress', '--workers', '0'], ['scenarios', '--queue', 'no_such_module:Q']):\n"
             "    assert main(argv) == 2\n"
             "print(sorted(m for m in ('hypothesis', 'pandas') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[]", done.stdout + done.stderr
