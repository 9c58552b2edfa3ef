"""ResNet-50 v1.5 training step on the PyTorch engine: torchvision's resnet50, DDP, SGD with momentum."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch import flop_count
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.own_work import OWN_WORK, OwnWorkClock, data_phase
from dlperf.engines.torch.parameters import parameter_facts
from dlperf.engines.torch.precision import MixedPrecision, loss_value, zero_momentum_buffers
from dlperf.spec import CUDA_GRAPH_MODES, RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.resnet import ResNetConfig
from dlperf.workloads.resnet.dali_data import dali_batches
from dlperf.workloads.resnet.data import Batch, folder_batches, synthetic_batches


def build(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> TrainStep:
    """Model, data and optimizer on this rank; the step returns the loss without waiting for the device."""
    from torchvision.models import resnet50

    config: ResNetConfig = spec.workload
    device, rank = engine.device, engine.rank
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model: nn.Module = resnet50(weights=None, num_classes=config.num_classes)
    model = model.to(device, memory_format=memory_format)
    # backward reaches conv1 last. Under --compile the whole (DDP) model is one compiled region, which would trace
    # the clock's forward pre-hook and its CUDA events (pytorch/pytorch#176486; CUDA graphs cannot hold them at
    # all): there the straggler evidence is the step time (`measure: step`), and nothing of ours is compiled.
    own_clock = None if spec.compile else OwnWorkClock(model, model.conv1.weight, device, rank.rank)
    model, no_sync = _parallel(model, spec, engine)
    optimizer = _optimizer(model, spec, plan, device)
    graphs = spec.compile and spec.compile_mode in CUDA_GRAPH_MODES and device.type == "cuda"
    criterion = nn.CrossEntropyLoss()
    amp = MixedPrecision(spec.precision, device)
    next_batch = data_phase(own_clock, _batches(spec, engine, memory_format))
    model.train()

    def step() -> torch.Tensor:
        """No host sync: the loss stays on the device until the loop reads it at a window edge."""
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        images, labels = next_batch()
        with amp.autocast():
            loss = criterion(model(images), labels)
        amp.backward(loss)
        if own_clock:
            own_clock.backward_done()
        amp.step(optimizer)
        return loss.detach()

    def count_flops() -> int:
        """One iteration's FLOPs: one device's step counted on the meta device, times the data-parallel ranks."""
        with torch.device("meta"):
            meta = resnet50(weights=None, num_classes=config.num_classes)
        images = torch.empty(config.batch_size, 3, config.image_size, config.image_size, device="meta")
        labels = torch.zeros(config.batch_size, dtype=torch.long, device="meta")
        per_device = flop_count.training_step_flops(meta, (images,), lambda out: criterion(out, labels))
        return per_device * spec.world_size

    return TrainStep(
        run=step,
        read_loss=loss_value,
        own_clock=own_clock,
        own_measure=OWN_WORK if own_clock else "step",
        count_flops=count_flops,
        model=parameter_facts(model),
        no_sync=no_sync,
    )


def _parallel(model: nn.Module, spec: RunSpec, engine: TorchEngine) -> tuple[nn.Module, Any]:
    """The model as it trains: DDP over several ranks, compiled under --compile; and DDP's no_sync() for --ablate
    sync, on an eager step only (a compiled one would recompile under it)."""
    no_sync = None
    if engine.rank.distributed:
        device_ids = [engine.device.index] if engine.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
        no_sync = None if spec.compile else model.no_sync
    if spec.compile:
        model = torch.compile(model, mode=None if spec.compile_mode == "default" else spec.compile_mode)
    return model, no_sync


OPTIMIZER_KERNELS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}


def _optimizer(model: nn.Module, spec: RunSpec, plan: WorkloadPlan, device: torch.device) -> torch.optim.SGD:
    """SGD with momentum in the asked implementation, its momentum buffers zeroed."""
    config: ResNetConfig = spec.workload
    impl = config.optimizer_impl
    if impl == "auto" and spec.precision == "amp-fp16" and device.type == "cuda":
        impl = "fused"  # the loss scaler skips an inf step on the device only with a fused optimizer (no sync)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=plan.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        **OPTIMIZER_KERNELS.get(impl, {}),
    )
    zero_momentum_buffers(optimizer)
    return optimizer


def _batches(spec: RunSpec, engine: TorchEngine, memory_format: torch.memory_format) -> Callable[[], Batch]:
    """This rank's batches: one synthetic batch, or the image folder through DALI or torchvision's loader."""
    config: ResNetConfig = spec.workload
    device, rank = engine.device, engine.rank
    if spec.data == "synthetic":
        return synthetic_batches(config.batch_size, config.image_size, config.num_classes, device, memory_format)
    shape = (config.batch_size, config.image_size)
    if config.data_loader == "dali":
        return dali_batches(spec.data, *shape, device, memory_format, rank.rank, rank.world_size, spec.seed,
                            config.workers)  # fmt: skip
    return folder_batches(spec.data, *shape, config.workers, device, memory_format, rank.rank, rank.world_size,
                          spec.seed)  # fmt: skip
