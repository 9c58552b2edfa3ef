"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
import re
import shlex
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.args import positive_float, positive_int
from dlperf.cli.display import console, eta_text, run_line, say
from dlperf.cli.options import add_launch_options, launch_options
from dlperf.engines import engine_versions
from dlperf.errors import ConfigError
from dlperf.launch import Launcher, RunJob
from dlperf.metrics.environment import collect_environment
from dlperf.orchestration.preflight import preflight_warning
from dlperf.orchestration.run import launcher_for
from dlperf.orchestration.sweep import (
    SweepPlan,
    load_sweep_file,
    new_sweep_id,
    plan_sweep,
    resumed_sweep_id,
    run_sweep,
)
from dlperf.records.store import check_writable, write_text_atomic
from dlperf.records.validate import read_record
from dlperf.reporting.report import refuse_to_replace, write_report

FLAG_RE = re.compile(r"--([a-z][a-z0-9-]*)")
SWEEP_FLAGS = ("--repeats", "--target-ci", "--max-repeats")


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
    launcher = launcher_for(launch_options(args))
    plan = _plan(args.config, launcher, args.repeats, args.target_ci, args.max_repeats)  # checks it is UTF-8
    spec_text = Path(args.config).read_text(encoding="utf-8") if Path(args.config).is_file() else ""
    if launcher.options.dry_run:
        print(launcher.describe_all(plan.jobs(args.out)))
        return 0
    if not (args.resume or args.overwrite):  # another sweep's report in this folder stays unless asked
        refuse_to_replace(args.out, {"md", "json"})
    check_writable(args.out)
    engines = sorted({spec.engine for spec, _ in plan.cases})
    env = {**collect_environment(), **engine_versions(engines)}
    if launcher.local:
        for spec, case_plan in plan.cases:
            if warning := preflight_warning(spec, case_plan, env):
                say(warning)
    jobs = plan.jobs(args.out)
    sweep_id = (resumed_sweep_id(jobs) if args.resume else None) or new_sweep_id()
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
                plan,
                args.out,
                env,
                launcher,
                resume=args.resume,
                overwrite=args.overwrite,
                retry_failed=args.retry_failed,
                on_skip=on_skip,
                on_record=on_record,
                sweep_id=sweep_id,
            )
        except KeyboardInterrupt:
            progress.stop()
            say(f"interrupted; finish with: {resume_command(args)}")
            raise
    write_text_atomic(Path(args.out) / "sweep.yaml", spec_text)
    # this sweep's own records, not whatever else lies below the folder
    written = write_report([r for job in jobs if (r := read_record(job.paths.record))], args.out)
    failed = len(outcome.failed)
    say(
        f"{len(outcome.ran)} runs done ({failed} failed), {outcome.skipped} skipped as complete; "
        f"report: {written[0].parent / 'report.md'}"
    )
    if failed_before:
        say(f"{len(failed_before)} runs failed before and were kept failed; rerun them with: "
            f"{resume_command(args)} --retry-failed")  # fmt: skip
    return 1 if failed or failed_before else 0


def _plan(
    config: str, launcher: Launcher, repeats: int | str | None, target_ci: float | None, max_repeats: int | None
) -> SweepPlan:
    """The sweep's plan; a bad value is named by the file and its YAML key, not by a command-line flag."""
    try:
        return plan_sweep(load_sweep_file(config), launcher, repeats, target_ci, max_repeats)
    except ConfigError as error:
        message = str(error)
        if message.startswith(f"sweep file {config}") or any(f in message for f in SWEEP_FLAGS):
            raise  # names the file already, or a flag of this command rather than a key of the file
        key = FLAG_RE.search(message)
        where = f", key {key[1].replace('-', '_')}" if key else ""
        text = FLAG_RE.sub(lambda m: m[1].replace("-", "_"), message)
        raise ConfigError(f"sweep file {config}{where}: {text}") from None


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
