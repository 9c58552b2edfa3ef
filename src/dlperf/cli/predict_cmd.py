"""`dlperf predict`: data-parallel step time, throughput and speedup from a 1-device run and commbench records;
with `--model llama`, a Llama layout at any scale on a named accelerator (cli/predict_llama.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from dlperf.cli import predict_llama
from dlperf.cli.declared_flags import add_declared
from dlperf.errors import ConfigError
from dlperf.predict import DEFAULT_BACKWARD_SHARE, links_from_records, predict_data_parallel, run_from_record
from dlperf.predict.model import MAX_GRADIENT_BYTES, MIB
from dlperf.records.validate import check_file
from dlperf.reporting.commbench_table import read_commbench
from dlperf.spec import setting
from dlperf.user_files import read_user_file


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "predict",
        parents=[common],
        help="predict data-parallel scaling from a 1-device run and commbench records",
        description="Predict DDP's step time, throughput and speedup at --devices per node x --nodes from a 1n1g "
        "run record (step time, gradient bytes) and commbench records (the all-reduce alpha-beta fit): ring "
        "all-reduce per bucket, hierarchical across nodes, overlapped with the backward pass as DDP does; the "
        "exposed part is added to the step. COMMBENCH_RECORD measured on one node is the intra-node link, one "
        "measured across nodes (one rank per node) the inter-node link.",
    )
    add_declared(parser, PredictOptions)
    predict_llama.add_options(parser)
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class PredictOptions:
    run_record: str | None = setting(None, "JSON record of a successful 1n1g `dlperf run`", positional="?")
    commbench_record: str | None = setting(None, "JSON record written by `dlperf commbench`", positional="?")
    inter_record: str | None = setting(None, "a second commbench record: the inter-node link")
    devices: int | None = setting(None, "devices per node (data parallelism)", bound="positive")
    nodes: int = setting(1, "nodes (default 1)", bound="positive")
    backward_share: float = setting(
        DEFAULT_BACKWARD_SHARE, "fraction of the step that is the backward pass (default 2/3)", bound="positive share"
    )
    gradient_bytes: int | None = setting(None, "gradient bytes (default: the run record's)", bound="positive")
    bucket_mb: float = setting(25.0, "DDP bucket size in MiB (default 25)", bound="positive")
    overlap: bool = setting(
        True,
        "hide communication behind the backward pass as DDP does; --no-overlap hides none (gloo on CPUs: the "
        "all-reduce uses the cores that compute)",
    )


def run(args: argparse.Namespace) -> int:
    if args.model is not None:
        return predict_llama.run(args)
    if args.run_record is None or args.commbench_record is None or args.devices is None:
        raise ConfigError(
            "dlperf predict needs RUN_RECORD COMMBENCH_RECORD --devices N (data parallelism from a 1n1g run), or "
            "--model llama --accelerator NAME (a Llama layout from data sheets and measurements)"
        )
    read_user_file(args.run_record, "run record")  # a FIFO or device is refused here, not waited on
    record, problem = check_file(args.run_record)
    if record is None:
        why = f" ({problem})" if problem else ""
        raise ConfigError(f"{args.run_record} is not a dlperf run record{why}: give the JSON `dlperf run` wrote")
    if not 1 <= args.bucket_mb * MIB <= MAX_GRADIENT_BYTES:
        raise ConfigError(f"--bucket-mb {args.bucket_mb:g} is no bucket size: give MiB between 1e-6 and 2^40, e.g. 25")
    single = run_from_record(record, args.gradient_bytes, args.backward_share, round(args.bucket_mb * MIB))
    inter_records = [read_commbench(args.inter_record)] if args.inter_record else []
    intra, inter = links_from_records([read_commbench(args.commbench_record)], inter_records)
    got = predict_data_parallel(single, args.devices, args.nodes, intra, inter, args.overlap)
    print(
        f"1n1g: {single.step_time_s * 1e3:.2f} ms per step, {single.throughput:.2f} samples/s, "
        f"{single.gradient_bytes:,} gradient bytes, backward {single.backward_share:.3f} of the step"
    )
    print(f"{args.nodes}n{args.devices}g predicted:")
    print(f"  step time     {got.step_time_s * 1e3:.2f} ms ({got.comm_s * 1e3:.2f} ms all-reduce, "
          f"{got.exposed_s * 1e3:.2f} ms exposed, {got.buckets} buckets)")  # fmt: skip
    print(f"  throughput    {got.throughput:.2f} samples/s")
    print(f"  speedup       {got.speedup:.2f} (efficiency {got.efficiency:.1%})")
    return 0
