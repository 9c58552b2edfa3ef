"""ResNet-50 v1.5 image classification training (torchvision's resnet50 is the v1.5 variant)."""

from __future__ import annotations

import torch
from torch import nn

from dlperf.config import RunConfig
from dlperf.engine.precision import MixedPrecision
from dlperf.workloads.base import DistContext, TrainStep, Workload
from dlperf.workloads.image_data import check_image_folder, folder_batches, synthetic_batches


def variant_tag(config: RunConfig) -> str:
    """Precision plus every switch that changes speed, so no two variants share a file name."""
    parts = [config.precision]
    if config.compile:
        parts.append("compile")
    if config.channels_last:
        parts.append("channels-last")
    if config.data != "synthetic":
        parts.append("realdata")
    return "_".join(parts)


class ResNet50Workload(Workload):
    name = "resnet50"

    def validate(self, config: RunConfig) -> None:
        if config.data != "synthetic":
            check_image_folder(config.data)

    def global_batch(self, config: RunConfig) -> int:
        return config.batch_size * config.world_size

    def group(self, config: RunConfig) -> str:
        return f"b{config.batch_size}_{variant_tag(config)}"

    def run_stem(self, config: RunConfig) -> str:
        return f"{self.name}_{self.group(config)}"

    def build(self, config: RunConfig, ctx: DistContext) -> TrainStep:
        from torchvision.models import resnet50

        memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
        model: nn.Module = resnet50(weights=None, num_classes=config.num_classes)
        model = model.to(ctx.device, memory_format=memory_format)
        if ctx.distributed:
            device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
        if config.compile:
            model = torch.compile(model)
        lr = config.lr if config.lr is not None else 0.1 * self.global_batch(config) / 256
        optimizer = torch.optim.SGD(
            model.parameters(), lr=lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
        criterion = nn.CrossEntropyLoss()
        amp = MixedPrecision(config.precision, ctx.device)
        if config.data == "synthetic":
            next_batch = synthetic_batches(
                config.batch_size, config.image_size, config.num_classes, ctx.device, memory_format
            )
        else:
            next_batch = folder_batches(
                config.data,
                config.batch_size,
                config.image_size,
                config.workers,
                ctx.device,
                memory_format,
                ctx.rank,
                ctx.world_size,
                config.seed,
            )
        model.train()

        def step() -> torch.Tensor:
            images, labels = next_batch()
            with amp.autocast():
                loss = criterion(model(images), labels)
            amp.backward(loss)
            amp.step(optimizer)
            return loss.detach()

        return step
