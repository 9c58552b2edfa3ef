"""`dlperf predict --model llama`: the Llama workload's own shape, FLOP count and layout rules (a layout the workload
would refuse is refused here in its words) handed to the prediction model, which may not import workloads; the
ranked search over layouts; the published points' check."""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from dlperf.errors import ConfigError
from dlperf.predict.accelerators import Accelerator, accelerator
from dlperf.predict.calibration import CP_KV_HEADS_STACKS, Measured, device_model, links
from dlperf.predict.llama import Device, LlamaPrediction, ModelShape, Network, Training, predict_llama
from dlperf.spec import RunSpec
from dlperf.workloads import get_workload, spec_from_mapping
from dlperf.workloads.llama import flops_per_token
from dlperf.workloads.llama.config import LlamaConfig, parameter_counts
from dlperf.workloads.llama.layout import LlamaLayout, layout_of

TIME_PARTS = {
    "compute": "compute",
    "tp": "TP/SP collectives",
    "cp": "CP ring",
    "pipeline_p2p": "pipeline sends",
    "pipeline_bubble": "pipeline bubble",
    "fsdp_dp": "FSDP/DP exposed",
    "optimizer": "optimizer step",
}


def model_shape(config: LlamaConfig) -> ModelShape:
    total, embedding = parameter_counts(config)
    return ModelShape(config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads,
                      config.ffn_hidden_size, config.vocab_size, config.seq_length, total, embedding,
                      flops_per_token(config))  # fmt: skip


def llama_spec(values: Mapping[str, Any]) -> tuple[RunSpec, LlamaLayout]:
    """The spec and layout of a Llama run from its keys (size, shape, layout, nodes, devices_per_node,
    precision), checked by the workload as `dlperf run` checks it (on a CUDA device: float8 allowed)."""
    spec = spec_from_mapping({**values, "model": "llama", "device": "cuda"})
    get_workload("llama").validate(spec)
    return spec, layout_of(spec)


@dataclass(frozen=True)
class Setting:
    """Everything but the layout: the device, the links, the stack's switches."""

    accelerator: Accelerator
    device: Device
    network: Network
    training: Training
    sources: dict[str, str]


def setting_for(
    acc_name: str,
    devices_per_node: int,
    precision: str,
    stack: str,
    training: Training,
    measured: Measured | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Setting:
    """Device and links for --accelerator with the measured figures and flags in `overrides` (memory_gib,
    memory_tbs, intra_node_gbs, inter_node_gbit, latencies in us, intra/inter commbench Link fits, and each
    collective's own fit: intra_op_fits, inter_op_fits)."""
    o = dict(overrides or {})
    acc = accelerator(acc_name)
    acc = replace(acc, **{k: o[k] for k in ("memory_gib", "memory_tbs") if o.get(k) is not None})
    training = replace(training, cp_kv_heads=stack in CP_KV_HEADS_STACKS)
    device = device_model(acc, precision, stack, measured or Measured(), training.float8)
    intra, inter, sources = links(acc, o.get("intra_node_gbs"), o.get("inter_node_gbit"), o.get("intra_latency_us"),
                                  o.get("inter_latency_us"), o.get("intra_fit"), o.get("inter_fit"))  # fmt: skip
    ops = {side: dict(o.get(f"{side}_op_fits") or {}) for side in ("intra", "inter")}
    for side, fits in ops.items():
        if fits and o.get(f"{side}_fit") is not None:
            sources[f"{side}_node"] = f"measured: dlperf commbench fits, each collective its own ({', '.join(fits)})"
    network = Network(devices_per_node, intra, inter, ops["intra"], ops["inter"])
    return Setting(acc, device, network, training, {**device.source, **sources})


def predict(values: Mapping[str, Any], setting: Setting) -> tuple[LlamaLayout, LlamaPrediction]:
    spec, layout = llama_spec(values)
    training = replace(setting.training, checkpointing=spec.workload.activation_checkpoint,
                       float8=spec.workload.float8)  # fmt: skip
    return layout, predict_llama(model_shape(spec.workload), layout, training, setting.device, setting.network)


@dataclass(frozen=True)
class Candidate:
    layout: LlamaLayout
    checkpointing: str
    prediction: LlamaPrediction
    reason: str = ""  # why it loses to the best (empty for the best)

    def name(self) -> str:
        schedule = f" {self.layout.pp_schedule}" if self.layout.pp > 1 else ""
        return f"{self.layout.name()}{schedule} mbs{self.layout.micro_batch_size} ac-{self.checkpointing}"


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(limit.bit_length()) if 2**i <= limit]


