"""ResNet-50 training speed: synthetic against real data, and each speed flag on and off, in one run.

    # one H100: the fastest configuration, real data from a generated folder of 224-400 px JPEGs
    python benchmarks/resnet_speed.py --device cuda --batch-size 256 --precision amp-bf16 --data-loader dali torchvision
    # a CPU smoke run at tiny sizes
    python benchmarks/resnet_speed.py --device cpu --precision fp32 --batch-size 4 --image-size 32 --iters 2 \
        --warmup 1 --rounds 2 --data-min-size 48 --data-max-size 96 --compile-alternatives --workers 1

The base configuration is the flags as given (default: fused SGD, channels-last, torch.compile with CUDA graphs
("reduce-overhead") on CUDA, no host syncs in the step). Every variant differs from it in one thing: real data
through each `--data-loader`, the loader alone, each other optimizer implementation, channels-last toggled, each
`--compile-alternatives` mode, and a host sync every step (`loss.item()`, what a loop that logs every step pays).
Variants are measured in rounds, alternating (the order reversed every other round), each round `--iters` timed
steps after `--warmup` untimed ones; the table gives each variant's median images/s and its ratio to the base
on synthetic data. On CUDA the base step is also run once under `torch.cuda.set_sync_debug_mode("warn")`,
and the host syncs torch reports inside it are counted (0 is the goal).

Real data is an ImageNet-style folder (`--data DIR`), or one generated once under `--data-cache` with enough
images that the timed window of one variant spans about three epochs.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torchvision.models import resnet50

from dlperf.workloads.resnet.dali_data import dali_batches
from dlperf.workloads.resnet.data import folder_batches, synthetic_batches

OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")
COMPILE_MODES = ("none", "default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
AUTOCAST_DTYPES = {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}
Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class StepOptions:
    """The speed flags of one training step; each is one of the flags the `dlperf run` step should record."""

    optimizer_impl: str
    channels_last: bool
    compile_mode: str

    def label(self) -> str:
        layout = "channels-last" if self.channels_last else "NCHW"
        return f"{self.optimizer_impl} SGD, {layout}, compile {self.compile_mode}"


@dataclass(frozen=True)
class Variant:
    name: str
    step: StepOptions | None  # None: the loader alone, no training step
    data: str  # "synthetic" or a loader name
    sync_every_step: bool = False


def build_step(options: StepOptions, args: argparse.Namespace, device: torch.device) -> Callable[[Batch], torch.Tensor]:
    """ResNet-50 v1.5 + SGD + autocast, as `dlperf run` builds it, with the speed flags applied.

    The step returns the loss on the device and never reads a value back: with fp16 the fused optimizer takes the
    GradScaler's scale and inf flag on the device (the for-each and for-loop paths read the inf flag on the host).
    """
    memory_format = torch.channels_last if options.channels_last else torch.contiguous_format
    model: nn.Module = resnet50(weights=None, num_classes=args.num_classes).to(device, memory_format=memory_format)
    model.train()
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=0.1 * args.batch_size / 256,
        momentum=0.9,
        weight_decay=1e-4,
        fused=options.optimizer_impl == "fused",
        foreach=options.optimizer_impl == "foreach",
    )
    if options.compile_mode != "none":
        model = torch.compile(model, mode=None if options.compile_mode == "default" else options.compile_mode)
    criterion = nn.CrossEntropyLoss()
    dtype = AUTOCAST_DTYPES.get(args.precision)
    scaler = torch.amp.GradScaler(device.type) if args.precision == "amp-fp16" else None
    cuda_graphs = options.compile_mode in ("reduce-overhead", "max-autotune") and device.type == "cuda"

    def step(batch: Batch) -> torch.Tensor:
        images, labels = batch
        if cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()  # one training iteration = one graph-tree generation
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = criterion(model(images), labels)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def make_batches(data: str, channels_last: bool, args: argparse.Namespace, device: torch.device, folder: Path | None):
    """The next-batch function of one data source: the fixed synthetic batch, or a loader over the folder."""
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    if data == "synthetic":
        return synthetic_batches(args.batch_size, args.image_size, args.num_classes, device, memory_format)
    if data == "dali":
        return dali_batches(
            str(folder), args.batch_size, args.image_size, device, memory_format, 0, 1, args.seed, args.workers
        )
    return folder_batches(
        str(folder), args.batch_size, args.image_size, args.workers, device, memory_format, 0, 1, args.seed
    )


def variants(args: argparse.Namespace, base: StepOptions) -> list[Variant]:
    """The base on synthetic data first, then each change of one thing."""
    listed = [Variant("synthetic (base)", base, "synthetic")]
    listed += [Variant(f"real data, {loader}", base, loader) for loader in args.data_loader]
    listed += [Variant(f"{loader} loader alone", None, loader) for loader in args.data_loader]
    listed += [
        Variant(f"optimizer {impl}", replace(base, optimizer_impl=impl), "synthetic")
        for impl in OPTIMIZER_IMPLS
        if impl != base.optimizer_impl
    ]
    listed.append(
        Variant(
            f"channels-last {'off' if base.channels_last else 'on'}",
            replace(base, channels_last=not base.channels_last),
            "synthetic",
        )
    )
    listed += [
        Variant(f"compile {mode}", replace(base, compile_mode=mode), "synthetic")
        for mode in args.compile_alternatives
        if mode != base.compile_mode
    ]
    listed.append(Variant("host sync every step (loss.item())", base, "synthetic", sync_every_step=True))
    return listed


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_window(variant: Variant, step, next_batch, iters: int, warmup: int, device: torch.device) -> float:
    """Images/s over `iters` steps after `warmup` untimed ones, synchronised at both ends only."""

    def one() -> int:
        batch = next_batch()
        if step is not None:
            loss = step(batch)
            if variant.sync_every_step:
                loss.item()
        return len(batch[1])

    for _ in range(warmup):
        one()
    synchronize(device)
    start = time.perf_counter()
    images = sum(one() for _ in range(iters))
    synchronize(device)
    return images / (time.perf_counter() - start)


def count_host_syncs(step, next_batch) -> int:
    """Syncs torch's sync debugger reports in one step (dlperf.engines.torch.syncs)."""
    from dlperf.engines.torch.syncs import host_syncs_per_step

    batch = next_batch()
    return int(host_syncs_per_step(lambda: step(batch), steps=1)[0])


