"""Two gloo ranks time dlperf's tiny GPT step (micro-batch 2, under DDP) through the loop's `--ablate sync`
windows, a DDP comm hook counting the gradient buckets all-reduced by each step; rank 0 prints one JSON line: per
step, whether it ran inside no_sync() and how many buckets it all-reduced.

    python tests/helpers/ablation_allreduces.py PORT
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from contextlib import contextmanager

import torch.multiprocessing as mp
from tiny import tiny_gpt
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook


def rank_main(rank: int, port: int) -> None:
    os.environ.update(
        RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )  # fmt: skip
    from dlperf.engines import get_engine
    from dlperf.engines.base import RankEnv
    from dlperf.harness.loop import _ablation_windows
    from dlperf.harness.worker import build_step
    from dlperf.workloads import get_workload, spec_from_mapping

    spec = spec_from_mapping(tiny_gpt(micro_batch_size=2, device="cpu", devices_per_node=2, cpu_threads=1))
    engine = get_engine(spec.engine)
    engine.setup(spec, RankEnv.from_environ())
    step = build_step(spec, get_workload(spec.model).plan(spec), engine)
    assert step.no_sync is not None
    buckets = [0]

    def counted(state, bucket):  # unannotated: DDP checks a hook's annotations, which would be strings here
        buckets[0] += 1
        return allreduce_hook(state, bucket)

    step.no_sync.__self__.register_comm_hook(None, counted)
    inside = [False]
    steps: list[tuple[bool, int]] = []

    @contextmanager
    def no_sync():
        inside[0] = True
        with step.no_sync():
            yield
        inside[0] = False

    def run():
        before = buckets[0]
        output = step.run()
        steps.append((inside[0], buckets[0] - before))
        return output

    _ablation_windows(dataclasses.replace(step, run=run, no_sync=no_sync), engine, 4, 2, 4)
    if rank == 0:
        print(json.dumps(steps))


if __name__ == "__main__":
    mp.spawn(rank_main, args=(int(sys.argv[1]),), nprocs=2)
