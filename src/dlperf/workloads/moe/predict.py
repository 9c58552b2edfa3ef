"""`dlperf predict --model moe`: an MoE size's shape and layout (Llama's mesh with expert parallelism folded over
tp x cp x dp, as Megatron folds it at expert tensor parallelism 1) given to the MoE prediction model
(predict_model.py); the ranked search over layouts; what the command shows; the published points' check."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from importlib import resources
from typing import Any

from dlperf.errors import ConfigError
from dlperf.predict.calibration import setting_for
from dlperf.predict.setting import Predictor, Setting, Training
from dlperf.spec import flag
from dlperf.workloads.llama.config import MULTI_STAGE_SCHEDULES
from dlperf.workloads.llama.layout import LlamaLayout, _stages_per_rank
from dlperf.workloads.llama.predict import loses
from dlperf.workloads.moe.config import SIZES, MoEConfig
from dlperf.workloads.moe.predict_model import Experts, MoEPrediction, moe_shape, predict_moe

GIB = 1024**3
IGNORED = frozenset({"lr", "weight_decay", "rope_theta", "score_func", "route_norm", "route_scale", "load_balance",
                     "aux_loss_coef", "experts_impl"})  # fmt: skip
TIME_PARTS = {"compute": "attention and dense", "experts": "experts' grouped GEMMs", "all_to_all": "dispatch+combine",
              "launches": "MoE kernel launches",
              "tp": "TP/SP collectives", "cp": "CP ring", "pipeline_p2p": "pipeline sends",
              "pipeline_bubble": "pipeline bubble", "fsdp_dp": "FSDP/DP exposed",
              "optimizer": "optimizer step", "host": "host work"}  # fmt: skip
# A learned router's busiest expert over the mean where none is given: Megatron-MoE-ModelZoo's Qwen3-235B at 16K
# on 256 H100s (TP 4) ran 295 TFLOP/s force-balanced and 237 dropless with the learned router
# (yanring/Megatron-MoE-ModelZoo best_practice/Qwen3/readme.md@c1ad0b5): 0.80 x, which this model gives at 1.45
# (at TP 4, PP 4 or 8, EP 16 or 32: 0.78-0.81); taken for every model (give --imbalance from a measured run)
LEARNED_IMBALANCE = 1.45
# Megatron-Bridge's and torchtitan's grouped GEMMs against the dense matmuls' achieved rate (fitted by
# benchmarks/predict_moe_fit.py on the `fit` points of moe_published.json; do not edit by hand)
GROUPED_GEMM_SHARE = 0.975
LAUNCH_S = 30e-6  # per kernel of an MoE block
# the fp8 recipes' matmul rate against tensor-wise scaling's: Megatron-Bridge's Llama 3 8B on 8 GB200s ran 31,508
# tokens/s/GPU with FP8-CS and 29,789 with MXFP8 (docs/performance-summary.md, 25.11); blockwise (128 x 128
# weights, 1 x 128 activations, DeepSeek-V3's) is taken as MXFP8's, no published pair of it checked
FP8_RECIPE = {"tensorwise": 1.0, "mxfp8": 0.945, "blockwise": 0.945}


def moe_config(values: Mapping[str, Any]) -> MoEConfig:
    """The config of `values` over its size's shape (what the workload's own expansion gives)."""
    size = values.get("size", MoEConfig.size)
    if size not in SIZES:
        raise ConfigError(f"unknown MoE size {size!r}: choose one of {', '.join(SIZES)}")
    own = {f.name for f in fields(MoEConfig)}
    return MoEConfig(**{**SIZES[size], **{k: v for k, v in values.items() if k in own}})


def moe_layout(config: MoEConfig, world: int) -> LlamaLayout:
    """The mesh of `config` on `world` devices; refuses, in one line, what does not divide."""
    others = config.dp_replicate * config.cp * config.tp * config.pp
    if config.dp_shard is None and world % others:
        raise ConfigError(f"{world} devices are not divisible by dp_replicate x cp x tp x pp = {others}")
    dp_shard = config.dp_shard or world // others
    dp = config.dp_replicate * dp_shard
    batch = config.global_batch_size or config.micro_batch_size * dp
    layout = LlamaLayout(config.pp, config.dp_replicate, dp_shard, config.cp, config.tp, config.micro_batch_size,
                         batch, config.pp_schedule, _stages_per_rank(config))  # fmt: skip
    if layout.world_size != world:
        raise ConfigError(f"{world} devices do not equal pp x dp_replicate x dp_shard x cp x tp = "
                          f"{' x '.join(map(str, layout.shape))}: change the layout")  # fmt: skip
    if batch % (config.micro_batch_size * dp):
        raise ConfigError(f"{flag('global_batch_size')} {batch} is not divisible by micro batch x data-parallel size "
                          f"= {config.micro_batch_size * dp}")  # fmt: skip
    _check_experts(config, layout)
    return layout


def _check_experts(config: MoEConfig, layout: LlamaLayout) -> None:
    folded = layout.tp * layout.cp * layout.dp
    checks = (
        (config.num_experts % config.ep == 0, f"{flag('num_experts')} {config.num_experts} is not divisible by "
                                              f"{flag('ep')} {config.ep}"),
        (folded % config.ep == 0, f"{flag('ep')} {config.ep} does not divide tp x cp x dp = {folded}: expert "
                                  "parallelism is folded over them"),
        (config.num_heads % layout.tp == 0, f"{flag('num_heads')} {config.num_heads} is not divisible by "
                                            f"{flag('tp')} {layout.tp}"),
        (config.seq_length % (layout.tp * layout.cp) == 0, f"{flag('seq_length')} {config.seq_length} is not "
                                                           "divisible by tp x cp"),
        (config.num_layers >= layout.stages, f"{flag('num_layers')} {config.num_layers} is fewer than the "
                                             f"{layout.stages} pipeline stages"),
        (layout.pp == 1 or layout.pp_schedule not in MULTI_STAGE_SCHEDULES or layout.accumulation_steps >= layout.pp,
         f"{flag('pp_schedule')} {layout.pp_schedule} needs at least {layout.pp} micro-batches: raise "
         f"{flag('global_batch_size')}"),
    )  # fmt: skip
    for ok, why in checks:
        if not ok:
            raise ConfigError(why)


def experts_of(config: MoEConfig, values: Mapping[str, Any], fit: tuple[float, float] | None = None) -> Experts:
    """The router's imbalance (1.0 balanced; --imbalance, else LEARNED_IMBALANCE, learned) and the share of the
    all-to-all hidden (none unless a published point's stack states its overlap)."""
    given = values.get("imbalance")
    if config.routing == "balanced" and given not in (None, 1.0):
        raise ConfigError("--imbalance is the learned router's: drop it, or give --routing learned")
    imbalance = 1.0 if config.routing == "balanced" else given or LEARNED_IMBALANCE
    share, launch_s = fit or (GROUPED_GEMM_SHARE, LAUNCH_S)
    grad_bytes = 4 if values.get("grad_reduce_fp32", True) else 2
    return Experts(imbalance, config.capacity_factor, share, values.get("a2a_hidden", 0.0), launch_s, grad_bytes)


def predict(
    values: Mapping[str, Any], setting: Setting, fit: tuple[float, float] | None = None
) -> tuple[LlamaLayout, MoEPrediction]:
    """The layout of `values` and its prediction; --fp8-recipe scales the fp8 matmuls' rate (FP8_RECIPE)."""
    config = moe_config(values)
    layout = moe_layout(config, values["nodes"] * values["devices_per_node"])
    training = replace(setting.training, checkpointing=config.activation_checkpoint, float8=config.float8)
    device = setting.device
    recipe = values.get("fp8_recipe") or "tensorwise"
    if config.float8 and device.fp8_efficiency:
        device = replace(device, fp8_efficiency=device.fp8_efficiency * FP8_RECIPE[recipe])
    experts = experts_of(config, values, fit)
    shape = moe_shape(config, values.get("recompute_mla_up_proj", False))
    return layout, predict_moe(shape, layout, config.ep, experts, training, device, setting.network)


@dataclass(frozen=True)
class Candidate:
    layout: LlamaLayout
    ep: int
    checkpointing: str
    prediction: MoEPrediction
    reason: str = ""

    def name(self) -> str:
        schedule = f" {self.layout.pp_schedule}" if self.layout.pp > 1 else ""
        return f"{self.layout.name()}_ep{self.ep}{schedule} mbs{self.layout.micro_batch_size} ac-{self.checkpointing}"


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(limit.bit_length()) if 2**i <= limit]


