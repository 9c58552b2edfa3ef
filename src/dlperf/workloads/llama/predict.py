"""`dlperf predict --model llama`: the Llama workload's own shape, FLOP count and layout rules (a layout the workload
would refuse is refused here in its words) given to its prediction model (predict_model.py); the ranked search over
layouts; what the command shows; the published points' check."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from importlib import resources
from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics.flops import LLM_FLOPS_FORMULA
from dlperf.predict.calibration import setting_for
from dlperf.predict.setting import Predictor, Setting, Training
from dlperf.spec import RunSpec
from dlperf.workloads import get_workload, spec_from_mapping
from dlperf.workloads.llama.config import LlamaConfig
from dlperf.workloads.llama.layout import LlamaLayout, layout_of
from dlperf.workloads.llama.predict_model import LlamaPrediction, model_shape, predict_llama

GIB = 1024**3
IGNORED = frozenset({"lr", "weight_decay", "rope_theta"})  # a training run's settings that change no time or memory
TIME_PARTS = {"compute": "compute", "tp": "TP/SP collectives", "cp": "CP ring", "pipeline_p2p": "pipeline sends",
              "pipeline_bubble": "pipeline bubble", "fsdp_dp": "FSDP/DP exposed",
              "optimizer": "optimizer step"}  # fmt: skip


def llama_spec(values: Mapping[str, Any]) -> tuple[RunSpec, LlamaLayout]:
    """The spec and layout of a Llama run from its keys (size, shape, layout, nodes, devices_per_node,
    precision), checked by the workload as `dlperf run` checks it (on a CUDA device: float8 allowed)."""
    spec = spec_from_mapping({**values, "model": "llama", "device": "cuda"})
    get_workload("llama").validate(spec)
    return spec, layout_of(spec)


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
        fitting = [fitting[0]] + [replace(c, reason=loses(c.prediction, best, TIME_PARTS)) for c in fitting[1:]]
    too_big = [replace(c, reason=f"needs {c.prediction.memory_bytes / GIB:.1f} GiB of "
                                 f"{c.prediction.device_memory_bytes / GIB:.0f}") for c in too_big]  # fmt: skip
    return fitting, too_big, refused


def loses(got: Any, best: Any, names: dict[str, str]) -> str:
    """The parts of the step (`time`, named by `names`) that grow most against the best layout (per step, the same
    global batch): a Llama's or a MoE's prediction alike."""
    worse = sorted(((got.time[k] - best.time[k], k) for k in got.time), reverse=True)
    parts = [f"{names[k]} +{d * 1e3:.0f} ms" for d, k in worse[:2] if d > 0.0005]
    if not parts:
        return f"ties with the best ({got.step_s / best.step_s - 1:+.2%} step time)"
    return f"{got.step_s / best.step_s - 1:+.1%} step time: " + ", ".join(parts)


def shown(values: dict[str, Any], setting: Setting, search_: bool, top: int, as_json: bool) -> dict | list[str]:
    """What `dlperf predict --model llama` prints: the prediction of the layout given, or (`search_`) the `top`
    layouts that fit; as JSON (a dict) or as lines."""
    if search_:
        return _ranked(values, setting, top, as_json)
    try:
        layout, got = predict(values, setting)
    except ConfigError as error:
        raise ConfigError(f"{error}{_what_fits(values, setting)}") from None
    config = llama_spec(values)[0].workload
    nodes, per_node = values["nodes"], values["devices_per_node"]
    if as_json:
        return {"layout": layout.as_record(), "accelerator": setting.accelerator.name, "nodes": nodes,
                "devices_per_node": per_node, "prediction": asdict(got), "sources": setting.sources}  # fmt: skip
    lines = _lines(config, layout, got, setting, nodes, per_node)
    if not got.fits:
        lines.append(f"  does not fit{_what_fits(values, setting) or ' in any layout searched: add devices'}")
    return lines


def _what_fits(values: dict[str, Any], setting: Setting) -> str:
    fitting, _, _ = search(values, setting)
    return f"; the best layout that fits here: {fitting[0].name()}" if fitting else ""


def _lines(config: LlamaConfig, layout, got, setting: Setting, nodes: int, per_node: int) -> list[str]:
    shape = model_shape(config)
    split = ", ".join(f"{TIME_PARTS[k]} {v:.3f} s" for k, v in got.time.items() if v > 0)
    fits = "fits" if got.fits else "does NOT fit"
    return [
        f"Llama {config.num_layers} layers x {config.hidden_size} ({shape.params / 1e9:.2f} B parameters, "
        f"{shape.flops_per_token / 1e9:.1f} GFLOP per token) on {nodes * per_node} x {setting.accelerator.name} "
        f"({nodes} node(s) of {per_node})",
        f"layout {layout.name()}{f' {layout.pp_schedule}' if layout.pp > 1 else ''}, seq {config.seq_length}, "
        f"global batch {layout.global_batch_size}, micro-batch {layout.micro_batch_size} x "
        f"{layout.accumulation_steps}, checkpointing {config.activation_checkpoint}"
        f"{', float8' if config.float8 else ''}",
        f"  step time        {got.step_s:.3f} s",
        f"  tokens/s/device  {got.tokens_per_s_per_device:,.1f}",
        f"  MFU              {got.mfu:.1%} (the records' count, {LLM_FLOPS_FORMULA.split(' (')[0]}, over "
        f"{setting.device.peak_tflops:g} TFLOP/s)",
        f"  step split       {split}",
        f"  memory/device    {got.memory_bytes / GIB:.1f} GiB of {got.device_memory_bytes / GIB:.0f}: {fits}",
        "                   " + ", ".join(f"{k} {v / GIB:.2f}" for k, v in got.memory.items() if v > 0),
        *(f"  {key:16s} {text}" for key, text in setting.sources.items()),
    ]


def _ranked(values: dict[str, Any], setting: Setting, top: int, as_json: bool) -> dict | list[str]:
    fitting, too_big, refused = search(values, setting)
    if not fitting:
        state = 16 * model_shape(llama_spec(_plain(values))[0].workload).params
        need = math.ceil(state / setting.device.memory_bytes)
        smallest = f"the smallest needs {too_big[0].prediction.memory_bytes / GIB:.0f} GiB" if too_big else "none"
        raise ConfigError(
            f"no layout fits {values['nodes'] * values['devices_per_node']} x {setting.accelerator.name} "
            f"({smallest} of {setting.device.memory_bytes / GIB:.0f} GiB): parameters, gradients and AdamW "
            f"states alone need at least {need} devices; add nodes or lower --global-batch-size/--seq-length"
        )
    if as_json:
        rows = [{"layout": c.layout.as_record(), "activation_checkpoint": c.checkpointing,
                 "step_s": c.prediction.step_s, "tokens_per_s_per_device": c.prediction.tokens_per_s_per_device,
                 "mfu": c.prediction.mfu, "memory_gib": c.prediction.memory_bytes / GIB, "loses": c.reason}
                for c in fitting[:top]]  # fmt: skip
        return {"fitting": len(fitting), "not_fitting": len(too_big), "not_dividing": refused, "best": rows,
                "sources": setting.sources}  # fmt: skip
    return [
        f"{len(fitting)} layouts fit, {len(too_big)} do not, {refused} do not divide; best first (within about 10 % "
        "they tie: the model's median error on held-out published runs is 8 %):",
        *(f"{rank:3d}. {c.name():45s} {c.prediction.tokens_per_s_per_device:10,.1f} tok/s/dev  MFU "
          f"{c.prediction.mfu:6.1%}  {c.prediction.memory_bytes / GIB:6.1f} GiB  {c.reason or 'best'}"
          for rank, c in enumerate(fitting[:top], 1)),
    ]  # fmt: skip


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """The model alone on one device: the shape check without the layout's."""
    keep = {"size", "num_layers", "hidden_size", "num_heads", "num_kv_heads", "ffn_hidden_size", "vocab_size"}
    return {k: v for k, v in values.items() if k in keep} | {"nodes": 1, "devices_per_node": 1}


