"""A results folder as Weights & Biases runs in offline mode: run folders under `DIR/wandb/` that `wandb sync` uploads
later, with the same content as the MLflow export (`reporting/tracking.py`).

W&B has no parent runs: the records' runs share the sweep as their `group`, and one more run (job type `sweep`)
holds the sweep's figures and report. A run's id is made from its identity (the record's key, the sweep's), so a
second export finds the run folder already there and adds nothing; a run whose writing fails has its folder removed.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError, first_line
from dlperf.reporting.extras import require_extra
from dlperf.reporting.tracking import TrackedRun, TrackedSweep, tracked_sweeps

ID_CHARS = 32  # of the identity's hex digits in a W&B run id
TAG_CHARS = 64  # W&B's limit on a tag


@dataclass(frozen=True)
class WandbOutcome:
    run_dirs: list[Path]  # the new runs' folders, for `wandb sync`
    existing: int  # runs already there


@dataclass(frozen=True)
class WandbContent:
    """What one W&B run holds: the same parts as its MLflow twin (`reporting/tracking.py`)."""

    config: dict[str, Any]
    summary: dict[str, Any]
    tags: list[str]
    steps: dict[str, list[float]]
    files: list[Path]
    exit_code: int
    artifact: str


def run_id(kind: str, key: str) -> str:
    plain = key.replace(":", "").replace("-", "").lower()
    return f"{kind}-{plain[:ID_CHARS]}"


def export_wandb(folder: str | Path, out: str | Path, project: str = "dlperf") -> WandbOutcome:
    require_extra("wandb", "wandb", "dlperf export wandb")
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    made: list[Path] = []
    existing = 0
    root = Path(out)
    with tracked_sweeps(folder) as sweeps:
        for sweep in sweeps:
            sweep_id = sweep.tags["dlperf.sweep_id"]
            group = sweep_id if sweep_id != "none" else sweep.key[:ID_CHARS]
            planned = [(run_id("sweep", sweep.key), sweep.name, "sweep", _sweep_content(sweep))]
            planned += [(run_id("run", r.key), r.name, "record", _run_content(r)) for r in sweep.runs]
            for id_, name, job, content in planned:
                if _run_dir(root, id_) is not None:
                    existing += 1
                    continue
                made.append(_write(wandb, root, project, group, id_, name, job, content))
    return WandbOutcome(made, existing)


def _sweep_content(sweep: TrackedSweep) -> WandbContent:
    return WandbContent(
        config=sweep.params,
        summary={**sweep.metrics, **sweep.tags},
        tags=["sweep"],
        steps={},
        files=sweep.files,
        exit_code=0,
        artifact=f"report-{run_id('sweep', sweep.key)}",
    )


def _run_content(run: TrackedRun) -> WandbContent:
    flags = [] if run.tags["dlperf.flags"] == "none" else run.tags["dlperf.flags"].split(";")
    return WandbContent(
        config=run.params,
        summary={**run.metrics, **run.tags},
        tags=[f"status:{run.status}", *(f"flag:{f}" for f in flags), f"sweep:{run.tags['dlperf.sweep_id']}"],
        steps=run.steps,
        files=run.files,
        exit_code=0 if run.status == "ok" else 1,
        artifact=f"record-{run.key[:ID_CHARS]}",
    )


def _run_dir(root: Path, id_: str) -> Path | None:
    found = sorted((root / "wandb").glob(f"offline-run-*-{id_}"))
    return found[0] if found else None


def _write(
    wandb: Any, root: Path, project: str, group: str, id_: str, name: str, job: str, content: WandbContent
) -> Path:
    """One offline run, whole: its folder is removed again where anything fails."""
    root.mkdir(parents=True, exist_ok=True)
    settings = wandb.Settings(mode="offline", console="off", save_code=False, disable_git=True, x_disable_stats=True)
    try:
        run = wandb.init(
            project=project,
            dir=str(root),
            id=id_,
            name=name,
            group=group,
            job_type=job,
            config=content.config,
            tags=[t[:TAG_CHARS] for t in content.tags],
            settings=settings,
        )
        for key, values in content.steps.items():
            for step, value in enumerate(values):
                run.log({key: value}, step=step)
        run.summary.update(content.summary)
        if content.files:
            artifact = wandb.Artifact(content.artifact, type="dlperf-" + job)
            for path in content.files:
                artifact.add_file(str(path), name=f"plots/{path.name}" if path.parent.name == "plots" else path.name)
            run.log_artifact(artifact)
        run.finish(exit_code=content.exit_code)
    except Exception as error:
        left = _run_dir(root, id_)
        if left is not None:
            shutil.rmtree(left, ignore_errors=True)
        raise ResultsError(f"cannot write W&B offline run {name} under {root}: {first_line(error)}") from None
    made = _run_dir(root, id_)
    if made is None:
        raise ResultsError(f"W&B wrote no offline run folder for {name} under {root / 'wandb'}")
    return made
