"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.display import console, run_line
from dlperf.cli.options import add_launch_options, launch_options, positive_int
from dlperf.launch.options import in_slurm_allocation
from dlperf.launch.runner import check_writable, describe_run
from dlperf.launch.slurm import submit_runs
from dlperf.metrics.environment import collect_environment
from dlperf.reporting.files import write_text_atomic
from dlperf.reporting.record import find_records
from dlperf.reporting.report import write_report
from dlperf.sweep import load_sweep_file, plan_sweep, run_sweep


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "sweep",
        parents=[common],
        help="run a YAML matrix of cases with repeats, then write the report",
        description="Run every case of a YAML sweep file (RunConfig keys; list values are matrix axes; "
        "`topology: [1n1g, 1n8g]`; `repeats: N`), each repeated, writing each record as it is produced to "
        "OUT/<model>/<N>n<G>g/. A failed run is recorded with its reason and the sweep goes on. Ends with "
        "report.md, summary.json and plots in OUT.",
    )
    parser.add_argument("config", help="sweep YAML file, e.g. configs/quick.yaml")
    parser.add_argument("--out", default="results", help="results folder (default ./results)")
    parser.add_argument("--repeats", type=positive_int, help="repeats per case (default: the file's, else 5)")
    parser.add_argument("--resume", action="store_true", help="skip runs whose record is complete; rerun the rest")
    parser.add_argument("--retry-failed", action="store_true", help="with --resume, also rerun failed runs")
    parser.add_argument("--overwrite", action="store_true", help="replace the records of an earlier sweep")
    add_launch_options(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    spec_text = Path(args.config).read_text(encoding="utf-8") if Path(args.config).is_file() else ""
    launch = launch_options(args)
    plan = plan_sweep(load_sweep_file(args.config), args.repeats, launch)
    if launch.dry_run:
        if launch.kind == "slurm" and not in_slurm_allocation():
            submit_runs(list(plan.runs()), args.out, launch, overwrite=True)
        else:
            print("\n".join(describe_run(config, repeat, args.out, launch) for config, repeat in plan.runs()))
        return 0
    check_writable(args.out)
    env = collect_environment()
    total = len(plan.cases) * plan.repeats
    console.print(f"sweep: {len(plan.cases)} cases x {plan.repeats} repeats = {total} runs -> {args.out}")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("runs", total=total)

        def on_progress(config, repeat, record) -> None:
            if record is None:
                progress.console.print(f"{config.model} {config.topology} #{repeat}: done before, skipped")
            else:
                progress.console.print(run_line(record))
            progress.advance(task)

        try:
            outcome = run_sweep(
                plan,
                args.out,
                env,
                resume=args.resume,
                overwrite=args.overwrite,
                retry_failed=args.retry_failed,
                on_progress=on_progress,
                launch=launch,
            )
        except KeyboardInterrupt:
            progress.stop()
            console.print(f"interrupted; finish with: dlperf sweep {args.config} --out {args.out} --resume")
            raise
    write_text_atomic(Path(args.out) / "sweep.yaml", spec_text)
    written = write_report(find_records(args.out), args.out)
    failed = len(outcome.failed)
    console.print(
        f"{len(outcome.ran)} runs done ({failed} failed), {outcome.skipped} skipped as complete; "
        f"report: {written[0].parent / 'report.md'}"
    )
    return 1 if failed else 0
