"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
import shlex
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.args import non_empty, positive_float, positive_int
from dlperf.cli.display import console, eta_text, run_line, say
from dlperf.cli.options import add_launch_options, launch_options
from dlperf.launch import RunJob
from dlperf.orchestration.run import launcher_for
from dlperf.orchestration.sweep import SweepOptions, finish_sweep, plan_sweep_file, run_sweep, start_sweep
from dlperf.records.schema import read_record


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
    parser.add_argument("--out", type=non_empty, default="results", help="results folder (default ./results)")
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


def sweep_options(args: argparse.Namespace) -> SweepOptions:
    return SweepOptions(
        config=args.config,
        out=args.out,
        repeats=args.repeats,
        target_ci=args.target_ci,
        max_repeats=args.max_repeats,
        resume=args.resume,
        overwrite=args.overwrite,
        retry_failed=args.retry_failed,
    )


def run(args: argparse.Namespace) -> int:
    options = sweep_options(args)
    launcher = launcher_for(launch_options(args))
    plan = plan_sweep_file(options, launcher)
    if launcher.options.dry_run:
        print(launcher.describe_all(plan.jobs(args.out)))
        return 0
    start = start_sweep(plan, options, launcher)
    for warning in start.warnings:
        say(warning)
    jobs, sweep_id = start.jobs, start.sweep_id
    total = len(jobs)
    if plan.adaptive:
        say(
            f"sweep {sweep_id}: {len(plan.cases)} cases, each repeated until its median is known within "
            f"{plan.adaptive.target_ci:.2%} (3 to {plan.repeats} repeats, at most {total} runs) -> {args.out}"
        )
    else:
        say(f"sweep {sweep_id}: {len(plan.cases)} cases x {plan.repeats} repeats = {total} runs -> {args.out}")
    clock = SweepClock(jobs)
    failed_before: list[RunJob] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=console,
    ) as progress:
        task = progress.add_task(clock.running(), total=total, eta="")

        def advance() -> None:
            progress.update(task, advance=1, description=clock.running(), eta=clock.eta())

        def on_skip(job: RunJob) -> None:
            clock.skip(job)
            record = read_record(job.paths.record)
            if record and record["status"] != "ok":
                failed_before.append(job)
            state = "failed before, kept (--retry-failed reruns it)" if job in failed_before else "done before"
            say(f"{job.spec.model} {job.spec.topology} {job.plan.group} #{job.repeat}: {state}, skipped")
            advance()

        def on_record(job: RunJob, record: dict) -> None:
            clock.finish(job)
            say(f"[{clock.done}/{total}] {run_line(record)}" + (f"; {clock.eta()}" if clock.left else ""))
            advance()

        try:
            outcome = run_sweep(
                plan, options, start.env, launcher, on_skip=on_skip, on_record=on_record, sweep_id=sweep_id
            )
        except KeyboardInterrupt:
            progress.stop()
            say(f"interrupted; finish with: {resume_command(args)}")
            raise
    report = finish_sweep(options, jobs)
    failed = len(outcome.failed)
    say(
        f"{len(outcome.ran)} runs done ({failed} failed), {outcome.skipped} skipped as complete; "
        f"report: {report / 'report.md'}"
    )
    if failed_before:
        say(f"{len(failed_before)} runs failed before and were kept failed; rerun them with: "
            f"{resume_command(args)} --retry-failed")  # fmt: skip
    return 1 if failed or failed_before else 0


def resume_command(args: argparse.Namespace) -> str:
    return shlex.join(["dlperf", "sweep", args.config, "--out", args.out, "--resume"])


class SweepClock:
    """Which run goes now and when the sweep should end, from the runs done so far (skipped ones cost nothing)."""

    def __init__(self, jobs: list[RunJob]) -> None:
        self.todo = list(jobs)
        self.durations: list[float] = []
        self.done = 0
        self._since = time.monotonic()

    @property
    def left(self) -> int:
        return len(self.todo)

    def skip(self, job: RunJob) -> None:
        self.todo.remove(job)
        self.done += 1
        self._since = time.monotonic()

    def finish(self, job: RunJob) -> None:
        self.durations.append(time.monotonic() - self._since)
        self.skip(job)

    def running(self) -> str:
        if not self.todo:
            return "done"
        job = self.todo[0]
        return f"now {job.spec.model} {job.spec.topology} {job.plan.group} #{job.repeat}"

    def eta(self) -> str:
        return eta_text(self.durations, self.left)
