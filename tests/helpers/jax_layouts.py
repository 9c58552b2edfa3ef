"""One process, XLA's host platform split into 8 CPU devices: train the tiny model 5 steps on the JAX engine under
each given layout; writes every layout's losses and whether any parameter was split, as JSON.

    python tests/helpers/jax_layouts.py OUT.json llama '[{}, {"tp": 2}, {"dp_shard": 2, "cp": 2}]'
    python tests/helpers/jax_layouts.py OUT.json moe '[{"micro_batch_size": 8}, {"dp_shard": 4, "ep": 2}]'

Each layout is a set of run-key changes over the model's tiny keys; its world size is the product of its dimensions, and
the mesh takes that many of the 8 devices. The MoE's are changes of its config over TINY_MOE, its spec built from the
config (the workload's registry is not needed to build the JAX step); it writes the experts one device holds, the picks
per expert and its routing meter's record (the 4 steps after the first) instead of `split`. XLA compiles for the CPU
without LLVM's costly passes (half the compile time, which is most of this script's): every layout is built by the same
compiler, so their losses are still compared like for like.
"""

from __future__ import annotations

import os
import sys

from tiny import FAST_XLA_COMPILE

os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8 {FAST_XLA_COMPILE}"
)

import json  # noqa: E402

import jax  # noqa: E402
from tiny import LAYOUT_RUN, tiny_llama  # noqa: E402

from dlperf.engines.jax.step import JaxStep  # noqa: E402
from dlperf.spec import RunSpec  # noqa: E402
from dlperf.workloads import check_spec, spec_from_mapping  # noqa: E402
from dlperf.workloads.base import WorkloadPlan  # noqa: E402
from dlperf.workloads.llama.jax_step import recipe  # noqa: E402
from dlperf.workloads.llama.layout import layout_of  # noqa: E402
from dlperf.workloads.moe import jax_step as moe_step  # noqa: E402
from dlperf.workloads.moe.config import MoEConfig  # noqa: E402
from dlperf.workloads.moe.jax_meter import RoutingMeter  # noqa: E402

STEPS = 5
DIMS = ("dp_replicate", "dp_shard", "cp", "tp")
# 3 blocks (1 dense), 4 experts top-2 and one shared: 8 samples of 16 tokens, 256 picks per step
TINY_MOE = dict(num_layers=3, num_dense_layers=1, hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8,
                ffn_hidden_size=64, moe_ffn_hidden_size=16, num_experts=4, top_k=2, num_shared_experts=1,
                vocab_size=128, seq_length=16, attention="gqa", lr=1e-2, global_batch_size=8)  # fmt: skip


def run(changes: dict) -> dict:
    world = 1
    for dim in DIMS:
        world *= changes.get(dim, 1)
    keys = {
        **tiny_llama(**LAYOUT_RUN),
        "num_layers": 2,
        "engine": "jax",
        "seed": 7,
        "devices_per_node": world,
        "dp_shard": 1,
        **changes,
    }
    spec = spec_from_mapping(keys)
    step = JaxStep(recipe(spec, check_spec(spec)), spec.seed)
    losses = [step.read_loss(step.step()) for _ in range(STEPS)]
    split = any(leaf.addressable_shards[0].data.shape != leaf.shape for leaf in jax.tree.leaves(step.state.params))
    return {"losses": losses, "split": split}


def run_moe(changes: dict) -> dict:
    config = MoEConfig(**{**TINY_MOE, "dp_shard": 1, **changes})
    world = config.dp_replicate * config.dp_shard
    spec = RunSpec(model="moe", workload=config, engine="jax", devices_per_node=world, seed=7, device="cpu")
    layout = layout_of(spec)
    plan = WorkloadPlan(global_batch=layout.global_batch_size, batch_per_device=layout.global_batch_size // world,
                        group="moe", stem="moe", layout=layout, lr=config.lr)  # fmt: skip
    step = JaxStep(moe_step.recipe(spec, plan), spec.seed)
    model: dict = {}
    meter = RoutingMeter(config, lambda: step.state.extra, model)
    read = meter.wrap(step.read_loss)
    losses = [read(step.step())]
    meter.start()  # the timed window: the steps after the first, one routing window each
    losses += [read(step.step()) for _ in range(STEPS - 1)]
    meter.stop()
    block = step.state.params["layers_1"]["feed_forward"]
    routing = jax.device_get(step.state.extra["layers_1"]["feed_forward"])
    return {
        "losses": losses,
        "experts_held": block["w1"].addressable_shards[0].data.shape[0],
        "counts": routing["counts"].tolist(),
        "dropped": int(routing["dropped"]),
        "moe": model["moe"],
    }


def main() -> None:
    jax.config.update("jax_platforms", "cpu")
    out, layouts = sys.argv[1], json.loads(sys.argv[3])
    train = run_moe if sys.argv[2] == "moe" else run
    with open(out, "w", encoding="utf-8") as f:
        json.dump([train(changes) for changes in layouts], f)


if __name__ == "__main__":
    main()
