"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import time
from dataclasses import fields
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.display import console, counted, eta_text, run_line, say
from dlperf.cli.estimate import duration_estimates
from dlperf.cli.flags import add_declared
from dlperf.cli.live import LogFollower
from dlperf.cli.options import add_launch_options, launch_options
from dlperf.errors import ConfigError, ResultsError
from dlperf.launch import Launcher, RunJob
from dlperf.orchestration.run import launcher_for
from dlperf.orchestration.sweep import (
    SweepOptions,
    SweepPlan,
    finish_sweep,
    plan_sweep_file,
    preflight_sweep,
    run_sweep,
    start_sweep,
    stored_sweep_fields,
    sweep_id_for,
)
from dlperf.orchestration.sweep_state import load_sweep_options, merge_options, save_sweep_options, stored_config
from dlperf.records.load import load_record
from dlperf.records.lock import results_lock
from dlperf.records.store import check_writable
from dlperf.reporting.report import existing_report_files


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
    add_declared(parser, SweepOptions)
    # What shapes a sweep besides its file, kept in its folder for --resume: the repeat rule and where it runs.
    stored = [*stored_sweep_fields(), *add_launch_options(parser)]
    parser.set_defaults(
        func=run, stored_options=stored, option_defaults={key: parser.get_default(key) for key in stored}
    )


def _resume_options(args: argparse.Namespace) -> None:
    """With --resume, take the sweep file and options the folder stored at the sweep's start."""
    stored = load_sweep_options(args.out) if args.resume else None
    if stored is not None:
        given = {key: getattr(args, key) for key in args.stored_options}
        for key, value in merge_options(stored["options"], given, args.option_defaults).items():
            setattr(args, key, value)
        if args.config is None:
            copy = stored_config(args.out)
            args.config = str(copy) if copy.is_file() else stored.get("config")
    if args.config is None:
        hint = " (this folder stored no sweep options to resume)" if args.resume else ""
        raise ConfigError(f"give the sweep file, e.g. `dlperf sweep configs/quick.yaml`{hint}")


def sweep_options(args: argparse.Namespace) -> SweepOptions:
    return SweepOptions(**{f.name: getattr(args, f.name) for f in fields(SweepOptions)})


def run(args: argparse.Namespace) -> int:
    _resume_options(args)
    launcher = launcher_for(launch_options(args))
    options = sweep_options(args)
    plan = plan_sweep_file(options, launcher)  # checks it is UTF-8
    spec_text = Path(args.config).read_text(encoding="utf-8") if Path(args.config).is_file() else ""
    if launcher.options.dry_run:
        preflight_sweep(plan, options, launcher)
        print(launcher.describe_all(plan.jobs(args.out)))
        return 0
    check_writable(args.out)
    with results_lock(args.out):  # a second writer is refused now, not after the environment is collected
        return _run_locked(args, options, launcher, plan, spec_text)


def _refuse_finished(args: argparse.Namespace, jobs: list[RunJob]) -> None:
    """An earlier sweep's records or report in this folder stay unless asked; the hint names --resume first."""
    existing = [job for job in jobs if job.paths.record.exists()]
    reports = existing_report_files(args.out, {"md", "json"})
    if existing or reports:
        what = f"{len(existing)} records of this sweep" if existing else f"an earlier sweep's {reports[0].name}"
        raise ResultsError(
            f"{args.out} already holds {what}: finish or extend it with `{resume_command(args)}`, "
            "or pass --overwrite to start again (replaces them), or choose another --out"
        )


def _run_locked(
    args: argparse.Namespace, options: SweepOptions, launcher: Launcher, plan: SweepPlan, spec_text: str
) -> int:
    jobs = plan.jobs(args.out)
    if not (args.resume or args.overwrite):
        _refuse_finished(args, jobs)
    total = len(jobs)
    sweep_id = sweep_id_for(jobs, args.resume)
    say(f"sweep {sweep_id}: {counted(len(plan.cases), 'case')} planned -> {args.out}; collecting the environment")
    save_sweep_options(args.out, args.config, spec_text, {key: getattr(args, key) for key in args.stored_options})
    start = start_sweep(plan, options, launcher, sweep_id)
    for warning in start.warnings:
        say(warning)
    for line in duration_estimates(plan, start.env):
        say(line)
    jobs = start.jobs
    if plan.adaptive:
        say(
            f"sweep {sweep_id}: {counted(len(plan.cases), 'case')}, each repeated until its median is known within "
            f"{plan.adaptive.target_ci:.2%} (3 to {plan.repeats} repeats, at most {total} runs) -> {args.out}"
        )
    else:
        say(
            f"sweep {sweep_id}: {counted(len(plan.cases), 'case')} x {counted(plan.repeats, 'repeat')} = "
            f"{counted(total, 'run')} -> {args.out}"
        )
    clock = SweepClock(jobs)
    failed_before: list[RunJob] = []
    started = time.time()
    follower = LogFollower(None, say, locate=lambda: running_log(jobs, started))
    with (
        follower,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            disable=not console.is_terminal,  # into a file: the plain lines say it all, no cut progress line
        ) as progress,
    ):
        task = progress.add_task(clock.running(), total=total, eta="")

        def advance() -> None:
            progress.update(task, advance=1, description=clock.running(), eta=clock.eta())

        def on_skip(job: RunJob) -> None:
            clock.skip(job)
            record = load_record(job.paths.record)
            if record and record.status != "ok":
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
        except KeyboardInterrupt:  # Ctrl-C, and SIGTERM (cli.main.Terminated)
            progress.stop()
            say(f"interrupted; finish with: {resume_command(args)} (the folder keeps the sweep's options)")
            raise
    report = finish_sweep(options, jobs)
    failed = len(outcome.failed)
    say(
        f"{counted(len(outcome.ran), 'run')} done ({failed} failed), {outcome.skipped} skipped as complete; "
        f"report: {report / 'report.md'}"
    )
    if failed_before:
        say(f"{counted(len(failed_before), 'run')} failed before and kept failed; rerun them with: "
            f"{resume_command(args)} --retry-failed")  # fmt: skip
    return 1 if failed or failed_before else 0


def resume_command(args: argparse.Namespace) -> str:
    """`dlperf sweep --resume --out OUT`: the folder stores the file and every option, so nothing else is needed."""
    return shlex.join(["dlperf", "sweep", "--resume", "--out", args.out])


def running_log(jobs: list[RunJob], since: float) -> tuple[Path, str] | None:
    """The log of the sweep's run going now (written since `since`, this sweep's start, and without its record
    yet) and a line naming the run; an interrupted run's old log, which a resumed sweep replaces, is not it."""
    for job in jobs:
        log = job.paths.log
        with contextlib.suppress(FileNotFoundError):
            if log.stat().st_mtime >= since and not job.paths.record.exists():
                return log, f"now {job.spec.model} {job.spec.topology} {job.plan.group} #{job.repeat}:"
    return None


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
