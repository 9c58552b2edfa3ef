"""`dlperf predict`: data-parallel step time, throughput and speedup from a 1-device run and commbench records;
with `--model NAME`, a layout of that workload at any scale on a named accelerator, by the predictor it declares
(`Workload.predictor`, e.g. workloads/llama/predict.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, fields
from typing import Any

from dlperf.cli.declared_flags import add_declared, declared_options
from dlperf.cli.display import say
from dlperf.cli.run_flags import add_workload_options
from dlperf.errors import ConfigError
from dlperf.metrics.peaks import DEFAULT_PEAKS_FILE
from dlperf.predict import DEFAULT_BACKWARD_SHARE, links_from_records, predict_data_parallel, run_from_record
from dlperf.predict.accelerators import accelerator
from dlperf.predict.calibration import STACK_RECOMPUTE, STACKS, Measured, setting_for
from dlperf.predict.model import MAX_GRADIENT_BYTES, MIB
from dlperf.predict.records import op_links_from_records
from dlperf.predict.setting import Setting, Training
from dlperf.records.load import as_record
from dlperf.records.schema import RunRecord
from dlperf.records.validate import check_file
from dlperf.reporting.commbench_table import read_commbench
from dlperf.spec import setting
from dlperf.user_files import read_user_file
from dlperf.workloads import Workload, get_workload, predictors

DESCRIPTION = (
    "Predict DDP's step time, throughput and speedup at --devices per node x --nodes from a 1n1g "
    "run record (step time, gradient bytes) and commbench records (the all-reduce alpha-beta fit): ring "
    "all-reduce per bucket, hierarchical across nodes, overlapped with the backward pass as DDP does; the "
    "exposed part is added to the step. COMMBENCH_RECORD measured on one node is the intra-node link, one "
    "measured across nodes (one rank per node) the inter-node link."
)


def register(parser: argparse.ArgumentParser) -> None:
    add_declared(parser, PredictOptions)
    add_declared(parser, ModelOptions, choices={"model": list(predictors())})
    add_workload_options(parser, {name: predictor.ignored for name, predictor in predictors().items()})


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


@dataclass(frozen=True)
class ModelOptions:
    """`--model NAME`: a layout of a workload with a predictor, at any scale on a named accelerator."""

    FLAGS_GROUP = "a layout at any scale (--model)"

    model: str | None = setting(None, "llama or moe: predict that layout (below) instead of data parallelism",
                                choices=("llama",))  # fmt: skip
    accelerator: str | None = setting(None, "device by its data-sheet name (H100 SXM, H200 SXM, B200, GB200, "
                                      "A100 SXM 80GB, MI300X, V100 SXM2, ...) or NVML's")  # fmt: skip
    devices_per_node: int | None = setting(
        None, "devices per node (default the accelerator's usual system: 8, 72 for GB200)", bound="positive"
    )
    precision: str = setting("amp-bf16", "amp-bf16, amp-fp16 or fp32", choices=("amp-bf16", "amp-fp16", "fp32"))
    stack: str = setting("torchtitan", f"software stack whose fitted efficiency applies: {', '.join(STACKS)}",
                         choices=STACKS)  # fmt: skip
    async_tp: bool = setting(False, "async tensor parallelism (collectives overlapped with matmuls)")
    loss_parallel: bool = setting(False, "the loss on the vocabulary shards under TP (torchtitan's, Megatron's); "
                                  "dlperf's own runs gather the logits")  # fmt: skip
    recompute_mm_share: float | None = setting(
        None, "share of the block matmuls selective checkpointing recomputes (default the stack's: torchtitan's "
        "per-op policy 0.5, Megatron 0; dlperf's own runs 0)", bound="share",
    )  # fmt: skip
    efficiency: float | None = setting(None, "achieved fraction of the dense peak (overrides every source)",
                                       bound="positive share")  # fmt: skip
    calibrate: str | None = setting(None, "a one-device Llama run record on this accelerator: its achieved "
                                    "TFLOP/s set the efficiency")  # fmt: skip
    peaks: str = setting(str(DEFAULT_PEAKS_FILE), "`dlperf peak`'s store: a measured matmul peak caps the "
                         "efficiency")  # fmt: skip
    device_name: str | None = setting(None, "the name `dlperf peak` measured the device under (default "
                                      "--accelerator)")  # fmt: skip
    memory_gib: float | None = setting(None, "device memory (default the data sheet's)", bound="positive")
    memory_tbs: float | None = setting(None, "memory bandwidth, TB/s (default the data sheet's)", bound="positive")
    intra_node_gbs: float | None = setting(None, "scale-up link per device and direction, GB/s (default the "
                                           "data sheet's x 0.8)", bound="positive")  # fmt: skip
    inter_node_gbit: float | None = setting(None, "network per device, Gbit/s (default the usual system's x 0.8)",
                                            bound="positive")  # fmt: skip
    intra_latency_us: float | None = setting(None, "per ring step inside a node (default 5)", bound="non-negative")
    inter_latency_us: float | None = setting(None, "per ring step between nodes (default 10)", bound="non-negative")
    commbench: str | None = setting(None, "a `dlperf commbench` record on one node: the intra-node link")
    inter_commbench: str | None = setting(None, "a `dlperf commbench` record with one rank per node: the "
                                          "inter-node link")  # fmt: skip
    imbalance: float | None = setting(None, "moe, --routing learned: the busiest expert's tokens over the mean "
                                      "(default 1.45; a measured run's figure)", bound="positive")  # fmt: skip
    fp8_recipe: str | None = setting(None, "moe, --float8: tensorwise (default), blockwise (DeepSeek-V3's 128 x "
                                     "128) or mxfp8 (Blackwell's)",
                                     choices=("tensorwise", "blockwise", "mxfp8"))  # fmt: skip
    search: bool = setting(False, "rank the layouts that fit, best first, with why each loses")
    top: int = setting(10, "layouts --search shows (default 10)", bound="positive")
    json: bool = setting(False, "print JSON")


def run(args: argparse.Namespace) -> int:
    if args.model is not None:
        return _predict_model(args)
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


def _predict_model(args: argparse.Namespace) -> int:
    """`--model NAME`: the setting from the flags and measurements, the layout from the workload's own flags, shown
    as its predictor says."""
    options: ModelOptions = declared_options(ModelOptions, args)
    workload = get_workload(args.model)
    if options.accelerator is None:
        raise ConfigError(f"--model {workload.name} needs --accelerator NAME (e.g. 'H100 SXM'): the device to predict "
                          "for")  # fmt: skip
    per_node = options.devices_per_node or accelerator(options.accelerator).devices_per_node
    given = {f.name: getattr(args, f.name) for f in fields(workload.config_type) if hasattr(args, f.name)}
    values = {**given, "nodes": args.nodes, "devices_per_node": per_node, "precision": args.precision}
    values |= _moe_options(options, workload)
    shown = predictors()[workload.name].shown(values, _setting(options, workload, per_node), options.search,
                                              options.top, options.json)  # fmt: skip
    if isinstance(shown, dict):
        print(json.dumps(shown, indent=1))
    for line in shown if isinstance(shown, list) else ():
        say(line)
    return 0


def _moe_options(options: ModelOptions, workload: Workload) -> dict[str, Any]:
    """--imbalance and --fp8-recipe where given: the routed experts' (a model without them refuses them)."""
    given = {k: getattr(options, k) for k in ("imbalance", "fp8_recipe") if getattr(options, k) is not None}
    if given and "num_experts" not in {f.name for f in fields(workload.config_type)}:
        names = " and ".join(f"--{k.replace('_', '-')}" for k in given)
        raise ConfigError(f"{names} apply to --model moe (routed experts), not {workload.name}: drop them")
    return given