def write_jpeg(job: tuple[Path, int, int, int]) -> None:
    """A smooth random picture with fine noise: JPEG sizes and decode costs near a photograph's, unlike noise."""
    from PIL import Image

    path, width, height, seed = job
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
    pixels = np.asarray(coarse, dtype=np.int16) + rng.normal(0, 8, (height, width, 3)).astype(np.int16)
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(path, quality=90)


def generated_folder(args: argparse.Namespace) -> Path:
    """The folder of JPEGs the real-data variants read, made once and reused while its parameters match."""
    window = args.batch_size * args.iters
    count = args.data_images or max(4 * args.batch_size, window // 3)
    classes = min(args.num_classes, 100)
    root = Path(args.data_cache) / f"jpeg_{count}x{args.data_min_size}-{args.data_max_size}_c{classes}_s{args.seed}"
    done = root / "complete"
    if done.exists():
        return root
    rng = np.random.default_rng(args.seed)
    sizes = rng.integers(args.data_min_size, args.data_max_size + 1, (count, 2))
    jobs = []
    for index, (width, height) in enumerate(sizes.tolist()):
        folder = root / f"class{index % classes:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        jobs.append((folder / f"{index:07d}.jpg", width, height, args.seed * 1_000_003 + index))
    print(f"writing {count} JPEGs of {args.data_min_size}-{args.data_max_size} px in {classes} classes to {root}")
    with ProcessPoolExecutor() as pool:
        list(pool.map(write_jpeg, jobs, chunksize=64))
    done.write_text(f"{count}\n")
    return root


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--precision", choices=("fp32", "amp-bf16", "amp-fp16"), default="amp-bf16")
    parser.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="fused")
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--compile-mode", choices=COMPILE_MODES, default=None, help="default: reduce-overhead on CUDA, none on CPU"
    )
    parser.add_argument(
        "--compile-alternatives",
        nargs="*",
        choices=COMPILE_MODES,
        default=["none", "max-autotune-no-cudagraphs", "reduce-overhead"],
        help="compile modes measured against the base (CUDA graphs on/off: reduce-overhead vs "
        "max-autotune-no-cudagraphs); give none at all to skip",
    )
    parser.add_argument("--data-loader", nargs="*", choices=("torchvision", "dali"), default=None)
    parser.add_argument("--data", help="an ImageNet-style folder; default: a generated one")
    parser.add_argument("--data-cache", default=os.path.join(tempfile.gettempdir(), "dlperf-resnet-speed"))
    parser.add_argument("--data-images", type=int, default=0, help="default: a third of the timed window")
    parser.add_argument("--data-min-size", type=int, default=224)
    parser.add_argument("--data-max-size", type=int, default=400)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.data_loader is None:
        has_dali = importlib.util.find_spec("nvidia") and importlib.util.find_spec("nvidia.dali")
        args.data_loader = ["torchvision", "dali"] if has_dali else ["torchvision"]
    return args


