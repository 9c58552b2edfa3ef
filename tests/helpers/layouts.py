"""Run under torchrun: train a tiny model STEPS steps under each given layout, rank 0 writes the losses as JSON.

    torchrun --nproc-per-node N tests/helpers/layouts.py OUT.json gpt '[{"tp": 2}, {"pp": 2, "pp_schedule": "gpipe"}]' 5

Each layout is a set of run-key changes over the model's tiny keys (TINY); the world size is torchrun's, except for
ONE_PROCESS, the one-process reference, which rank 0 computes alone while the others wait (no second interpreter
importing torch for it). Every layout is built, stepped and torn down in these same processes, so one launch checks
several layouts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from tiny import LAYOUT_RUN, tiny_gpt, tiny_llama

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine
from dlperf.workloads import check_spec, get_workload, spec_from_mapping

STEPS = 5
TINY = {"gpt": tiny_gpt(**LAYOUT_RUN), "llama": tiny_llama(**LAYOUT_RUN)}
ONE_PROCESS = {"devices_per_node": 1}


def losses(model: str, changes: dict, engine: TorchEngine, steps: int = STEPS) -> list[float]:
    spec = spec_from_mapping({**TINY[model], "devices_per_node": engine.rank.world_size, **changes})
    step = get_workload(model).builder("torch")(spec, check_spec(spec), engine)
    return [step.read_loss(step.run()) for _ in range(steps)]


def launch(tmp_path: Path, nproc: int, model: str, layouts: list[dict], steps: int = STEPS) -> list[list[float]]:
    """One torchrun launch of this script runs every layout in turn in the same processes (from a test)."""
    out = tmp_path / f"losses{nproc}.json"
    torchrun = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--standalone", __file__,
         str(out), model, json.dumps(layouts), str(steps)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = torchrun.communicate(timeout=240)
    finally:  # a hung rank must not outlive the test: stop torchrun's whole session, workers included
        if torchrun.poll() is None:
            os.killpg(torchrun.pid, signal.SIGKILL)
            torchrun.wait()
    assert torchrun.returncode == 0, stderr[-3000:]
    return json.loads(out.read_text())


def main() -> None:
    out, model, layouts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else STEPS
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo", timeout=timedelta(seconds=120))  # a hung layout fails, not waits
    engine = TorchEngine()  # the process group is this script's own, with a timeout
    engine.rank = RankEnv(rank=rank, world_size=world, local_rank=rank, local_world_size=world)
    alone = TorchEngine()
    alone.rank = RankEnv(rank=0, world_size=1, local_rank=0, local_world_size=1)
    results = []
    for changes in layouts:
        if changes == ONE_PROCESS:
            results.append(losses(model, changes, alone, steps) if rank == 0 else [])
            if world > 1:
                dist.barrier()
        else:
            results.append(losses(model, changes, engine, steps))
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