def _layouts(values: Mapping[str, Any], config: MoEConfig, world: int, per_node: int) -> Iterator[dict[str, Any]]:
    """tp within 8, pp up to 16 (1F1B, interleaved 2), ep every power of two dividing the experts, DP sharded over
    the rest, each checkpointing policy, micro-batches of 1, 2 and the one given."""
    micros = sorted({int(values.get("micro_batch_size") or 1), 1, 2})
    for tp, pp, ep in itertools.product(_powers(min(8, per_node)), _powers(16), _powers(config.num_experts)):
        if world % (tp * pp) or (world // pp) % ep:
            continue
        for (schedule, v), ac, micro in itertools.product(
            [("1f1b", 1), ("interleaved-1f1b", 2)] if pp > 1 else [("1f1b", 1)], ("none", "selective", "full"), micros
        ):  # fmt: skip
            yield {**values, "tp": tp, "pp": pp, "cp": 1, "ep": ep, "dp_shard": world // (tp * pp), "dp_replicate": 1,
                   "pp_schedule": schedule, "stages_per_rank": v if pp > 1 else None, "activation_checkpoint": ac,
                   "micro_batch_size": micro}  # fmt: skip


def search(values: Mapping[str, Any], setting: Setting) -> tuple[list[Candidate], list[Candidate], int]:
    """(layouts that fit, best first, each with why it loses; those that do not fit; how many did not divide)."""
    world = values["nodes"] * values["devices_per_node"]
    fitting, too_big, refused = [], [], 0
    for option in _layouts(values, moe_config(values), world, values["devices_per_node"]):
        try:
            layout, got = predict(option, setting)
        except ConfigError:
            refused += 1
            continue
        (fitting if got.fits else too_big).append(Candidate(layout, option["ep"], option["activation_checkpoint"], got))
    fitting.sort(key=lambda c: c.prediction.step_s)
    too_big.sort(key=lambda c: c.prediction.memory_bytes)
    if fitting:
        best = fitting[0].prediction
        fitting = [fitting[0]] + [replace(c, reason=loses(c.prediction, best, TIME_PARTS)) for c in fitting[1:]]
    return fitting, too_big, refused


def shown(values: dict[str, Any], setting: Setting, search_: bool, top: int, as_json: bool) -> dict | list[str]:
    """What `dlperf predict --model moe` prints: the layout given, or (`search_`) the `top` that fit."""
    if search_:
        return _ranked(values, setting, top, as_json)
    layout, got = predict(values, setting)
    config = moe_config(values)
    if as_json:
        return {"layout": {**layout.as_record(), "ep": config.ep}, "accelerator": setting.accelerator.name,
                "nodes": values["nodes"], "devices_per_node": values["devices_per_node"], "prediction": asdict(got),
                "sources": setting.sources}  # fmt: skip
    return _lines(config, layout, got, setting, values)


def _layout_line(config: MoEConfig, layout: LlamaLayout, values: Mapping[str, Any], routing: str) -> str:
    schedule = f" {layout.pp_schedule}" if layout.pp > 1 else ""
    float8 = f", float8 {values.get('fp8_recipe') or 'tensorwise'}" if config.float8 else ""
    return (
        f"layout {layout.name()}_ep{config.ep}{schedule}, seq {config.seq_length}, global batch "
        f"{layout.global_batch_size}, micro-batch {layout.micro_batch_size} x {layout.accumulation_steps}, "
        f"checkpointing {config.activation_checkpoint}{float8}, routing {routing}"
    )


def _lines(config: MoEConfig, layout: LlamaLayout, got: MoEPrediction, setting: Setting, values: Mapping[str, Any]):
    shape = moe_shape(config)
    nodes, per_node = values["nodes"], values["devices_per_node"]
    split = ", ".join(f"{TIME_PARTS[k]} {v:.3f} s" for k, v in got.time.items() if v > 0)
    fits = "fits" if got.fits else "does NOT fit"
    imbalance = experts_of(config, values).imbalance
    routing = "balanced" if config.routing == "balanced" else f"learned, busiest expert x{imbalance:.2f}"
    return [
        f"MoE {config.size}: {shape.total / 1e9:.1f} B parameters, {shape.active / 1e9:.1f} B active, "
        f"{config.num_experts} experts top-{config.top_k}, on {nodes * per_node} x {setting.accelerator.name} "
        f"({nodes} node(s) of {per_node})",
        _layout_line(config, layout, values, routing),
        f"  step time        {got.step_s:.3f} s",
        f"  tokens/s/device  {got.tokens_per_s_per_device:,.1f}",
        f"  MFU              {got.mfu:.1%} (6 x active N + 12·L·H·Q·T), {got.mfu_causal:.1%} causal (the attention "
        f"term halved, Megatron-Bridge's), over {setting.device.peak_tflops:g} TFLOP/s",
        f"  tokens/expert    {got.tokens_per_expert:,.0f} per micro-batch and block"
        + (f"; {got.dropped_share:.1%} of the busiest expert's dropped" if got.dropped_share > 0 else ""),
        f"  step split       {split}",
        f"  memory/device    {got.memory_bytes / GIB:.1f} GiB of {got.device_memory_bytes / GIB:.0f}: {fits}",
        "                   " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in got.memory.items() if v > 0),
        *(f"  {key:16s} {text}" for key, text in setting.sources.items()),
    ]


