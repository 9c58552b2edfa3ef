"""ResNet-50 v1.5 training step on the PyTorch engine: torchvision's resnet50, DDP, SGD with momentum."""

from __future__ import annotations

import torch
from torch import nn

from dlperf.engines.base import TrainStep
from dlperf.engines.torch.engine import TorchEngine
from dlperf.engines.torch.parameters import parameter_facts
from dlperf.engines.torch.precision import MixedPrecision, loss_value
from dlperf.spec import RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.resnet import ResNetConfig
from dlperf.workloads.resnet.data import folder_batches, synthetic_batches


def build(spec: RunSpec, plan: WorkloadPlan, engine: TorchEngine) -> TrainStep:
    """Model, data and optimizer on this rank; the step returns the loss without waiting for the device."""
    from torchvision.models import resnet50

    config: ResNetConfig = spec.workload
    device, rank = engine.device, engine.rank
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model: nn.Module = resnet50(weights=None, num_classes=config.num_classes)
    model = model.to(device, memory_format=memory_format)
    if rank.distributed:
        device_ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if spec.compile:
        model = torch.compile(model)
    lr = config.lr if config.lr is not None else 0.1 * plan.global_batch / 256
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=config.momentum, weight_decay=config.weight_decay)
    criterion = nn.CrossEntropyLoss()
    amp = MixedPrecision(spec.precision, device)
    if spec.data == "synthetic":
        next_batch = synthetic_batches(config.batch_size, config.image_size, config.num_classes, device, memory_format)
    else:
        next_batch = folder_batches(
            spec.data,
            config.batch_size,
            config.image_size,
            config.workers,
            device,
            memory_format,
            rank.rank,
            rank.world_size,
            spec.seed,
        )
    model.train()

    def step() -> torch.Tensor:
        images, labels = next_batch()
        with amp.autocast():
            loss = criterion(model(images), labels)
        amp.backward(loss)
        amp.step(optimizer)
        return loss.detach()

    return TrainStep(run=step, read_loss=loss_value, model=parameter_facts(model))
