"""`dlperf predict --model moe`'s model against MoE runs measured here, on the CPU (gloo, 1 thread per rank).

The same check as the dense Llama's (benchmarks/predict_llama_cpu.py, whose measuring it reuses): a 2-rank
commbench (each collective's own fit, the all-to-all's too), one core's copy rate, and for each layout a one-rank
run just before it (the device's rate), the layout timed, the layout again for its peak RSS and with a minimal
model (the process's own memory). The model is torchtitan's DeepSeek-V3 debug model (6 blocks, the first dense; 8
experts top 3 and 2 shared) with grouped-query attention for its MLA, at sequence 256, force-balanced (`--routing
balanced`: imbalance 1.0 by construction) but for one layout with the learned router, predicted at the imbalances
its record measured (the busiest expert's, and the busiest rank's, which paces its experts); the `mla` layouts keep
its multi-head latent attention (16 heads of 128 + 64 query/key and 128 values over hidden 256: the attention holds
most of the activations) and `--memory-only` measures their memory alone (a peak RSS is not disturbed by other
jobs, a step time is). Each run times 8 steps in 4 windows and its
fastest window is its step (the least disturbed on a machine other jobs load; the dense check, on a quiet one,
takes the median), and a layout's one-rank and timed runs are made again, up to 6 times, while other jobs kept more
than half a core busy in either (dlperf's own noise limit; the least loaded pair is kept, its load printed).
dlperf's MoE folds ep inside dp_shard x cp and runs every expert on each tp rank (`Experts(tp_folded=False)`); the
grouped GEMMs run at the one-rank run's rate (share 1: two ranks at once run the step's GEMM shapes at 90-97 % of
one alone, per-expert ones at 0.9x the dense ones) and no launch time is added. The host's work beyond one rank's
(whose rate holds its own) is measured: each layout is timed again at its floor (FLOOR: its blocks and experts at
MINIMAL's widths, a step of almost nothing but host work), its step less the model's for it, the one rank's floor
likewise taken off, is the layout's `Experts.host_s`, added after the device's work (one thread on a CPU);
`--without-host` re-predicts the same records without it. A layout of 4 ranks on the 2 cores takes its links from a
4-rank commbench and its pipeline bubble at a whole core's rate (the ranks that wait lend theirs), as it takes half a
core's rates.

    nice python benchmarks/predict_moe_cpu.py --out /tmp/moe_cpu   # ~12 min on 2 quiet cores (the mla layouts too)
    nice python benchmarks/predict_moe_cpu.py --out /tmp/moe_cpu --memory-only   # the mla layouts, ~15 min
"""

from __future__ import annotations

import argparse
from pathlib import Path

from predict_llama_cpu import MIB, Check, cpu_training, dlperf_run, run_check

from dlperf.predict.model import Link
from dlperf.predict.setting import Device, Network
from dlperf.spec import RunSpec
from dlperf.workloads import get_workload, spec_from_mapping
from dlperf.workloads.llama.predict_model import OPTIMIZER_BYTES_PER_PARAM
from dlperf.workloads.moe.layout import moe_layout
from dlperf.workloads.moe.predict_model import Experts, moe_shape, predict_moe

# the debug model with grouped-query attention for MLA (16 heads of 16, 4 key/value heads), its step's attention
# timed as the dense Llama's; the `mla` layouts keep MLA
SHAPE = {"size": "debug", "seq_length": 256, "micro_batch_size": 2, "routing": "balanced", "attention": "gqa",
         "num_kv_heads": 4}  # fmt: skip
# 2 blocks (a dense one and a MoE one; one per stage) of hidden 64, a vocabulary of 256: the process's own memory,
# which the prediction does not count
MINIMAL = {"num_layers": 2, "hidden_size": 64, "ffn_hidden_size": 128, "moe_ffn_hidden_size": 64, "vocab_size": 256,
           "num_heads": 4, "num_kv_heads": 2, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
           "v_head_dim": 16}  # fmt: skip
