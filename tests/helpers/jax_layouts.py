"""One process, XLA's host platform split into 8 CPU devices: train the tiny model 5 steps on the JAX engine under
each given layout; writes every layout's losses and whether any parameter was split, as JSON.

    python tests/helpers/jax_layouts.py OUT.json llama '[{}, {"tp": 2}, {"dp_shard": 2, "cp": 2}]'

Each layout is a set of run-key changes over the model's tiny keys; its world size is the product of its
dimensions, and the mesh takes that many of the 8 devices. XLA compiles for the CPU without LLVM's costly passes
(half the compile time, which is most of this script's): every layout is built by the same compiler, so their losses
are still compared like for like.
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
from dlperf.workloads import check_spec, spec_from_mapping  # noqa: E402
from dlperf.workloads.llama.jax_step import recipe  # noqa: E402

STEPS = 5
DIMS = ("dp_replicate", "dp_shard", "cp", "tp")


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


def main() -> None:
    jax.config.update("jax_platforms", "cpu")
    out, layouts = sys.argv[1], json.loads(sys.argv[3])
    with open(out, "w", encoding="utf-8") as f:
        json.dump([run(changes) for changes in layouts], f)


if __name__ == "__main__":
    main()