def _ranked(values: dict[str, Any], setting: Setting, top: int, as_json: bool) -> dict | list[str]:
    fitting, too_big, refused = search(values, setting)
    if not fitting:
        smallest = f"the smallest needs {too_big[0].prediction.memory_bytes / GIB:.0f} GiB" if too_big else "none"
        raise ConfigError(f"no MoE layout fits {values['nodes'] * values['devices_per_node']} x "
                          f"{setting.accelerator.name} ({smallest}): add nodes or lower --seq-length")  # fmt: skip
    if as_json:
        rows = [{"layout": {**c.layout.as_record(), "ep": c.ep}, "activation_checkpoint": c.checkpointing,
                 "step_s": c.prediction.step_s, "tokens_per_s_per_device": c.prediction.tokens_per_s_per_device,
                 "mfu": c.prediction.mfu, "memory_gib": c.prediction.memory_bytes / GIB, "loses": c.reason}
                for c in fitting[:top]]  # fmt: skip
        return {"fitting": len(fitting), "not_fitting": len(too_big), "not_dividing": refused, "best": rows,
                "sources": setting.sources}  # fmt: skip
    return [
        f"{len(fitting)} MoE layouts fit, {len(too_big)} do not, {refused} do not divide; best first (within about "
        "15 % they tie: the model's median error on held-out published MoE runs, docs/scaling.md):",
        *(f"{rank:3d}. {c.name():48s} {c.prediction.tokens_per_s_per_device:10,.1f} tok/s/dev  MFU "
          f"{c.prediction.mfu:6.1%}  {c.prediction.memory_bytes / GIB:6.1f} GiB  {c.reason or 'best'}"
          for rank, c in enumerate(fitting[:top], 1)),
    ]  # fmt: skip


