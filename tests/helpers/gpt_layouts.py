"""Run under torchrun: train the tiny GPT 5 steps under each given layout, rank 0 writes the losses as JSON.

    torchrun --nproc-per-node N tests/helpers/gpt_layouts.py OUT.json '[{"tp": 2}, {"pp": 2, "pp_schedule": "gpipe"}]'

Each layout is a set of run-key changes over TINY_GPT; the world size is torchrun's. Every layout is built,
stepped and torn down in these same processes, so one launch checks several layouts.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from tiny import tiny_gpt

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine
from dlperf.workloads import check_spec, get_workload, spec_from_mapping

STEPS = 5
TINY_GPT = tiny_gpt(num_layers=4, micro_batch_size=2, global_batch_size=8, device="cpu", lr=1e-3)


def losses(changes: dict, engine: TorchEngine) -> list[float]:
    spec = spec_from_mapping({**TINY_GPT, "devices_per_node": engine.rank.world_size, **changes})
    step = get_workload("gpt").builder("torch")(spec, check_spec(spec), engine)
    return [step.read_loss(step.run()) for _ in range(STEPS)]


def main() -> None:
    out, layouts = sys.argv[1], json.loads(sys.argv[2])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", timeout=timedelta(seconds=120))  # a hung layout fails, not waits
    engine = TorchEngine()  # the process group is this script's own, with a timeout
    engine.rank = RankEnv(rank=rank, world_size=world, local_rank=rank, local_world_size=world)
    results = [losses(changes, engine) for changes in layouts]
    if rank == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(results, f)
    if world > 1:
        dist.destroy_process_group()
    # gloo's shutdown leaves its worker threads alive while the meshes still hold the groups. A thread that drops
    # the last collective's tensors after the interpreter began to finalize cannot take the GIL and aborts the
    # process ("terminate called without an active exception", pytorch/pytorch#190489), which CI saw once in
    # 4-process runs. Leave without finalizing: everything this script makes is already written and closed.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
