"""The sweep grid: a TOML file (``workloads/sweep-*.toml`` or any path) plus command-line overrides.

A grid names a base run profile, the values fixed for every cell, and the axes: task-time
distributions, lease lengths, fault-rate scales and modes (remedy + heartbeat). Cells are the
product of the axes; each runs ``seeds`` times with seeds ``seed, seed+1, ...``. Heartbeats are
given as a fraction of the lease (``heartbeat = 0.3`` extends every 0.3 leases), so one mode means
the same thing at every lease length.

Example::

    description = "..."
    base = "smoke"          # run profile for everything the grid does not set
    seeds = 2
    target = 5.0            # duplicates per 1000 tasks the recommendation must stay under
    lease = [0.15, 0.3, 0.6]
    fault_scale = [1.0]     # multiplies every rate in [faults]
    power_loss_rate = [0, 0.25]  # optional axis: power losses per second (needs FUSE; SQLite queues)
    [fixed]                 # RunConfig values for every cell
    workers = 2
    tasks = 60
    [faults]
    kill = 0.5
    [[distribution]]
    name = "light"
    dist = "lognormal"
    mean = 0.08
    spread = 0.5
    [[mode]]
    remedy = "none"
    heartbeat = 0.0
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takeover._internal import db, swarm
from takeover._internal.config import (
    GRID_PREFIX,
    PROFILE_DIR,
    RunConfig,
    TaskTime,
    load_profile,
    read_toml,
    with_database,
    with_overrides,
)
from takeover._internal.locate import locate
from takeover._internal.options import BY_FIELD, FAULT_KINDS, GRID_FIXED, REMEDIES, RUN_OPTIONS, WORKER_FAULTS
from takeover.errors import UsageError

DEFAULT_GRID = "sweep-default"
_TOP = {"description", "base", "seeds", "seed", "target", "lease", "fault_scale", "fixed", "faults",
        "distribution", "mode", "power_loss_rate"}
# [fixed] takes every option the grid neither varies nor decides itself (takeover._internal.options says which).
FIXED_KEYS = {o.field for o in RUN_OPTIONS if o.grid == GRID_FIXED}


@dataclass(frozen=True)
class Distribution:
    name: str
    task_time: TaskTime


@dataclass(frozen=True)
class Mode:
    remedy: str = "none"
    heartbeat: float = 0.0  # fraction of the lease; 0 = fixed lease

    @property
    def tag(self) -> str:
        """``fixed`` or ``hb0.3``: the heartbeat part of a cell's id."""
        return f"hb{self.heartbeat:g}" if self.heartbeat else "fixed"


@dataclass(frozen=True)
class Cell:
    distribution: Distribution
    lease: float
    fault_scale: float
    mode: Mode
    power_loss_rate: float | None = None  # None: the grid has no power-loss axis (the [fixed] value holds)

    @property
    def cell_id(self) -> str:
        name = re.sub(r"[^A-Za-z0-9.]+", "_", self.distribution.name).strip("_")
        power = "" if self.power_loss_rate is None else f"-pl{self.power_loss_rate:g}"
        return f"{name}-l{self.lease:g}-f{self.fault_scale:g}{power}-{self.mode.remedy}-{self.mode.tag}"


@dataclass
class Grid:
    name: str
    description: str = ""
    base: str = "smoke"
    seeds: int = 2
    seed: int = 1
    target: float = 5.0
    leases: list[float] = field(default_factory=lambda: [0.2, 0.4, 0.8])
    fault_scales: list[float] = field(default_factory=lambda: [1.0])
    fixed: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, float] | None = None  # None: the base profile's rates
    distributions: list[Distribution] = field(default_factory=list)
    modes: list[Mode] = field(default_factory=lambda: [Mode()])
    # The power-loss axis: one cell per rate. None (no axis): every run takes --power-loss-rate / [fixed].
    power_loss_rates: list[float] | None = None
    db: str = db.DEFAULT  # --db: every run's database (takeover._internal.db), without a password

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if data["db"] == db.DEFAULT:  # a SQLite sweep's sweep-grid.json stays as it was
            del data["db"]
        return data

    def cells(self) -> list[Cell]:
        powers: list[float | None] = list(self.power_loss_rates) if self.power_loss_rates is not None else [None]
        return [Cell(d, lease, scale, mode, power) for d, lease, scale, power, mode
                in itertools.product(self.distributions, self.leases, self.fault_scales, powers, self.modes)]

    def runs(self) -> list[tuple[Cell, int]]:
        return [(cell, self.seed + i) for cell in self.cells() for i in range(self.seeds)]

    def config(self, cell: Cell, seed: int, out: Path) -> RunConfig:
        """The validated RunConfig of one run of one cell.

        With ``swarm`` (``--swarm``, or ``swarm = true`` under ``[fixed]``) each run draws its fault mix
        from its seed around the grid's rates, and the cell's fault scale then multiplies the drawn
        rates: the runs with the same seed in different cells share their kinds and the proportions of
        their rates, so a fault-scale axis still compares like with like, and scale 0 is still no faults.
        """
        base = load_profile(self.base)
        rates = dict(base.faults) if self.faults is None else {k: float(self.faults.get(k, 0.0)) for k in FAULT_KINDS}
        cfg = dataclasses.replace(base, faults=rates, task_time=cell.distribution.task_time)
        axes = {} if cell.power_loss_rate is None else {"power_loss_rate": cell.power_loss_rate}
        cfg = with_overrides(cfg, {**self.fixed, "lease": cell.lease, "seed": seed, "remedy": cell.mode.remedy,
                                   "heartbeat": round(cell.mode.heartbeat * cell.lease, 6), "out": str(out), **axes})
        cfg = with_database(cfg, self.db, queue_given="queue" in self.fixed)
        if cfg.swarm:
            cfg = swarm.draw(cfg)
        scaled = {k: v * cell.fault_scale for k, v in cfg.faults.items()}
        for kind in WORKER_FAULTS:  # probabilities stay probabilities
            scaled[kind] = min(scaled[kind], 1.0)
        where = locate(cfg.queue, cfg.profile)  # so each cell's reproduce line runs from a fresh shell
        cfg = dataclasses.replace(cfg, faults=scaled, workdir=where.workdir, pythonpath=where.pythonpath)
        try:
            return cfg.validate()
        except UsageError as exc:
            raise UsageError(f"grid {self.name!r}, cell {cell.cell_id}: {exc}") from None


