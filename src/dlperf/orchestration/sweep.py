"""A sweep from its options to its report in one call, `sweep`, telling the caller what happens as typed events:
the caller (the CLI) only shows them. The sequence: plan and check every case, refuse an earlier sweep's folder,
take the folder's lock, keep the options for --resume, collect the environment, run (or skip) every case and
repeat, write the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.launch import LaunchOptions, RunJob, launcher_for
from dlperf.orchestration.sweep_plan import (
    SweepOptions,
    SweepOutcome,
    SweepPlan,
    SweepStart,
    finish_sweep,
    plan_sweep_file,
    preflight_sweep,
    run_sweep,
    start_sweep,
    sweep_id_for,
)
from dlperf.orchestration.sweep_state import save_sweep_options
from dlperf.records.load import Record, load_record
from dlperf.records.lock import results_lock
from dlperf.records.paths import resume_command
from dlperf.records.store import check_writable, removed_if_refused
from dlperf.records.sweep_runs import save_planned
from dlperf.reporting.report import existing_report_files


@dataclass(frozen=True)
class DryRunLines:
    """--dry-run: the argument lists each run would start, as a shell reads them; nothing runs."""

    text: str


@dataclass(frozen=True)
class Planned:
    """Every case checked and the folder taken; the environment is collected next (a minute)."""

    sweep_id: str
    plan: SweepPlan
    out: str


@dataclass(frozen=True)
class Started:
    """The environment collected: the runs start now (`start.jobs`, in order; `start.warnings`: cases over this
    machine's memory)."""

    plan: SweepPlan
    start: SweepStart
    out: str


@dataclass(frozen=True)
class Skipped:
    """A run whose record --resume keeps; `failed_before`: a failed one kept (without --retry-failed)."""

    job: RunJob
    failed_before: bool


@dataclass(frozen=True)
class Recorded:
    """A run ended and its record (a failed run's too) is written."""

    job: RunJob
    record: Record


@dataclass(frozen=True)
class Interrupted:
    """Ctrl-C or SIGTERM while the runs go (raised again after this event); `resume` finishes the sweep."""

    resume: str


@dataclass(frozen=True)
class Ended:
    """Every run done or skipped; the report is written next."""


SweepEvent = DryRunLines | Planned | Started | Skipped | Recorded | Interrupted | Ended


@dataclass
class Outcome(SweepOutcome):
    """What a sweep did (its runs' records, how many it skipped as complete, which failed), where its report is,
    the command that finishes or extends it, and the failed runs it kept from before."""

    report: Path
    resume: str
    failed_before: list[RunJob] = field(default_factory=list)


def sweep_to_report(
    options: SweepOptions,
    launch: LaunchOptions,
    on_event: Callable[[SweepEvent], None],
    given: Mapping[str, Any] | None = None,
) -> Outcome | None:
    """Run the sweep of `options.config` where `launch` says; `given`: the options that shape it as the command
    line gave them (flag -> value), kept in the folder for --resume. None after --dry-run (its commands were an
    event)."""
    launcher = launcher_for(launch)
    plan = plan_sweep_file(options, launcher)  # checks it is UTF-8
    config = Path(str(options.config))
    spec_text = config.read_text(encoding="utf-8") if config.is_file() else ""
    if launch.dry_run:
        preflight_sweep(plan, options, launcher)
        on_event(DryRunLines(launcher.describe_all(plan.jobs(options.out))))
        return None
    created = check_writable(options.out)
    with results_lock(options.out):  # a second writer is refused now, not after the environment is collected
        with removed_if_refused(created):
            jobs = plan.jobs(options.out)
            if not (options.resume or options.overwrite):
                _refuse_finished(options.out, jobs)
            sweep_id = sweep_id_for(jobs, options.resume)
            on_event(Planned(sweep_id, plan, options.out))
            save_sweep_options(options.out, str(options.config), spec_text, dict(given or {}))
            save_planned(options.out, [job.paths for job in jobs], plan.adaptive is not None)  # for its reports
            start = start_sweep(plan, options, launcher, sweep_id)
        on_event(Started(plan, start, options.out))
        failed_before: list[RunJob] = []

        def on_skip(job: RunJob) -> None:
            record = load_record(job.paths.record)
            if record and record.status != "ok":
                failed_before.append(job)
            on_event(Skipped(job, job in failed_before))

        try:
            outcome = run_sweep(
                plan,
                options,
                start.env,
                launcher,
                on_skip=on_skip,
                on_record=lambda job, record: on_event(Recorded(job, record)),
                sweep_id=sweep_id,
            )
        except KeyboardInterrupt:  # Ctrl-C, and SIGTERM (cli.main.Terminated)
            on_event(Interrupted(resume_command(options.out)))
            raise
        on_event(Ended())
        report = finish_sweep(options, start.jobs)
        return Outcome(outcome.ran, outcome.skipped, report, resume_command(options.out), failed_before)


def _held(out: str, jobs: list[RunJob]) -> str | None:
    """What of an earlier sweep the folder holds: its records, its report, or an interrupted run's files."""
    existing = [job for job in jobs if job.paths.record.exists()]
    if existing:
        return f"{len(existing)} records of this sweep"
    if reports := existing_report_files(out, {"md", "json"}):
        return f"an earlier sweep's {reports[0].name}"
    begun = [path for job in jobs for path in (job.paths.log, job.paths.console) if path.exists()]
    return f"an interrupted run's {begun[0].name}" if begun else None


def _refuse_finished(out: str, jobs: list[RunJob]) -> None:
    """An earlier sweep's records, report or interrupted run (its log or console, no record yet) in this folder stay
    unless asked; the hint names --resume first."""
    what = _held(out, jobs)
    if what:
        raise ResultsError(
            f"{out} already holds {what}: finish or extend it with `{resume_command(out)}`, "
            "or pass --overwrite to start again (replaces them), or choose another --out"
        )
