"""Harness overhead: dlperf's timed loop against a bare hand-written PyTorch loop, same process, alternating.

    python benchmarks/harness_overhead.py                      # CPU: ResNet-50 at 64x64, batch 16
    python benchmarks/harness_overhead.py --device cuda --image-size 224 --batch-size 128 --precision amp-bf16

dlperf's side is what every rank of `dlperf run` executes (the workload's step, per-step clock marks,
window edges, the log file); the bare side is a plain loop with one sync at each end. Prints each
round's throughputs, their medians and the ratio dlperf / bare (target >= 0.99).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torchvision.models import resnet50

from dlperf.engines.base import RankEnv
from dlperf.engines.torch.engine import TorchEngine
from dlperf.harness.worker import build_step, time_step
from dlperf.records.runlog import RunLogWriter
from dlperf.workloads import check_spec, spec_from_mapping


def bare_loop(args: argparse.Namespace, device: torch.device) -> float:
    """The reference: nothing but the training step, timed with one sync at each end."""
    model = resnet50(num_classes=args.num_classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * args.batch_size / 256, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    labels = torch.randint(0, args.num_classes, (args.batch_size,), device=device)
    dtype = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "amp-fp16" else None

    def step() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = criterion(model(images), labels)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.iters):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return args.batch_size * args.iters / (time.perf_counter() - start)


def dlperf_loop(args: argparse.Namespace, engine: TorchEngine, log_path: Path) -> float:
    spec = spec_from_mapping(
        {
            "model": "resnet50",
            "batch_size": args.batch_size,
            "image_size": args.image_size,
            "num_classes": args.num_classes,
            "precision": args.precision,
            "device": engine.device.type,
            "warmup_iters": args.warmup,
            "iters": args.iters,
            "print_every": args.print_every,
        }
    )
    log = RunLogWriter(log_path)
    try:
        plan = check_spec(spec)
        measured = time_step(build_step(spec, plan, engine), spec, plan, engine, on_window=log.window)
    finally:
        log.close()
    return measured.throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--print-every", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    engine = TorchEngine()
    engine.setup(spec_from_mapping({"device": args.device}), RankEnv(0, 1, 0, 1))
    device = engine.device
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    print(
        f"ResNet-50 {args.image_size}x{args.image_size} batch {args.batch_size} {args.precision} on {device}, "
        f"{args.iters} timed iterations, {args.rounds} rounds alternating"
    )
    ours, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            # alternate the order so drift (thermal, other tenants) does not favour one side
            order = ("dlperf", "bare") if round_ % 2 == 0 else ("bare", "dlperf")
            for side in order:
                torch.manual_seed(round_)
                if side == "dlperf":
                    ours.append(dlperf_loop(args, engine, Path(tmp) / f"round{round_}.log"))
                else:
                    bare.append(bare_loop(args, device))
            print(f"round {round_ + 1}: dlperf {ours[-1]:.2f} samples/s, bare {bare[-1]:.2f} samples/s")
    ratio = statistics.median(ours) / statistics.median(bare)
    print(
        f"median: dlperf {statistics.median(ours):.2f} samples/s, bare {statistics.median(bare):.2f} samples/s, "
        f"ratio {ratio:.4f} (target >= 0.99)"
    )


if __name__ == "__main__":
    main()
