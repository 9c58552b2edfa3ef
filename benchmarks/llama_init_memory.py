"""What one rank holds while its Llama stage is built: peak resident memory of building rank 3's model under FSDP
over 8 ranks, on the CPU, beside the whole model's fp32 size and this rank's shards.

    python benchmarks/llama_init_memory.py            # the 1b
    python benchmarks/llama_init_memory.py --size 8b  # 30 GiB whole in fp32: more than this 24 GiB VM

The 8 ranks are torch's fake process group (one process plays rank 3; nothing is sent), which is enough here:
building the stage exchanges nothing, each rank draws each parameter whole and keeps its part. The model is split
and sharded on the meta device and only then drawn (model.materialize), so the peak should be about the shards
plus one whole parameter (the largest, the embedding or the output layer), not the whole stage.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from dlperf.workloads import check_spec, spec_from_mapping
from dlperf.workloads.llama import parallel, torch_step

GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1b", help="a Llama size (debug, 1b, 3b, 8b, ...)")
    parser.add_argument("--world", type=int, default=8, help="FSDP ranks")
    args = parser.parse_args()
    dist.init_process_group("fake", store=FakeStore(), rank=3, world_size=args.world)
    spec = spec_from_mapping({
        "model": "llama", "size": args.size, "device": "cpu", "devices_per_node": args.world, "seq_length": 256,
        "micro_batch_size": 1, "global_batch_size": args.world,
    })  # fmt: skip
    layout = check_spec(spec).layout
    cpu = torch.device("cpu")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    model = torch_step.build_stage(spec, layout, parallel.build_mesh(layout, cpu), 0, cpu)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    params = list(model.parameters())
    whole = sum(p.numel() for p in params) * 4
    local = sum(p.to_local().numel() for p in params) * 4
    largest = max(p.numel() for p in params) * 4
    print(f"llama {args.size}, FSDP over {args.world} ranks, one rank's build on the CPU ({seconds:.1f} s)")
    print(f"whole model, fp32        {whole / GIB:8.2f} GiB")
    print(f"this rank's shards       {local / GIB:8.2f} GiB")
    print(f"largest whole parameter  {largest / GIB:8.2f} GiB")
    print(f"peak resident memory     {peak / GIB:8.2f} GiB ({before / GIB:.2f} before the build)")
    print(f"peak / whole model       {peak / whole:8.2f}")


if __name__ == "__main__":
    main()
