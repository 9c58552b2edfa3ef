"""The published results layout: `DIR/<model>/<N>n<G>g/<stem>_<repeat>.log`, the JSON record beside it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

SWEEP_RUNS = "sweep_runs.json"  # the runs a sweep planned, in order (records/sweep_runs.py)


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
    return paths_of_record(Path(out) / model / topology / f"{stem}_{repeat}.json")


def paths_of_record(record: Path) -> RunPaths:
    """A run's files, named after its record's."""
    return RunPaths(log=record.with_suffix(".log"), record=record, console=record.with_suffix(".console.txt"))


def resume_command(out: str | Path) -> str:
    """`dlperf sweep --resume --out OUT`, which finishes the sweep in OUT: the folder keeps its file and options."""
    return shlex.join(["dlperf", "sweep", "--resume", "--out", str(out)])
