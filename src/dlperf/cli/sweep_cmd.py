"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.args import positive_float, positive_int
from dlperf.cli.display import console, run_line
from dlperf.cli.options import add_launch_options, launch_options
from dlperf.engines import engine_versions
from dlperf.metrics.environment import collect_environment
from dlperf.orchestration.run import launcher_for
from dlperf.orchestration.sweep import load_sweep_file, plan_sweep, run_sweep
from dlperf.records.load import find_records
from dlperf.records.store import check_writable, write_text_atomic
from dlperf.reporting.report import write_report


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "sweep",
        parents=[common],
        help="run a YAML matrix of cases with repeats, then write the report",
        description="Run every case of a YAML sweep file (run keys; list values are matrix axes; "
        "`topology: [1n1g, 1n8g]`; `repeats: N`), each repeated, writing each record as it is produced to "
        "OUT/<model>/<N>n<G>g/. A failed run is recorded with its reason and the sweep goes on. Ends with "
        "report.md, summary.json and plots in OUT.",
    )
    parser.add_argument("config", help="sweep YAML file, e.g. configs/quick.yaml")
    parser.add_argument("--out", default="results", help="results folder (default ./results)")
    parser.add_argument(
        "--repeats",
        type=repeats_arg,
        help="repeats per case, or `auto`: until the 95%% interval of the median is within --target-ci "
        "(default: the file's `repeats`, else 5)",
    )
    parser.add_argument(
        "--target-ci",
        type=positive_float,
        metavar="PCT",
        help="with --repeats auto: target half-width of the median's 95%% interval, in percent (default 1)",
    )
    parser.add_argument(
        "--max-repeats", type=positive_int, help="with --repeats auto: most repeats per case (default 10)"
    )
    parser.add_argument("--resume", action="store_true", help="skip runs whose record is complete; rerun the rest")
    parser.add_argument("--retry-failed", action="store_true", help="with --resume, also rerun failed runs")
    parser.add_argument("--overwrite", action="store_true", help="replace the records of an earlier sweep")
    add_launch_options(parser)
    parser.set_defaults(func=run)


def repeats_arg(text: str) -> int | str:
    return "auto" if text.strip() == "auto" else positive_int(text)


def run(args: argparse.Namespace) -> int:
    spec_text = Path(args.config).read_text(encoding="utf-8") if Path(args.config).is_file() else ""
    launcher = launcher_for(launch_options(args))
    plan = plan_sweep(load_sweep_file(args.config), launcher, args.repeats, args.target_ci, args.max_repeats)
    if launcher.options.dry_run:
        print(launcher.describe_all(plan.jobs(args.out)))
        return 0
    check_writable(args.out)
    engines = sorted({spec.engine for spec, _ in plan.cases})
    env = {**collect_environment(), **engine_versions(engines)}
    total = len(plan.cases) * plan.repeats
    if plan.adaptive:
        console.print(
            f"sweep: {len(plan.cases)} cases, each repeated until its median is known within "
            f"{plan.adaptive.target_ci:.2%} (3 to {plan.repeats} repeats, at most {total} runs) -> {args.out}"
        )
    else:
        console.print(f"sweep: {len(plan.cases)} cases x {plan.repeats} repeats = {total} runs -> {args.out}")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("runs", total=total)

        def on_skip(job) -> None:
            progress.console.print(f"{job.spec.model} {job.spec.topology} #{job.repeat}: done before, skipped")
            progress.advance(task)

        def on_record(job, record) -> None:
            progress.console.print(run_line(record), markup=False)  # flags are in [brackets]
            progress.advance(task)

        try:
            outcome = run_sweep(
                plan,
                args.out,
                env,
                launcher,
                resume=args.resume,
                overwrite=args.overwrite,
                retry_failed=args.retry_failed,
                on_skip=on_skip,
                on_record=on_record,
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
