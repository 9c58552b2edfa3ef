"""`dlperf export`: a results folder into the team's experiment tracker, MLflow or W&B (offline)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Literal

from dlperf.cli.display import say
from dlperf.errors import ConfigError
from dlperf.secrets import mask
from dlperf.spec import setting
from dlperf.wording import count

DESCRIPTION = (
    "`dlperf export mlflow FOLDER --tracking-uri URI [--experiment NAME]` makes the sweep a parent "
    "run and every record a child run (parameters, metrics with each timing window as a step, doubt flags "
    "and status as tags, report.md, plots and the record as artifacts). `dlperf export wandb FOLDER [--dir "
    "DIR] [--project NAME]` writes the same as W&B offline runs that `wandb sync` uploads. Runs are found by "
    "their record's identity first: a second export adds nothing, and a rerun after a fault (a server gone, a "
    "full disk) finishes what the first left, each record once."
)


@dataclass(frozen=True)
class ExportOptions:
    tracker: Literal["mlflow", "wandb"] = setting(None, "where to: mlflow or wandb", positional="1")
    folder: str = setting(None, "the results folder (from sweep, run or extract)", positional="1")
    tracking_uri: str | None = setting(None, "mlflow: the tracking server (default $MLFLOW_TRACKING_URI)")
    experiment: str = setting("dlperf", "mlflow: the experiment", bound="non-empty")
    dir: str | None = setting(None, "wandb: where the offline runs go, under DIR/wandb (default FOLDER)")
    project: str = setting("dlperf", "wandb: the project `wandb sync` uploads to", bound="non-empty")


OPTIONS = (ExportOptions,)


def run(args: argparse.Namespace) -> int:
    if args.tracker == "mlflow":
        if args.dir is not None:
            raise ConfigError("--dir is for `dlperf export wandb`; MLflow runs go to --tracking-uri")
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            raise ConfigError("dlperf export mlflow needs --tracking-uri URI (or MLFLOW_TRACKING_URI)")
        from dlperf.reporting.to_mlflow import export_mlflow

        for outcome in export_mlflow(args.folder, uri, args.experiment):
            say(
                f"{count(len(outcome.created), 'new run')} under parent run {outcome.parent_run_id} in experiment "
                f"{args.experiment} ({outcome.experiment_id}) at {mask(uri)}; {outcome.existing} records were "
                "exported before"
            )
        return 0
    if args.tracking_uri is not None:
        raise ConfigError("--tracking-uri is for `dlperf export mlflow`; W&B offline runs go to --dir")
    from dlperf.reporting.to_wandb import export_wandb

    out = args.dir or args.folder
    outcome = export_wandb(args.folder, out, args.project)
    say(f"{count(len(outcome.run_dirs), 'new W&B offline run')}; {outcome.existing} were written before")
    for path in outcome.run_dirs:
        say(f"  {path}")
    say(f"upload with: wandb sync {out}/wandb/offline-run-*")
    return 0
