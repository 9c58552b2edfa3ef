"""`dlperf commbench`: collective bandwidth on the same topology and launchers as `dlperf run`."""

from __future__ import annotations

import argparse

from dlperf.cli.args import positive_float, positive_int, positive_int_or_auto
from dlperf.cli.options import add_launch_options, add_output_options, launch_options, prepare_single_run
from dlperf.commbench.bandwidth import OPS
from dlperf.engines import engine_names
from dlperf.errors import LaunchError
from dlperf.orchestration.run import execute
from dlperf.records.load import as_record
from dlperf.reporting.commbench_table import commbench_lines
from dlperf.workloads import spec_from_mapping
from dlperf.workloads.commbench import DEFAULT_SIZES, DTYPES


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "commbench",
        parents=[common],
        help="measure collective bandwidth on a run's topology",
        description="Time all-reduce, all-gather, reduce-scatter and point-to-point over a sweep of message sizes "
        "on the ranks a `dlperf run` with the same flags would start (NCCL on GPUs, gloo on CPUs); print "
        "algorithm and bus bandwidth and a latency/bandwidth (alpha-beta) fit per collective, and write a "
        "dlperf.commbench/1 record to OUT/commbench/<N>n<G>g/ for `dlperf predict` and `dlperf report`.",
    )
    what = parser.add_argument_group("what to measure")
    what.add_argument("--ops", default=",".join(OPS), help=f"comma-separated collectives (default {','.join(OPS)})")
    what.add_argument("--sizes", default=DEFAULT_SIZES, help=f"buffer sizes, K/M/G binary (default {DEFAULT_SIZES})")
    what.add_argument("--dtype", choices=DTYPES, default="fp32", help="element type (default fp32)")
    # --warmup-iters, --iters and --model commbench: the run flags an sbatch job script rebuilds the spec with
    what.add_argument(
        "--warmup", "--warmup-iters", type=positive_int, default=5, help="untimed calls per size first (default 5)"
    )
    what.add_argument("--repeats", "--iters", type=positive_int, default=20, help="timed calls per size (default 20)")
    what.add_argument("--model", choices=["commbench"], default="commbench", help=argparse.SUPPRESS)
    what.add_argument("--nodes", type=positive_int, help="number of nodes (default 1, or the number of --hosts)")
    what.add_argument("--devices-per-node", type=positive_int, default=1, help="ranks per node (default 1)")
    what.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cuda or cpu")
    what.add_argument("--engine", choices=engine_names(), default="torch", help="framework (default torch)")
    what.add_argument("--timeout", type=positive_float, default=3600.0, help="seconds before it is stopped")
    what.add_argument(
        "--cpu-threads",
        type=positive_int_or_auto,
        default="auto",
        help="threads of each rank on a CPU device (default auto: the cores over the devices per node)",
    )
    add_launch_options(parser)
    add_output_options(parser, "record")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    launch = launch_options(args)
    spec = spec_from_mapping(
        {
            "model": "commbench",
            "ops": args.ops,
            "sizes": args.sizes,
            "dtype": args.dtype,
            "warmup_iters": args.warmup,
            "iters": args.repeats,
            "nodes": args.nodes or len(launch.hosts) or 1,
            "devices_per_node": args.devices_per_node,
            "device": args.device,
            "engine": args.engine,
            "timeout": args.timeout,
            "cpu_threads": args.cpu_threads,
        }
    )
    prepared = prepare_single_run(spec, launch, args.repeat, args.out, args.overwrite)
    if prepared is None:  # --dry-run: the commands were printed
        return 0
    record = as_record(execute([prepared.job], prepared.launcher, prepared.env, overwrite=args.overwrite)[0])
    path = prepared.job.paths.record
    if record.status != "ok":
        raise LaunchError(f"commbench failed: {record.error} (record written to {path})")
    print("\n".join(commbench_lines([record])))
    print(f"record: {path}")
    return 0
