"""The published log layout: `.../<N>n<G>g/<model>_b<batch>_<precision>[_<variant>...]_<repeat>.log`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import DataError

CASE_RE = re.compile(r"^(?P<nodes>\d+)n(?P<devices>\d+)[gd]$")
STEM_RE = re.compile(r"^(?P<model>.+?)_b(?P<batch>\d+)_(?P<tag>[^_].*?)_(?P<repeat>\d+)$")


@dataclass(frozen=True)
class LogInfo:
    """What a log's path says about its run."""

    path: Path
    model: str
    nodes: int
    devices_per_node: int
    batch_size: int
    tag: str  # precision plus dlperf's variant switches, e.g. `fp32_compile`
    repeat: int

    @property
    def case(self) -> str:
        return f"{self.nodes}n{self.devices_per_node}g"

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def precision(self) -> str:
        return self.tag.split("_", 1)[0]

    @property
    def group(self) -> str:
        return f"b{self.batch_size}_{self.tag}"


def parse_log_path(path: Path) -> LogInfo:
    """Read the run's shape from the file's folder and name; DataError says what does not fit the layout."""
    case = CASE_RE.match(path.parent.name)
    if not case:
        raise DataError(f"its folder {path.parent.name!r} is not a topology like 1n8g or 12n8g")
    stem = STEM_RE.match(path.stem)
    if not stem:
        raise DataError("its name is not <model>_b<batch>_<precision>_<repeat>.log, e.g. rn50_b128_fp32_1.log")
    nodes, devices, batch = int(case["nodes"]), int(case["devices"]), int(stem["batch"])
    if not (nodes and devices and batch):
        raise DataError("nodes, devices and batch size in its path must be positive")
    return LogInfo(path, stem["model"], nodes, devices, batch, stem["tag"], int(stem["repeat"]))


def find_logs(root: Path) -> list[Path]:
    """Every `*.log` under `root` (any depth, so `bz128/` and model folders are fine), sorted."""
    return sorted(p for p in root.rglob("*.log") if p.is_file())
