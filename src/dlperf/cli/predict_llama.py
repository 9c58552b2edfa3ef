"""`dlperf predict --model llama`: flags, and the prediction or the ranked layouts shown (the model is
predict/llama.py, the joining to the workload orchestration/llama_predict.py)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any, get_type_hints

from dlperf.cli.declared_flags import add_declared, declared_options, field_help, flag_kind
from dlperf.cli.display import say
from dlperf.errors import ConfigError
from dlperf.metrics.flops import LLM_FLOPS_FORMULA
from dlperf.metrics.peaks import DEFAULT_PEAKS_FILE
from dlperf.orchestration import llama_predict
from dlperf.predict import links_from_records, op_links_from_records
from dlperf.predict.accelerators import accelerator
from dlperf.predict.calibration import STACKS, Measured
from dlperf.predict.llama import Training
from dlperf.records.load import as_record
from dlperf.records.schema import RunRecord
from dlperf.records.validate import check_file
from dlperf.reporting.commbench_table import read_commbench
from dlperf.spec import flag, setting
from dlperf.workloads.llama.config import LlamaConfig

GROUP = "--model llama"
GIB = 1024**3
IGNORED = {"lr", "weight_decay", "rope_theta"}  # a training run's settings that change no time or memory
STACK_RECOMPUTE = {"torchtitan": 0.5, "torchtitan-compile": 0.5, "megatron": 0.0}


@dataclass(frozen=True)
class LlamaPredictOptions:
    model: str | None = setting(None, "llama: predict a Llama layout (below) instead of data parallelism",
                                choices=("llama",), group=GROUP)  # fmt: skip
    accelerator: str | None = setting(None, "device by its data-sheet name (H100 SXM, H200 SXM, B200, GB200, "
                                      "A100 SXM 80GB, MI300X, V100 SXM2, ...) or NVML's", group=GROUP)  # fmt: skip
    devices_per_node: int | None = setting(
        None, "devices per node (default the accelerator's usual system: 8, 72 for GB200)", bound="positive",
        group=GROUP,
    )  # fmt: skip
    precision: str = setting("amp-bf16", "amp-bf16, amp-fp16 or fp32", choices=("amp-bf16", "amp-fp16", "fp32"),
                             group=GROUP)  # fmt: skip
    stack: str = setting("torchtitan", f"software stack whose fitted efficiency applies: {', '.join(STACKS)}",
                         choices=STACKS, group=GROUP)  # fmt: skip
    async_tp: bool = setting(False, "async tensor parallelism (collectives overlapped with matmuls)", group=GROUP)
    loss_parallel: bool = setting(False, "the loss on the vocabulary shards under TP (torchtitan's, Megatron's); "
                                  "dlperf's own runs gather the logits", group=GROUP)  # fmt: skip
    recompute_mm_share: float | None = setting(
        None, "share of the block matmuls selective checkpointing recomputes (default the stack's: torchtitan's "
        "per-op policy 0.5, Megatron 0; dlperf's own runs 0)", bound="share", group=GROUP,
    )  # fmt: skip
    efficiency: float | None = setting(None, "achieved fraction of the dense peak (overrides every source)",
                                       bound="positive share", group=GROUP)  # fmt: skip
    calibrate: str | None = setting(None, "a one-device Llama run record on this accelerator: its achieved "
                                    "TFLOP/s set the efficiency", group=GROUP)  # fmt: skip
    peaks: str = setting(str(DEFAULT_PEAKS_FILE), "`dlperf peak`'s store: a measured matmul peak caps the "
                         "efficiency", group=GROUP)  # fmt: skip
    device_name: str | None = setting(None, "the name `dlperf peak` measured the device under (default "
                                      "--accelerator)", group=GROUP)  # fmt: skip
    memory_gib: float | None = setting(None, "device memory (default the data sheet's)", bound="positive",
                                       group=GROUP)  # fmt: skip
    memory_tbs: float | None = setting(None, "memory bandwidth, TB/s (default the data sheet's)", bound="positive",
                                       group=GROUP)  # fmt: skip
    intra_node_gbs: float | None = setting(None, "scale-up link per device and direction, GB/s (default the "
                                           "data sheet's x 0.8)", bound="positive", group=GROUP)  # fmt: skip
    inter_node_gbit: float | None = setting(None, "network per device, Gbit/s (default the usual system's x 0.8)",
                                            bound="positive", group=GROUP)  # fmt: skip
    intra_latency_us: float | None = setting(None, "per ring step inside a node (default 5)", bound="non-negative",
                                             group=GROUP)  # fmt: skip
    inter_latency_us: float | None = setting(None, "per ring step between nodes (default 10)",
                                             bound="non-negative", group=GROUP)  # fmt: skip
    commbench: str | None = setting(None, "a `dlperf commbench` record on one node: the intra-node link",
                                    group=GROUP)  # fmt: skip
    inter_commbench: str | None = setting(None, "a `dlperf commbench` record with one rank per node: the "
                                          "inter-node link", group=GROUP)  # fmt: skip
    search: bool = setting(False, "rank the layouts that fit, best first, with why each loses", group=GROUP)
    top: int = setting(10, "layouts --search shows (default 10)", bound="positive", group=GROUP)
    json: bool = setting(False, "print JSON", group=GROUP)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options above, then the Llama workload's own shape and layout flags (as `dlperf run` has them)."""
    group = parser.add_argument_group(GROUP)
    add_declared(parser, LlamaPredictOptions, {GROUP: group})
    hints = get_type_hints(LlamaConfig)
    for f in fields(LlamaConfig):
        if f.name not in IGNORED:
            kind = flag_kind(f, hints[f.name])
            group.add_argument(flag(f.name), default=argparse.SUPPRESS, help=field_help(f).replace("%", "%%"), **kind)