def published_points() -> list[dict[str, Any]]:
    text = resources.files("dlperf.workloads.moe").joinpath("moe_published.json").read_text(encoding="utf-8")
    return json.loads(text)["points"]


LAYOUT_KEYS = ("size", "nodes", "devices_per_node", "tp", "pp", "cp", "ep", "pp_schedule", "stages_per_rank",
               "seq_length", "global_batch_size", "micro_batch_size", "activation_checkpoint", "float8", "routing",
               "fp8_recipe", "a2a_hidden", "grad_reduce_fp32", "recompute_mla_up_proj")  # fmt: skip


def predict_point(point: Mapping[str, Any], fit: tuple[float, float] | None = None) -> MoEPrediction:
    """A published point's prediction from the stack's default efficiency and the system's datasheet links."""
    values = {k: point[k] for k in LAYOUT_KEYS if k in point} | {"dp_replicate": 1}
    training = Training(loss_parallel=True, distributed_optimizer=point["stack"] == "megatron")
    setting = setting_for(point["accelerator"], point["devices_per_node"], "amp-bf16", point["stack"], training)
    return predict(values, setting, fit)[1]


def published_errors(role: str | None = "check", fit: tuple[float, float] | None = None):
    """(point, prediction, relative error of tokens/s per device) for the published points of `role` (all: None)."""
    rows = []
    for point in published_points():
        if role is None or point["role"] == role:
            got = predict_point(point, fit)
            rows.append((point, got, got.tokens_per_s_per_device / point["tokens_per_s_per_device"] - 1))
    return rows


PREDICTOR = Predictor(IGNORED, shown)