def main() -> None:
    args = parse_args()
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    compile_mode = args.compile_mode or ("reduce-overhead" if use_cuda else "none")
    base = StepOptions(args.optimizer_impl, args.channels_last, compile_mode)
    folder = (Path(args.data) if args.data else generated_folder(args)) if args.data_loader else None
    listed = variants(args, base)
    print(
        f"ResNet-50 {args.image_size}x{args.image_size}, batch {args.batch_size}, {args.precision}, on {device}; "
        f"base: {base.label()}; {args.iters} timed steps after {args.warmup}, {args.rounds} rounds alternating"
    )

    def source(variant: Variant) -> tuple[str, bool]:
        return variant.data, (variant.step or base).channels_last

    # One model per step configuration and one loader per data source and layout, shared by the variants.
    steps = {options: build_step(options, args, device) for options in {v.step for v in listed} if options}
    batches = {key: make_batches(*key, args, device, folder) for key in dict.fromkeys(map(source, listed))}

    def parts(variant: Variant):
        return (steps[variant.step] if variant.step else None), batches[source(variant)]

    # Compilation, CUDA-graph capture, cuDNN autotuning and loader start-up happen here, outside the rounds.
    for variant in listed:
        run_window(variant, *parts(variant), iters=0, warmup=max(3, args.warmup), device=device)
    if use_cuda:
        syncs = count_host_syncs(*parts(listed[0]))
        print(f"host syncs in one base step (torch.cuda.set_sync_debug_mode('warn')): {syncs}")
    rates: dict[str, list[float]] = {v.name: [] for v in listed}
    for round_ in range(args.rounds):
        for variant in listed if round_ % 2 == 0 else listed[::-1]:
            # The DataLoader refilled its prefetch queue (2 batches a worker) while the others ran: drain it first.
            warmup = args.warmup + (4 * args.workers if variant.data == "torchvision" else 0)
            rates[variant.name].append(run_window(variant, *parts(variant), args.iters, warmup, device))
        print(f"round {round_ + 1}/{args.rounds} done", flush=True)
    base_rate = statistics.median(rates[listed[0].name])
    print(f"\n{'variant':<40} {'images/s':>10} {'min':>10} {'max':>10} {'x base':>7}")
    for variant in listed:
        median = statistics.median(rates[variant.name])
        low, high = min(rates[variant.name]), max(rates[variant.name])
        print(f"{variant.name:<40} {median:>10.5g} {low:>10.5g} {high:>10.5g} {median / base_rate:>7.3f}")


if __name__ == "__main__":
    main()
