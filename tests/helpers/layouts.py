"""Run under torchrun: train a tiny model STEPS steps under each given layout, rank 0 writes the losses as JSON.

    torchrun --nproc-per-node N tests/helpers/layouts.py OUT.json gpt '[{"tp": 2}, {"pp": 2, "pp_schedule": "gpipe"}]' 5

Each layout is a set of run-key changes over the model's tiny keys (TINY); it may name another tiny model than the
launch's (`"model"`) and its own step count (`"steps"`), so two models' layouts share one launch's processes. The
world size is torchrun's, except for a layout of one device (ONE_PROCESS, the one-process reference, or it with other
changes), which rank 0 computes alone while the others wait (no second interpreter importing torch for it). Every
layout is built, stepped and torn down in these same processes, so one launch checks several layouts.

float8 (FLOAT8) runs on the CPU: torch's `_scaled_mm` has a CPU kernel there, so torchao's float8 training and its
TP styles compute what they compute on a GPU, only slowly. dlperf refuses float8 off a GPU of compute capability
8.9 (a CPU would measure nothing real), in the parent for an explicit `--device cpu` and in the rank
(`torch_step.check_device`): these layouts leave the device to `auto` (this script's ranks are on the CPU whatever
it says), and this script lifts the rank's check. One gap of gloo's: it has no float8 types ("Invalid scalar type"
for an all-gather of float8_e4m3fn, which torchao's float8 TP styles issue; NCCL moves them as bytes), so a launch
moves them as bytes too (gather_float8_as_bytes) from its first float8 layout on: the same bits gathered, and the
layouts before it untouched.
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
from tiny import LAYOUT_RUN, tiny_gpt, tiny_llama, tiny_moe
from torch.distributed.distributed_c10d import _resolve_process_group

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine
from dlperf.workloads import check_spec, get_workload, spec_from_mapping
from dlperf.workloads.llama import torch_step

STEPS = 5
TINY = {"gpt": tiny_gpt(**LAYOUT_RUN), "llama": tiny_llama(**LAYOUT_RUN), "moe": tiny_moe(**LAYOUT_RUN)}
ONE_PROCESS = {"devices_per_node": 1}
FLOAT8 = {"float8": True, "device": "auto"}


def losses(model: str, changes: dict, engine: TorchEngine, steps: int = STEPS) -> list[float]:
    changes = dict(changes)
    steps = changes.pop("steps", steps)
    model = changes.get("model", model)
    spec = spec_from_mapping({**TINY[model], "devices_per_node": engine.rank.world_size, **changes})
    step = get_workload(model).builder("torch")(spec, check_spec(spec), engine)
    return [step.read_loss(step.run()) for _ in range(steps)]


def gather_float8_as_bytes() -> torch.library.Library:
    """The CPU kernel of the functional all-gather (DTensor's) replaced by one that hands gloo float8 tensors as
    bytes (the library it returns holds the replacement for as long as it lives)."""

    def all_gather(tensor: torch.Tensor, group_size: int, group_name: str) -> torch.Tensor:
        out = tensor.new_empty((tensor.shape[0] * group_size, *tensor.shape[1:]))
        wire = torch.uint8 if tensor.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else tensor.dtype
        group = _resolve_process_group(group_name)
        dist.all_gather_single(out.view(wire), tensor.contiguous().view(wire), group=group)
        return out

    library = torch.library.Library("_c10d_functional", "IMPL")
    library.impl("all_gather_into_tensor", all_gather, "CPU")
    return library


def launch(tmp_path: Path, nproc: int, model: str, layouts: list[dict], steps: int = STEPS) -> list[list[float]]:
    """One torchrun launch of this script runs every layout in turn in the same processes (from a test)."""
    out = tmp_path / f"losses{nproc}.json"
    torchrun = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--standalone", __file__,
         str(out), model, json.dumps(layouts), str(steps)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, stderr = torchrun.communicate(timeout=480)
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
    byte_gathers = None
    for changes in layouts:
        if changes.get("float8") and byte_gathers is None:  # float8 on the CPU (above), from its first layout on
            torch_step.check_device = lambda config, layout, device: None
            byte_gathers = gather_float8_as_bytes()
        if changes.get("devices_per_node") == 1:
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
