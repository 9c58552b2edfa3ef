"""Run by the commbench test under torchrun: every collective over gloo, rank 0 writes the record."""

import json
import sys

import torch.distributed as dist

from dlperf.commbench import OPS, build_commbench_record
from dlperf.commbench.measure import measure_collectives

if __name__ == "__main__":
    dist.init_process_group("gloo")
    timings = measure_collectives(OPS, [4096, 65536, 262144], warmup=1, repeats=3)
    if dist.get_rank() == 0:
        record = build_commbench_record(
            timings, nodes=1, devices_per_node=dist.get_world_size(), backend="gloo", device_type="cpu", dtype="float32"
        )
        with open(sys.argv[1], "w") as f:
            json.dump(record, f)
    dist.destroy_process_group()