def _layouts(values: Mapping[str, Any], world: int, per_node: int) -> Iterator[dict[str, Any]]:
    """tp within a node, cp and pp up to 8 and 32, HSDP replicas over whole nodes, both 1F1B schedules, every
    checkpointing policy, micro-batches of 1 to 8 samples and the one given."""
    micros = sorted({int(values.get("micro_batch_size") or 1), 1, 2, 4, 8})
    for tp, cp, pp in itertools.product(_powers(per_node), _powers(8), _powers(32)):
        if world % (tp * cp * pp):
            continue
        for split in _splits(world, per_node, tp, cp, pp):
            for ac, micro in itertools.product(("none", "selective", "full"), micros):
                yield {**values, **split, "activation_checkpoint": ac, "micro_batch_size": micro}


def _splits(world: int, per_node: int, tp: int, cp: int, pp: int) -> Iterator[dict[str, Any]]:
    """Each data-parallel split (FSDP shards within a node or all, HSDP replicas over the rest) and pipeline
    schedule of one tp x cp x pp."""
    dp = world // (tp * cp * pp)
    shards = {dp} | {s for s in (per_node // (tp * cp), per_node) if s >= 1 and dp % s == 0}
    schedules = [("1f1b", 1), ("interleaved-1f1b", 2)] if pp > 1 else [("1f1b", 1)]
    for shard, (schedule, v) in itertools.product(sorted(shards), schedules):
        yield {"tp": tp, "cp": cp, "pp": pp, "dp_shard": shard, "dp_replicate": dp // shard, "pp_schedule": schedule,
               "stages_per_rank": v if pp > 1 else None}  # fmt: skip


def search(values: Mapping[str, Any], setting: Setting) -> tuple[list[Candidate], list[Candidate], int]:
    """(layouts that fit, best first, each with why it loses; those that do not fit; how many did not divide)."""
    world = values["nodes"] * values["devices_per_node"]
    fitting, too_big, refused = [], [], 0
    for option in _layouts(values, world, values["devices_per_node"]):
        try:
            layout, got = predict(option, setting)
        except ConfigError:
            refused += 1
            continue
        candidate = Candidate(layout, option["activation_checkpoint"], got)
        (fitting if got.fits else too_big).append(candidate)
    fitting.sort(key=lambda c: c.prediction.step_s)
    too_big.sort(key=lambda c: c.prediction.memory_bytes)
    if fitting:
        best = fitting[0].prediction
        fitting = [fitting[0]] + [replace(c, reason=_loses(c.prediction, best)) for c in fitting[1:]]
    gib = 1024**3
    too_big = [replace(c, reason=f"needs {c.prediction.memory_bytes / gib:.1f} GiB of "
                                 f"{c.prediction.device_memory_bytes / gib:.0f}") for c in too_big]  # fmt: skip
    return fitting, too_big, refused


def _loses(got: LlamaPrediction, best: LlamaPrediction) -> str:
    """The parts of the step that grow most against the best layout (per step, the same global batch)."""
    worse = sorted(((got.time[k] - best.time[k], k) for k in got.time), reverse=True)
    parts = [f"{TIME_PARTS[k]} +{d * 1e3:.0f} ms" for d, k in worse[:2] if d > 0.0005]
    if not parts:
        return f"ties with the best ({got.step_s / best.step_s - 1:+.2%} step time)"
    return f"{got.step_s / best.step_s - 1:+.1%} step time: " + ", ".join(parts)


def published_points() -> list[dict[str, Any]]:
    text = resources.files("dlperf.predict").joinpath("llama_published.json").read_text(encoding="utf-8")
    return json.loads(text)["points"]


LAYOUT_KEYS = ("size", "nodes", "devices_per_node", "tp", "pp", "cp", "dp_shard", "dp_replicate", "pp_schedule",
               "seq_length", "global_batch_size", "micro_batch_size", "activation_checkpoint", "float8")  # fmt: skip


def predict_point(point: Mapping[str, Any]) -> LlamaPrediction:
    """A published point's prediction from the stack's default efficiency and the system's datasheet links."""
    values = {k: point[k] for k in LAYOUT_KEYS} | dict(point.get("shape", {})) | {"precision": "amp-bf16"}
    if point["pp"] > 1:
        values["stages_per_rank"] = point["stages_per_rank"]
    training = Training(
        recompute_mm_share=point["recompute_mm_share"], async_tp=point["async_tp"], loss_parallel=True
    )  # torchtitan's and Megatron's vocabulary-parallel loss
    setting = setting_for(point["accelerator"], point["devices_per_node"], "amp-bf16", point["stack"], training,
                          overrides={k: point.get(k) for k in ("memory_gib", "memory_tbs")})  # fmt: skip
    return predict(values, setting)[1]


def published_errors(role: str | None = "check") -> list[tuple[dict[str, Any], LlamaPrediction, float]]:
    """(point, prediction, relative error of tokens/s per device) for the published points of `role` (all: None)."""
    rows = []
    for point in published_points():
        if role is None or point["role"] == role:
            got = predict_point(point)
            rows.append((point, got, got.tokens_per_s_per_device / point["tokens_per_s_per_device"] - 1))
    return rows


def median_abs_error(rows: list[tuple[dict[str, Any], LlamaPrediction, float]]) -> float:
    return statistics.median(abs(e) for _, _, e in rows)
