"""``--power-loss-rate`` from the command line to the config: every command that runs takes it, and asked
for power losses on a machine that cannot mount FUSE it exits 2 with one line saying what is missing,
before it creates anything; the reproduce line and config.json carry it only when set; a sweep takes
it as an axis. The machine here can mount FUSE (CI installs it), so the missing device is the module's
own path pointed elsewhere; the mount itself is tested in tests/system/test_powerloss_layer.py, runs
with power losses in tests/system/test_powerloss_run.py."""

from __future__ import annotations

import argparse
import json

import pytest

from takeover._internal.commands import stress, sweep
from takeover._internal.powerloss import layer
from takeover.cli import main


@pytest.mark.parametrize("command", [
    ["stress", "--profile", "smoke"],
    ["soak", "--minutes", "1"],
    ["sweep", "--grid", "sweep-tiny"],
    ["hunt", "--budget", "10"],
])  # fmt: skip
def test_without_fuse_a_power_loss_run_exits_2_with_one_line(command, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(layer, "FUSE_DEVICE", str(tmp_path / "no-fuse"))
    out = tmp_path / "out"
    assert main([*command, "--power-loss-rate", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "power loss needs FUSE:" in err and "does not exist" in err
    assert not out.exists()


@pytest.mark.needs_package("fuse3")
def test_the_machine_check_says_nothing_where_fuse_works():
    assert layer.unavailable() == ""


def _stress_config(*argv: str):
    parser = argparse.ArgumentParser()
    stress.configure(parser)
    return stress.resolve(parser.parse_args(["--profile", "smoke", *argv]))


@pytest.mark.needs_package("fuse3")  # the config checks that FUSE can mount
def test_the_rate_reaches_the_config_and_the_reproduce_line_only_when_set():
    cfg = _stress_config("--power-loss-rate", "0.25")
    assert cfg.power_loss_rate == 0.25
    assert " --power-loss-rate 0.25 " in cfg.command() + " "
    assert json.loads(cfg.to_json())["power_loss_rate"] == 0.25
    assert _stress_config("--power-loss-rate", "0.25").command() == cfg.command()  # reads back the same
    plain = _stress_config()
    assert "power-loss" not in plain.command() and "power_loss_rate" not in json.loads(plain.to_json())


@pytest.mark.needs_package("fuse3")  # the config checks that FUSE can mount
def test_a_sweep_takes_the_rate_as_an_axis(tmp_path):
    parser = argparse.ArgumentParser()
    sweep.configure(parser)
    grid = sweep.build_grid(parser.parse_args(["--grid", "sweep-tiny", "--power-loss", "0,0.5"]))
    cells = grid.cells()
    assert sorted({c.power_loss_rate for c in cells}) == [0.0, 0.5]
    assert len(cells) == 2 * len(grid.distributions) * len(grid.leases) * len(grid.fault_scales) * len(grid.modes)
    by_rate = {c.power_loss_rate: c for c in cells}
    assert by_rate[0.5].cell_id.split("-")[3] == "pl0.5"
    assert grid.config(by_rate[0.5], 1, tmp_path / "a").power_loss_rate == 0.5
    assert grid.config(by_rate[0.0], 1, tmp_path / "b").power_loss_rate == 0.0
