"""The published results layout: `DIR/<model>/<N>n<G>g/<stem>_<repeat>.log`, the JSON record beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunPaths:
    log: Path
    record: Path
    console: Path

    @property
    def folder(self) -> Path:
        return self.log.parent

    @property
    def root(self) -> Path:
        """The results folder (--out) this run belongs to."""
        return self.log.parent.parent.parent

    @property
    def case_stem(self) -> str:
        """The stem without the repeat number: files that belong to every repeat of a case."""
        return self.log.stem.rsplit("_", 1)[0]


def run_paths(out: str | Path, model: str, topology: str, stem: str, repeat: int) -> RunPaths:
    folder = Path(out) / model / topology
    name = f"{stem}_{repeat}"
    return RunPaths(log=folder / f"{name}.log", record=folder / f"{name}.json", console=folder / f"{name}.console.txt")
