"""One process of a JAX run: train `model` 5 steps; process 0 writes the losses, the device count and whether
any parameter is split over devices, as JSON.

    python tests/jax_steps.py OUT.json MODEL CFG_JSON WORLD RANK COORDINATOR

Started once per process by test_jax_parallel.py; jax.distributed joins them over COORDINATOR (host:port).
"""

from __future__ import annotations

import json
import sys

import jax

from dlperf.engines.jax.step import build_jax_step

STEPS = 5


def main() -> None:
    out, model, cfg, world, rank, coordinator = sys.argv[1:7]
    step = build_jax_step(
        model, json.loads(cfg), rank=int(rank), world_size=int(world), coordinator=coordinator, device="cpu", seed=7
    )
    losses = [step.read_loss(step.step()) for _ in range(STEPS)]
    params = jax.tree.leaves(step.state.params)
    split = any(leaf.addressable_shards[0].data.shape != leaf.shape for leaf in params)
    if int(rank) == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"losses": losses, "devices": jax.device_count(), "split": split}, f)


if __name__ == "__main__":
    main()
