"""`dlperf run`: one benchmark run of one case."""

from __future__ import annotations

import argparse

from dlperf.cli.display import show_record
from dlperf.cli.options import add_launch_options, add_run_options, explicit_config_values, launch_options, positive_int
from dlperf.config import config_from_mapping
from dlperf.errors import LaunchError
from dlperf.launch.options import in_slurm_allocation
from dlperf.launch.runner import check_config, check_writable, describe_run, execute_run
from dlperf.launch.slurm import submit_runs
from dlperf.metrics.environment import collect_environment
from dlperf.reporting.layout import run_paths


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "run",
        parents=[common],
        help="benchmark one case",
        description="Benchmark one case: warm up, time --iters iterations in windows, write the log and a JSON "
        "record to OUT/<model>/<N>n<G>g/. Several devices per node run as DDP ranks under torchrun's launcher.",
    )
    add_run_options(parser)
    add_launch_options(parser)
    output = parser.add_argument_group("output")
    output.add_argument("--out", default="results", help="results folder (default ./results)")
    output.add_argument("--repeat", type=positive_int, default=1, help="repeat number in the file names (default 1)")
    output.add_argument("--overwrite", action="store_true", help="replace an existing run with the same name")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    launch = launch_options(args)
    values = explicit_config_values(args)
    if launch.hosts:
        values.setdefault("nodes", len(launch.hosts))
    config = config_from_mapping(values)
    check_config(config, launch)
    if launch.kind == "slurm" and not in_slurm_allocation():
        record = submit_runs([(config, args.repeat)], args.out, launch, overwrite=args.overwrite)[0]
    elif launch.dry_run:
        print(describe_run(config, args.repeat, args.out, launch))
        return 0
    else:
        check_writable(args.out)
        record = execute_run(config, args.repeat, args.out, collect_environment(), args.overwrite, launch)
    if record is None:  # a dry run of sbatch: the script was printed
        return 0
    path = run_paths(args.out, config, args.repeat).record
    if record["status"] != "ok":
        raise LaunchError(f"run failed: {record['error']} (record written to {path})")
    show_record(record, str(path))
    return 0
