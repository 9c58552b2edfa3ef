"""`dlperf commbench`: collective bandwidth on the same topology and launchers as `dlperf run`."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

from dlperf.cli.declared_flags import declared_options
from dlperf.cli.run_flags import add_launch_options, add_output_options, launch_options
from dlperf.engines import engine_names
from dlperf.errors import LaunchError
from dlperf.metrics.bandwidth import OPS
from dlperf.orchestration import RunHooks, run_one
from dlperf.reporting.commbench_table import commbench_lines
from dlperf.spec import setting
from dlperf.workloads import spec_from_mapping
from dlperf.workloads.commbench import DEFAULT_SIZES, DTYPES

DESCRIPTION = (
    "Time all-reduce, all-gather, reduce-scatter and point-to-point over a sweep of message sizes "
    "on the ranks a `dlperf run` with the same flags would start (NCCL on GPUs, gloo on CPUs); print "
    "algorithm and bus bandwidth and a latency/bandwidth (alpha-beta) fit per collective, and write a "
    "dlperf.commbench/1 record to OUT/commbench/<N>n<G>g/ for `dlperf predict` and `dlperf report`."
)


@dataclass(frozen=True)
class CommbenchOptions:
    """What to measure; --warmup-iters, --iters and --model commbench are the run flags an sbatch job script
    rebuilds the spec with (the spec's `warmup_iters` and `iters`)."""

    FLAGS_GROUP = "what to measure"

    ops: str = setting(",".join(OPS), f"comma-separated collectives (default {','.join(OPS)})")
    sizes: str = setting(DEFAULT_SIZES, f"buffer sizes, K/M/G binary (default {DEFAULT_SIZES})")
    dtype: str = setting("fp32", "element type (default fp32)", choices=DTYPES)
    warmup: int = setting(
        5, "untimed calls per size first (default 5)", bound="positive", flag=("--warmup", "--warmup-iters")
    )
    repeats: int = setting(20, "timed calls per size (default 20)", bound="positive", flag=("--repeats", "--iters"))
    model: str = setting("commbench", argparse.SUPPRESS, choices=("commbench",))
    nodes: int | None = setting(None, "number of nodes (default 1, or the number of --hosts)", bound="positive")
    devices_per_node: int = setting(1, "ranks per node (default 1)", bound="positive")
    device: str = setting("auto", "auto (CUDA when present, else CPU), cuda or cpu")
    engine: str = setting("torch", "framework (default torch)", choices=tuple(engine_names()))
    timeout: float = setting(3600.0, "seconds before it is stopped", bound="positive")
    cpu_threads: int | str = setting(
        "auto", "threads of each rank on a CPU device (default auto: the cores over the devices per node)",
        bound="positive or auto",
    )  # fmt: skip


OPTIONS = (CommbenchOptions, add_launch_options, add_output_options)


def run(args: argparse.Namespace) -> int:
    launch = launch_options(args)
    values = dataclasses.asdict(declared_options(CommbenchOptions, args))
    values |= {"warmup_iters": values.pop("warmup"), "iters": values.pop("repeats")}
    spec = spec_from_mapping({**values, "nodes": args.nodes or len(launch.hosts) or 1})
    record = run_one(spec, launch, args.out, repeat=args.repeat, overwrite=args.overwrite, hooks=RunHooks(say=print))
    if record is None:  # --dry-run: the commands were printed
        return 0
    path = record.origin.path
    if record.status != "ok":
        raise LaunchError(f"commbench failed: {record.error} (record written to {path})")
    print("\n".join(commbench_lines([record])))
    print(f"record: {path}")
    return 0