def grid_path(spec: str) -> Path:
    """``sweep-default``, ``workloads/sweep-default`` or a path to a .toml file."""
    candidates = [Path(spec)]
    stem = Path(spec).name.removesuffix(".toml")
    candidates += [PROFILE_DIR / f"{stem}.toml", PROFILE_DIR / f"{GRID_PREFIX}{stem}.toml"]
    for path in candidates:
        if path.is_file():
            return path
    known = ", ".join(sorted(p.stem for p in PROFILE_DIR.glob(f"{GRID_PREFIX}*.toml"))) or "none"
    raise UsageError(f"unknown sweep grid {spec!r} (known in workloads/: {known})")


def _num_list(path: Path, key: str, value: Any, *, positive: bool = True) -> list[float]:
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or (positive and v == 0):
            raise UsageError(f"grid {str(path)!r}: {key} must be a list of {'positive ' if positive else ''}numbers, "
                             f"got {value!r}")
        out.append(float(v))
    if not out:
        raise UsageError(f"grid {str(path)!r}: {key} is empty")
    return out


def load_grid(spec: str) -> Grid:
    path = grid_path(spec)
    data = read_toml(path, "grid", _TOP)
    grid = Grid(name=path.stem, description=str(data.get("description", "")))
    if "base" in data:
        grid.base = str(data["base"])
    for key in ("seeds", "seed"):
        if key in data:
            if not isinstance(data[key], int) or isinstance(data[key], bool) or (key == "seeds" and data[key] < 1):
                raise UsageError(f"grid {str(path)!r}: {key} must be {'a positive ' if key == 'seeds' else 'an '}"
                                 f"integer, got {data[key]!r}")
            setattr(grid, key, data[key])
    if "target" in data:
        grid.target = _num_list(path, "target", data["target"], positive=False)[0]
    if "lease" in data:
        grid.leases = _num_list(path, "lease", data["lease"])
    if "fault_scale" in data:
        grid.fault_scales = _num_list(path, "fault_scale", data["fault_scale"], positive=False)
    if "power_loss_rate" in data:
        grid.power_loss_rates = _num_list(path, "power_loss_rate", data["power_loss_rate"], positive=False)
    fixed = data.get("fixed", {})
    if not isinstance(fixed, dict) or set(fixed) - FIXED_KEYS:
        raise UsageError(f"grid {str(path)!r}: [fixed] takes {', '.join(sorted(FIXED_KEYS))}")
    grid.fixed = {k: BY_FIELD[k].read(v) for k, v in fixed.items()}
    if "faults" in data:
        faults = data["faults"]
        if not isinstance(faults, dict) or set(faults) - set(FAULT_KINDS):
            raise UsageError(f"grid {str(path)!r}: [faults] takes {', '.join(FAULT_KINDS)}")
        grid.faults = {k: float(v) for k, v in faults.items()}
    dists = data.get("distribution", [])
    if not isinstance(dists, list) or not dists:
        raise UsageError(f"grid {str(path)!r}: needs at least one [[distribution]] (name, dist, mean, spread, max)")
    for d in dists:
        if not isinstance(d, dict) or "name" not in d or set(d) - {"name", "dist", "mean", "spread", "max", "file",
                                                                   "scale"}:
            raise UsageError(f"grid {str(path)!r}: [[distribution]] takes name, dist, mean, spread, max, file, scale; "
                             f"got {d!r}")
        fields: dict[str, Any] = {k: (str(v) if k in ("dist", "file") else float(v)) for k, v in d.items()
                                  if k != "name"}
        tt = TaskTime(**fields)
        grid.distributions.append(Distribution(str(d["name"]), tt))
    if len({d.name for d in grid.distributions}) != len(grid.distributions):
        raise UsageError(f"grid {str(path)!r}: distribution names must be unique")
    modes = data.get("mode")
    if modes is not None:
        if not isinstance(modes, list) or not modes:
            raise UsageError(f"grid {str(path)!r}: [[mode]] entries take remedy and heartbeat")
        grid.modes = [parse_mode(path, m) for m in modes]
    return grid


def parse_mode(path: Path | str, m: Any) -> Mode:
    if isinstance(m, str):  # command line: "none", "fencing", "none+hb0.3"
        remedy, _, hb = m.partition("+hb")
        m = {"remedy": remedy, "heartbeat": float(hb) if hb else 0.0}
    if not isinstance(m, dict) or set(m) - {"remedy", "heartbeat"}:
        raise UsageError(f"grid {str(path)!r}: a mode takes remedy and heartbeat, got {m!r}")
    remedy = str(m.get("remedy", "none"))
    if remedy not in REMEDIES:
        raise UsageError(f"grid {str(path)!r}: remedy must be one of {', '.join(REMEDIES)}, got {remedy!r}")
    hb = m.get("heartbeat", 0.0)
    if isinstance(hb, bool) or not isinstance(hb, int | float) or not 0 <= hb < 1:
        raise UsageError(f"grid {str(path)!r}: heartbeat is a fraction of the lease in [0, 1), got {hb!r}")
    return Mode(remedy, float(hb))