def _values(args: argparse.Namespace, devices_per_node: int) -> dict[str, Any]:
    given = {f.name: getattr(args, f.name) for f in fields(LlamaConfig) if hasattr(args, f.name)}
    return {**given, "nodes": args.nodes, "devices_per_node": devices_per_node, "precision": args.precision}


def run(args: argparse.Namespace) -> int:
    options: LlamaPredictOptions = declared_options(LlamaPredictOptions, args)
    if options.accelerator is None:
        raise ConfigError("--model llama needs --accelerator NAME (e.g. 'H100 SXM'): the device to predict for")
    acc = accelerator(options.accelerator)
    per_node = options.devices_per_node or acc.devices_per_node
    values = _values(args, per_node)
    share = options.recompute_mm_share
    training = Training(
        precision=options.precision,
        recompute_mm_share=STACK_RECOMPUTE[options.stack] if share is None else share,
        async_tp=options.async_tp,
        loss_parallel=options.loss_parallel,
    )
    setting_ = llama_predict.setting_for(
        options.accelerator, per_node, options.precision, options.stack, training, _measured(options),
        {**{k: getattr(options, k) for k in ("memory_gib", "memory_tbs", "intra_node_gbs", "inter_node_gbit",
                                              "intra_latency_us", "inter_latency_us")}, **_links(options)},
    )  # fmt: skip
    if options.search:
        return _search(values, setting_, options)
    try:
        layout, got = llama_predict.predict(values, setting_)
    except ConfigError as error:
        raise ConfigError(f"{error}{_what_fits(values, setting_)}") from None
    spec, _ = llama_predict.llama_spec(values)
    if options.json:
        print(json.dumps({"layout": layout.as_record(), "accelerator": acc.name, "nodes": args.nodes,
                          "devices_per_node": per_node, "prediction": asdict(got), "sources": setting_.sources},
                         indent=1))  # fmt: skip
        return 0
    _show(spec.workload, layout, got, setting_, args.nodes, per_node)
    if not got.fits:
        say(f"  does not fit{_what_fits(values, setting_) or ' in any layout searched: add devices'}")
    return 0


def _measured(options: LlamaPredictOptions) -> Measured:
    record = None
    if options.calibrate:
        found, problem = check_file(options.calibrate)
        found = as_record(found) if found is not None else None
        if (not isinstance(found, RunRecord) or found.model != "llama" or found.world_size != 1 or found.status != "ok"
                or not found.tflops_per_device):  # fmt: skip
            why = f" ({problem})" if problem else ""
            raise ConfigError(f"--calibrate {options.calibrate} is not a one-device Llama run record{why}: give the "
                              "JSON of a successful 1n1g `dlperf run --model llama`")  # fmt: skip
        record = found.tflops_per_device
    return Measured(options.peaks, options.device_name, record, options.efficiency)


def _links(options: LlamaPredictOptions) -> dict[str, Any]:
    records = [read_commbench(options.commbench)] if options.commbench else []
    inter_records = [read_commbench(options.inter_commbench)] if options.inter_commbench else []
    intra, inter = links_from_records(records, inter_records)
    intra_ops, inter_ops = op_links_from_records(records, inter_records)
    return {"intra_fit": intra, "inter_fit": inter, "intra_op_fits": intra_ops, "inter_op_fits": inter_ops}