def published_points() -> list[dict[str, Any]]:
    text = resources.files("dlperf.workloads.llama").joinpath("llama_published.json").read_text(encoding="utf-8")
    return json.loads(text)["points"]


LAYOUT_KEYS = ("size", "nodes", "devices_per_node", "tp", "pp", "cp", "dp_shard", "dp_replicate", "pp_schedule",
               "seq_length", "global_batch_size", "micro_batch_size", "activation_checkpoint", "float8")  # fmt: skip


def predict_point(point: Mapping[str, Any]) -> LlamaPrediction:
    """A published point's prediction from the stack's default efficiency and the system's datasheet links."""
    values = {k: point[k] for k in LAYOUT_KEYS} | dict(point.get("shape", {})) | {"precision": "amp-bf16"}
    if point["pp"] > 1:
        values["stages_per_rank"] = point["stages_per_rank"]
    training = Training(
        recompute_mm_share=point["recompute_mm_share"],
        async_tp=point["async_tp"],
        loss_parallel=True,
        cp_all_gather=point.get("cp_all_gather", False),
    )  # loss_parallel: torchtitan's and Megatron's vocabulary-parallel loss
    setting = setting_for(point["accelerator"], point["devices_per_node"], "amp-bf16", point["stack"], training,
                          overrides={k: point.get(k) for k in ("memory_gib", "memory_tbs")})  # fmt: skip
    if point.get("te_layers"):  # the stack's efficiency with sequence parallelism's sharded activations
        setting = replace(setting, training=replace(setting.training, te_layers=True))
    return predict(values, setting)[1]


def published_errors(role: str | None = "check") -> list[tuple[dict[str, Any], LlamaPrediction, float]]:
    """(point, prediction, relative error of tokens/s per device) for the published points of `role` (all: None)."""
    rows = []
    for point in published_points():
        if role is None or point["role"] == role:
            got = predict_point(point)
            rows.append((point, got, got.tokens_per_s_per_device / point["tokens_per_s_per_device"] - 1))
    return rows


def median_abs_error(rows: list[tuple[dict[str, Any], Any, float]]) -> float:
    """The median |error| of (point, prediction, error) rows: a Llama's or a MoE's published points."""
    return statistics.median(abs(e) for _, _, e in rows)


def held_out_summary(rows: list[tuple[dict[str, Any], Any, float]]) -> str:
    """The fit benchmarks' last line: the held-out points' median and largest |error|, and how many were fitted."""
    checked = [r for r in rows if r[0]["role"] == "check"]
    largest = max(abs(e) for _, _, e in checked)
    return (
        f"held out: {len(checked)} points, median |error| {median_abs_error(checked):.1%}, max {largest:.1%}; "
        f"fitted on {len(rows) - len(checked)}"
    )


PREDICTOR = Predictor(IGNORED, shown)
