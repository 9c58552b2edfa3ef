"""One process of a JAX run: train `model` STEPS steps; process 0 writes the losses, the device count and whether
any parameter is split over devices, as JSON.

    python tests/helpers/jax_steps.py OUT.json MODEL CFG_JSON WORLD RANK COORDINATOR STEPS

Started once per process by test_jax_parallel.py; the engine's setup joins them (jax.distributed) at
COORDINATOR's port, the workload's recipe is compiled over the planned layout.
"""

from __future__ import annotations

import importlib
import json
import sys

import jax

from dlperf.engines.base import RankEnv
from dlperf.engines.jax.engine import JaxEngine
from dlperf.engines.jax.step import JaxStep
from dlperf.workloads import check_spec, get_workload, spec_from_mapping


def main() -> None:
    out, model, cfg, world, rank, coordinator, steps = sys.argv[1:8]
    host, port = coordinator.rsplit(":", 1)
    spec = spec_from_mapping({"model": model, "engine": "jax", "device": "cpu", "seed": 7,
                              "devices_per_node": int(world), **json.loads(cfg)})  # fmt: skip
    plan = check_spec(spec)
    # the engine's coordinator is MASTER_PORT + 1 (torchrun's store holds MASTER_PORT)
    JaxEngine().setup(spec, RankEnv(int(rank), int(world), int(rank), int(world), host, int(port) - 1))
    module = importlib.import_module(get_workload(model).builders["jax"].split(":")[0])
    step = JaxStep(module.recipe(spec, plan), spec.seed)
    losses = [step.read_loss(step.step()) for _ in range(int(steps))]
    params = jax.tree.leaves(step.state.params)
    split = any(leaf.addressable_shards[0].data.shape != leaf.shape for leaf in params)
    if int(rank) == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"losses": losses, "devices": jax.device_count(), "split": split}, f)


if __name__ == "__main__":
    main()
