"""Asked for power losses on a machine that cannot mount FUSE, every command that runs exits 2 with one
line saying what is missing, before it creates anything. The machine here can mount FUSE (CI installs
it), so the missing device is the module's own path pointed elsewhere; the mount itself is tested in
tests/system/test_powerloss_layer.py."""

from __future__ import annotations

import pytest

from takeover.cli import main
from takeover.powerloss import layer


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


def test_the_machine_check_says_nothing_where_fuse_works():
    assert layer.unavailable() == ""