# the host's floor: the layout's blocks and experts at MINIMAL's widths; its step less the model's is host work
FLOOR = {key: value for key, value in MINIMAL.items() if key != "num_layers"}
LAYOUTS = {
    "single": {},
    "ep2": {"ep": 2},
    "ep2 learned": {"ep": 2, "routing": "learned"},
    "ep4 (4 ranks)": {"ep": 4},
    "fsdp4 ep2 (4 ranks)": {"ep": 2},
    "tp2 ep2 (4 ranks)": {"tp": 2, "ep": 2},
    "pp2 ep2 (4 ranks)": {"pp": 2, "ep": 2, "global_batch_size": 8},
}
MLA = {"attention": "mla"}
MLA_LAYOUTS = {
    "mla single": MLA,
    "mla ep2": {**MLA, "ep": 2},
    "mla tp2 ep2 (4 ranks)": {**MLA, "tp": 2, "ep": 2},
    "mla pp2 ep2 (4 ranks)": {**MLA, "pp": 2, "ep": 2, "global_batch_size": 8},
}


def moe_spec(values: dict, devices: int) -> RunSpec:
    """The spec of a CPU run of these values, checked as `dlperf run` checks it."""
    spec = spec_from_mapping({**values, "model": "moe", "device": "cpu", "nodes": 1, "devices_per_node": devices,
                              "precision": "fp32"})  # fmt: skip
    get_workload("moe").validate(spec)
    return spec


def predicted(values: dict, devices: int, device: Device, net: Network, record: dict, host_s: float
              ) -> tuple[float, float]:  # fmt: skip
    """(step s, bytes) as dlperf's MoE runs on the CPU: its expert layout, the host's work after the device's."""
    spec = moe_spec(values, devices)
    config = spec.workload
    learned = record["moe"] if config.routing == "learned" else {"imbalance": 1.0, "ep_imbalance": 1.0}
    experts = Experts(learned["imbalance"], config.capacity_factor, rank_imbalance=learned["ep_imbalance"],
                      grouped_gemm_share=1.0, tp_folded=False, host_s=host_s, host_serial=True)  # fmt: skip
    training = cpu_training(config.activation_checkpoint)
    got = predict_moe(moe_shape(config), moe_layout(spec), config.ep, experts, training, device, net)
    # 4 ranks share the 2 cores (half a core's rates each), but in a pipeline's fill and drain the ranks that wait
    # lend theirs to those that work: the bubble at a whole core's rate
    lent = got.time["pipeline_bubble"] / 2 if devices == 4 else 0.0
    return got.step_s - lent, got.memory_bytes


def optimizer_s(bandwidth: float) -> float:
    """The one-rank step's AdamW over every parameter, as the model times it."""
    return OPTIMIZER_BYTES_PER_PARAM * moe_shape(moe_spec(SHAPE, 1).workload).total / bandwidth


def memory_only(out: Path) -> None:
    """Each mla layout's peak RSS above its minimal model's against the prediction (rates and links do not enter
    the memory: placeholders)."""
    device = Device(peak_tflops=1.0, efficiency=1.0, memory_bytes=1e12, memory_bytes_per_s=1e9)
    print("| layout | measured MiB above minimal | predicted | error |\n|---|---:|---:|---:|")
    for name, layout in MLA_LAYOUTS.items():
        values, slug = {**SHAPE, **layout}, name.split(" (")[0].replace(" ", "_")
        devices = 1 if "single" in name else 4 if "4 ranks" in name else 2
        net = Network(devices, Link(0.0, 1e-9), Link(0.0, 1e-9))
        run = dlperf_run(values, devices, out / slug, rss=True, model="moe")
        base = dlperf_run({**values, **MINIMAL}, devices, out / f"{slug}_minimal", rss=True, model="moe")
        memory = (run["peak_memory_mib"]["rss"] - base["peak_memory_mib"]["rss"]) * MIB
        want = predicted(values, devices, device, net, run, 0.0)[1] - predicted({**values, **MINIMAL}, devices,
                                                                                 device, net, base, 0.0)[1]  # fmt: skip
        print(f"| {name} | {memory / MIB:.0f} | {want / MIB:.0f} | {want / memory - 1:+.1%} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--memory-only", action="store_true", help="the mla layouts' memory alone")
    parser.add_argument("--without-host", action="store_true", help="no host term (no floors run): the model alone")
    args = parser.parse_args()
    if args.memory_only:
        memory_only(args.out)
        return
    minimal = lambda values: {**values, **MINIMAL}  # noqa: E731
    layouts = {**LAYOUTS, **MLA_LAYOUTS}
    run_check(
        Check(
            "moe",
            SHAPE,
            layouts,
            minimal,
            predicted,
            optimizer_s,
            iters=8,
            best_window=True,
            attempts=6,
            links_by_ranks=True,
            floor=None if args.without_host else lambda values: {**values, **FLOOR},
        ),
        args.out,
    )


if __name__ == "__main__":
    main()
