"""`dlperf sweep`: a YAML matrix of cases with repeats, resumable, ending in a report."""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dlperf.cli.declared_flags import add_declared, declared_options
from dlperf.cli.display import console, eta_text, run_line, say
from dlperf.cli.estimate import duration_estimates
from dlperf.cli.live import LogFollower
from dlperf.cli.run_flags import add_launch_options, launch_options
from dlperf.launch import RunJob
from dlperf.orchestration import (
    DryRunLines,
    Ended,
    Interrupted,
    Planned,
    Recorded,
    Skipped,
    Started,
    SweepEvent,
    SweepOptions,
    SweepPlan,
    SweepStart,
    resolve_sweep,
    stored_sweep_fields,
    sweep_to_report,
)
from dlperf.records.load import Record
from dlperf.wording import count

DESCRIPTION = (
    "Run every case of a YAML sweep file (run keys; list values are matrix axes; "
    "`topology: [1n1g, 1n8g]`; `repeats: N`), each repeated, writing each record as it is produced to "
    "OUT/<model>/<N>n<G>g/. A failed run is recorded with its reason and the sweep goes on. Ends with "
    "report.md, summary.json and plots in OUT."
)


def register(parser: argparse.ArgumentParser) -> None:
    add_declared(parser, SweepOptions)
    # What shapes a sweep besides its file, kept in its folder for --resume: the repeat rule and where it runs.
    stored = [*stored_sweep_fields(), *add_launch_options(parser)]
    parser.set_defaults(
        func=run, stored_options=stored, option_defaults={key: parser.get_default(key) for key in stored}
    )


def run(args: argparse.Namespace) -> int:
    given = {key: getattr(args, key) for key in args.stored_options}
    options = declared_options(SweepOptions, args)
    resolved = resolve_sweep(options, given, args.option_defaults)
    launch = launch_options(argparse.Namespace(**{**vars(args), **resolved.flags}))
    with SweepView() as view:
        outcome = sweep_to_report(resolved.options, launch, view.show, resolved.flags)
    if outcome is None:  # --dry-run: the commands were printed
        return 0
    failed = len(outcome.failed)
    say(
        f"{count(len(outcome.ran), 'run')} done ({failed} failed), {outcome.skipped} skipped as complete; "
        f"report: {outcome.report / 'report.md'}"
    )
    if outcome.failed_before:
        say(f"{count(len(outcome.failed_before), 'run')} failed before and kept failed; rerun them with: "
            f"{outcome.resume} --retry-failed")  # fmt: skip
    return 1 if failed or outcome.failed_before else 0


class SweepView:
    """The sweep's events as lines: plain ones (all that goes into a file), and on a terminal a progress bar; while
    the runs go, the log of the one going now is followed."""

    def __init__(self) -> None:
        self._running = contextlib.ExitStack()
        self._progress: Progress | None = None
        self._task: Any = None
        self._clock: SweepClock | None = None

    def __enter__(self) -> SweepView:
        return self

    def __exit__(self, *exc: object) -> None:
        self._running.close()

    def show(self, event: SweepEvent) -> None:
        if isinstance(event, DryRunLines):
            print(event.text)
        elif isinstance(event, Planned):
            planned = count(len(event.plan.cases), "case")
            say(f"sweep {event.sweep_id}: {planned} planned -> {event.out}; collecting the environment")
        elif isinstance(event, Started):
            self._start(event.plan, event.start, event.out)
        elif isinstance(event, Skipped):
            self._skipped(event.job, event.failed_before)
        elif isinstance(event, Recorded):
            self._recorded(event.job, event.record)
        elif isinstance(event, Interrupted):
            if self._progress is not None:
                self._progress.stop()
            say(f"interrupted; finish with: {event.resume} (the folder keeps the sweep's options)")
            self._running.close()
        elif isinstance(event, Ended):
            self._running.close()

    def _start(self, plan: SweepPlan, start: SweepStart, out: str) -> None:
        for warning in start.warnings:
            say(warning)
        for line in duration_estimates(plan, start.env):
            say(line)
        total = len(start.jobs)
        if plan.adaptive:
            say(
                f"sweep {start.sweep_id}: {count(len(plan.cases), 'case')}, each repeated until its median is "
                f"known within {plan.adaptive.target_ci:.2%} (3 to {plan.repeats} repeats, at most {total} runs) "
                f"-> {out}"
            )
        else:
            say(
                f"sweep {start.sweep_id}: {count(len(plan.cases), 'case')} x {count(plan.repeats, 'repeat')} = "
                f"{count(total, 'run')} -> {out}"
            )
        self._clock = SweepClock(start.jobs)
        started = time.time()
        self._running.enter_context(LogFollower(None, say, locate=lambda: running_log(start.jobs, started)))
        self._progress = self._running.enter_context(
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[eta]}"),
                console=console,
                disable=not console.is_terminal,  # into a file: the plain lines say it all, no cut progress line
            )
        )
        self._task = self._progress.add_task(self._clock.running(), total=total, eta="")

    def _advance(self, clock: SweepClock) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=clock.running(), eta=clock.eta())

    def _skipped(self, job: RunJob, failed_before: bool) -> None:
        assert self._clock is not None  # the runs start after Started
        self._clock.skip(job)
        state = "failed before, kept (--retry-failed reruns it)" if failed_before else "done before"
        say(f"{job.spec.model} {job.spec.topology} {job.plan.group} #{job.repeat}: {state}, skipped")
        self._advance(self._clock)

    def _recorded(self, job: RunJob, record: Record) -> None:
        clock = self._clock
        assert clock is not None  # the runs start after Started
        clock.finish(job)
        say(f"[{clock.done}/{clock.total}] {run_line(record)}" + (f"; {clock.eta()}" if clock.left else ""))
        self._advance(clock)


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
    """Which run goes now and when the sweep should end, from the runs done so far (skipped ones cost nothing):
    each run left at the mean of its own case's runs, a case not yet timed at the mean of all."""

    def __init__(self, jobs: list[RunJob]) -> None:
        self.todo = list(jobs)
        self.total = len(jobs)
        self.durations: dict[str, list[float]] = {}
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
        self.durations.setdefault(_case(job), []).append(time.monotonic() - self._since)
        self.skip(job)

    def running(self) -> str:
        if not self.todo:
            return "done"
        job = self.todo[0]
        return f"now {job.spec.model} {job.spec.topology} {job.plan.group} #{job.repeat}"

    def eta(self) -> str:
        every = [d for case in self.durations.values() for d in case]
        if not every:
            return eta_text(None, self.left)
        overall = sum(every) / len(every)
        means = {case: sum(d) / len(d) for case, d in self.durations.items()}
        untimed = list(dict.fromkeys(_case(job) for job in self.todo if _case(job) not in means))
        return eta_text(sum(means.get(_case(job), overall) for job in self.todo), self.left, untimed)


def _case(job: RunJob) -> str:
    return f"{job.spec.model} {job.spec.topology} {job.plan.group}"
