"""`dlperf run`: one benchmark run of one case."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from dlperf.cli.display import percent, say, show_record
from dlperf.cli.estimate import single_run_estimate
from dlperf.cli.live import LogFollower, WindowExtra
from dlperf.cli.run_flags import (
    add_launch_options,
    add_output_options,
    add_run_options,
    explicit_run_values,
    launch_options,
)
from dlperf.errors import LaunchError
from dlperf.launch import Launcher, RunJob
from dlperf.orchestration import FORCE_HELP, RunHooks, kind_of, run_one, training_spec, window_figures
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan

DESCRIPTION = (
    "Benchmark one case: warm up, time --iters iterations in windows, write the log and a JSON "
    "record to OUT/<model>/<N>n<G>g/. Several devices per node run as ranks under torchrun's launcher."
)


def register(parser: argparse.ArgumentParser) -> None:
    add_run_options(parser)
    add_launch_options(parser)
    add_output_options(parser)
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)


def run(args: argparse.Namespace) -> int:
    launch = launch_options(args)
    spec = training_spec(explicit_run_values(args), launch)
    hooks = RunHooks(say, around=_follow)
    record = run_one(
        spec, launch, args.out, repeat=args.repeat, overwrite=args.overwrite, force=args.force, hooks=hooks
    )
    if record is None:  # --dry-run: the commands were said
        return 0
    path = record.origin.path
    if record.status != "ok":
        raise LaunchError(f"run failed: {record.error} (record written to {path})")
    show_record(record, str(path))
    return 0


@contextlib.contextmanager
def _follow(job: RunJob, launcher: Launcher, env: dict) -> Iterator[None]:
    """While the run goes: how long it should take (on this machine), where its log is, its windows as they close."""
    spec = job.spec
    if launcher.local and (estimate := single_run_estimate(spec, job.plan, env)):
        say(estimate)
    say(f"log: {job.paths.log}{launcher.log_note}")
    try:
        with LogFollower(job.paths.log, say, window_extra(spec, job.plan, env), plain=not kind_of(spec).shows_windows):
            yield
    except KeyboardInterrupt:  # Ctrl-C (and SIGTERM): the same command again would be refused by the log it left
        if job.paths.log.exists():
            say(interrupted_hint(job))
        raise


def interrupted_hint(job: RunJob) -> str:
    """What to run after an interrupted run, whose log stays where the same command would write again."""
    return (
        f"the interrupted run's log stays at {job.paths.log}: run again with --repeat {job.repeat + 1} to keep it "
        "beside the new run, or with --overwrite to replace it"
    )


def window_extra(spec: RunSpec, plan: WorkloadPlan, env: dict) -> WindowExtra | None:
    """The workload's own per-window figures (GPT, Llama: tokens/s, TFLOP/s per device, MFU), where it has any."""
    device = (env.get("gpus") or [{}])[0].get("name", "cpu") if spec.device != "cpu" else "cpu"
    if window_figures(spec, plan, 1.0, device) is None:
        return None

    def extra(samples_per_s: float) -> str:
        figures = window_figures(spec, plan, samples_per_s, device)
        assert figures is not None  # the workload derives tokens (checked above)
        tflops = f"{figures.tflops_per_device:.3g} TFLOP/s per device"
        return f"{figures.tokens_per_s:.0f} tokens/s  {tflops}  MFU {percent(figures.mfu)}"

    return extra