def _what_fits(values: dict[str, Any], setting_: llama_predict.Setting) -> str:
    fitting, _, _ = llama_predict.search(values, setting_)
    return f"; the best layout that fits here: {fitting[0].name()}" if fitting else ""


def _show(config: LlamaConfig, layout, got, setting_: llama_predict.Setting, nodes: int, per_node: int) -> None:
    shape = llama_predict.model_shape(config)
    say(f"Llama {config.num_layers} layers x {config.hidden_size} ({shape.params / 1e9:.2f} B parameters, "
        f"{shape.flops_per_token / 1e9:.1f} GFLOP per token) on {nodes * per_node} x {setting_.accelerator.name} "
        f"({nodes} node(s) of {per_node})")  # fmt: skip
    say(f"layout {layout.name()}{f' {layout.pp_schedule}' if layout.pp > 1 else ''}, seq {config.seq_length}, "
        f"global batch {layout.global_batch_size}, micro-batch {layout.micro_batch_size} x "
        f"{layout.accumulation_steps}, checkpointing {config.activation_checkpoint}"
        f"{', float8' if config.float8 else ''}")  # fmt: skip
    say(f"  step time        {got.step_s:.3f} s")
    say(f"  tokens/s/device  {got.tokens_per_s_per_device:,.1f}")
    say(
        f"  MFU              {got.mfu:.1%} (the records' count, {LLM_FLOPS_FORMULA.split(' (')[0]}, over "
        f"{setting_.device.peak_tflops:g} TFLOP/s)"
    )
    split = ", ".join(f"{llama_predict.TIME_PARTS[k]} {v:.3f} s" for k, v in got.time.items() if v > 0)
    say(f"  step split       {split}")
    fits = "fits" if got.fits else "does NOT fit"
    say(f"  memory/device    {got.memory_bytes / GIB:.1f} GiB of {got.device_memory_bytes / GIB:.0f}: {fits}")
    say("                   " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in got.memory.items() if v > 0))
    for key, text in setting_.sources.items():
        say(f"  {key:16s} {text}")


def _search(values: dict[str, Any], setting_: llama_predict.Setting, options: LlamaPredictOptions) -> int:
    fitting, too_big, refused = llama_predict.search(values, setting_)
    if not fitting:
        state = 16 * llama_predict.model_shape(llama_predict.llama_spec(_plain(values))[0].workload).params
        need = math.ceil(state / setting_.device.memory_bytes)
        smallest = f"the smallest needs {too_big[0].prediction.memory_bytes / GIB:.0f} GiB" if too_big else "none"
        raise ConfigError(
            f"no layout fits {values['nodes'] * values['devices_per_node']} x {setting_.accelerator.name} "
            f"({smallest} of {setting_.device.memory_bytes / GIB:.0f} GiB): parameters, gradients and AdamW "
            f"states alone need at least {need} devices; add nodes or lower --global-batch-size/--seq-length"
        )
    if options.json:
        rows = [{"layout": c.layout.as_record(), "activation_checkpoint": c.checkpointing,
                 "step_s": c.prediction.step_s, "tokens_per_s_per_device": c.prediction.tokens_per_s_per_device,
                 "mfu": c.prediction.mfu, "memory_gib": c.prediction.memory_bytes / GIB, "loses": c.reason}
                for c in fitting[: options.top]]  # fmt: skip
        print(json.dumps({"fitting": len(fitting), "not_fitting": len(too_big), "not_dividing": refused,
                          "best": rows, "sources": setting_.sources}, indent=1))  # fmt: skip
        return 0
    say(
        f"{len(fitting)} layouts fit, {len(too_big)} do not, {refused} do not divide; best first (within about 10 % "
        "they tie: the model's median error on held-out published runs is 8 %):"
    )
    for rank, c in enumerate(fitting[: options.top], 1):
        p = c.prediction
        say(f"{rank:3d}. {c.name():45s} {p.tokens_per_s_per_device:10,.1f} tok/s/dev  MFU {p.mfu:6.1%}  "
            f"{p.memory_bytes / GIB:6.1f} GiB  {c.reason or 'best'}")  # fmt: skip
    return 0


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """The model alone on one device: the shape check without the layout's."""
    keep = {"size", "num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size"}
    return {k: v for k, v in values.items() if k in keep} | {"nodes": 1, "devices_per_node": 1}