def _setting(options: ModelOptions, workload: Workload, per_node: int) -> Setting:
    share = STACK_RECOMPUTE[options.stack] if options.recompute_mm_share is None else options.recompute_mm_share
    training = Training(options.precision, recompute_mm_share=share, async_tp=options.async_tp,
                        loss_parallel=options.loss_parallel,
                        distributed_optimizer=options.stack == "megatron")  # fmt: skip
    return setting_for(
        options.accelerator, per_node, options.precision, options.stack, training, _measured(options, workload),
        {**{k: getattr(options, k) for k in ("memory_gib", "memory_tbs", "intra_node_gbs", "inter_node_gbit",
                                              "intra_latency_us", "inter_latency_us")}, **_links(options)},
    )  # fmt: skip


def _measured(options: ModelOptions, workload: Workload) -> Measured:
    record = None
    if options.calibrate:
        found, problem = check_file(options.calibrate)
        found = as_record(found) if found is not None else None
        if (not isinstance(found, RunRecord) or found.model != workload.name or found.world_size != 1
                or found.status != "ok" or not found.tflops_per_device):  # fmt: skip
            why = f" ({problem})" if problem else ""
            raise ConfigError(f"--calibrate {options.calibrate} is not a one-device {workload.report_title} run "
                              f"record{why}: give the JSON of a successful 1n1g `dlperf run --model "
                              f"{workload.name}`")  # fmt: skip
        record = found.tflops_per_device
    return Measured(options.peaks, options.device_name, record, options.efficiency)


def _links(options: ModelOptions) -> dict[str, Any]:
    records = [read_commbench(options.commbench)] if options.commbench else []
    inter_records = [read_commbench(options.inter_commbench)] if options.inter_commbench else []
    intra, inter = links_from_records(records, inter_records)
    intra_ops, inter_ops = op_links_from_records(records, inter_records)
    return {"intra_fit": intra, "inter_fit": inter, "intra_op_fits": intra_ops, "inter_op_fits": inter_ops}
