"""The published results layout: `DIR/<model>/<N>n<G>g/<stem>_<repeat>.log`, the JSON record beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlperf.config import RunConfig
from dlperf.workloads import get_workload


@dataclass(frozen=True)
class RunPaths:
    log: Path
    record: Path
    console: Path

    @property
    def folder(self) -> Path:
        return self.log.parent


def run_paths(out: str | Path, config: RunConfig, repeat: int) -> RunPaths:
    stem = f"{get_workload(config.model).run_stem(config)}_{repeat}"
    folder = Path(out) / config.model / config.topology
    return RunPaths(
        log=folder / f"{stem}.log",
        record=folder / f"{stem}.json",
        console=folder / f"{stem}.console.txt",
    )
