"""One process, XLA's host platform split into 2 CPU devices: train `model` STEPS steps under each given layout on
the JAX engine's compiled step; writes, per layout, the losses, how many devices its state spans and whether any
parameter is split over them, as JSON.

    python tests/helpers/jax_steps.py OUT.json MODEL '[{"devices_per_node": 1}, {"devices_per_node": 2, "tp": 2}]' STEPS

Each layout is the run keys (a workload's config and its devices_per_node); the workload's recipe is compiled over
the first devices_per_node devices. Started by test_jax_parallel.py; the same layouts over 2 processes
(jax.distributed) are test_jax_engine.py's runs under the launcher and over two hosts.
"""

from __future__ import annotations

import os
import sys

from tiny import FAST_XLA_COMPILE

os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2 {FAST_XLA_COMPILE}"
)

import importlib  # noqa: E402
import json  # noqa: E402

import jax  # noqa: E402

from dlperf.engines.jax.step import JaxStep  # noqa: E402
from dlperf.workloads import check_spec, get_workload, spec_from_mapping  # noqa: E402


def run(model: str, keys: dict, steps: int) -> dict:
    spec = spec_from_mapping({"model": model, "engine": "jax", "device": "cpu", "seed": 7, **keys})
    module = importlib.import_module(get_workload(model).builders["jax"].split(":")[0])
    step = JaxStep(module.recipe(spec, check_spec(spec)), spec.seed)
    losses = [step.read_loss(step.step()) for _ in range(steps)]
    params = jax.tree.leaves(step.state.params)
    return {
        "losses": losses,
        "devices": len(set().union(*(leaf.sharding.device_set for leaf in params))),
        "split": any(leaf.addressable_shards[0].data.shape != leaf.shape for leaf in params),
    }


def main() -> None:
    jax.config.update("jax_platforms", "cpu")
    out, model, layouts, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    with open(out, "w", encoding="utf-8") as f:
        json.dump([run(model, keys, steps) for keys in layouts], f)


if __name__ == "__main__":
    main()
