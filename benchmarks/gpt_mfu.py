"""Tokens/s, TFLOP/s per device and MFU of GPT training for one config and precision, in this process.

    PYTHONPATH=src python benchmarks/gpt_mfu.py --num-layers 24 --hidden-size 2048 --num-heads 16 \
        --micro-batch-size 8 --global-batch-size 8 --precision amp-bf16 --compile

Single device (the tensor/pipeline layouts run through `dlperf run --model gpt`); FLOPs, the peak table and
MFU are dlperf's own (src/dlperf/metrics/flops.py), the timing is dlperf's timed loop.
"""

from __future__ import annotations

import argparse

import torch

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine
from dlperf.harness.worker import build_step, time_step
from dlperf.spec import PRECISIONS
from dlperf.workloads import check_spec, get_workload, spec_from_mapping
from dlperf.workloads.gpt import GPTConfig
from dlperf.workloads.gpt.model import count_parameters
from dlperf.workloads.gpt.torch_step import model_shape


def main() -> None:
    d = GPTConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("num_layers", "hidden_size", "num_heads", "seq_length", "vocab_size", "micro_batch_size"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(d, name))
    parser.add_argument("--global-batch-size", type=int, default=None, help="default: the micro batch")
    parser.add_argument("--precision", choices=PRECISIONS, default="amp-bf16")
    parser.add_argument("--compile", action="store_true", help="torch.compile each block")
    parser.add_argument("--warmup-iters", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--peak-tflops", type=float, default=None, help="device peak for MFU (default: the table)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    spec = spec_from_mapping({"model": "gpt", **vars(args), "print_every": args.iters})
    config = spec.workload
    plan = check_spec(spec)
    engine = TorchEngine()
    engine.setup(spec, RankEnv(0, 1, 0, 1))
    device = engine.device
    measured = time_step(build_step(spec, plan, engine), spec, plan, engine)
    name = engine.device_name()
    metrics = get_workload("gpt").derived_metrics(
        spec, plan, {"throughput": measured.throughput, "ranks": [{"device": name}], "device_type": device.type}
    )
    params = count_parameters(model_shape(config, 1))
    peak_mib = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else float("nan")
    mfu = "n/a" if metrics["mfu"] is None else f"{metrics['mfu']:.1%}"
    print(
        f"{name} {spec.precision}{' compile' if spec.compile else ''}: {params / 1e9:.3f}B params, "
        f"l={config.num_layers} h={config.hidden_size} nh={config.num_heads} s={config.seq_length} "
        f"batch={plan.global_batch} | {measured.throughput:.2f} samples/s, "
        f"{metrics['tokens_per_s']:.0f} tokens/s, {metrics['tflops_per_device']:.1f} TFLOP/s per device, "
        f"MFU {mfu}{'' if metrics['mfu_note'] is None else ' (' + metrics['mfu_note'] + ')'}, "
        f"{1000 * measured.elapsed_s / measured.iters:.1f} ms/iter, peak {peak_mib:.0f} MiB, "
        f"loss {measured.loss_first:.3f} -> {measured.loss_last:.3f}"
    )


if __name__ == "__main__":
    main()
