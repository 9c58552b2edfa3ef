"""Image batches for classification: one fixed synthetic batch, or an ImageNet-style folder of JPEGs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from dlperf.workloads.resnet.dali_data import check_enough_images

Batch = tuple[torch.Tensor, torch.Tensor]


def synthetic_batches(
    batch_size: int,
    image_size: int,
    num_classes: int,
    device: torch.device,
    memory_format: torch.memory_format,
) -> Callable[[], Batch]:
    """One random batch kept on the device and reused, as the reference scripts' synthetic mode does."""
    images = torch.randn(batch_size, 3, image_size, image_size, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(0, num_classes, (batch_size,), device=device)
    return lambda: (images, labels)


def folder_batches(
    path: str,
    batch_size: int,
    image_size: int,
    workers: int,
    device: torch.device,
    memory_format: torch.memory_format,
    rank: int,
    world_size: int,
    seed: int,
) -> Callable[[], Batch]:
    """Decode and augment JPEGs in a DataLoader, each rank reading its own shard, cycling epochs."""
    from torch.utils.data import DataLoader, DistributedSampler
    from torchvision import datasets, transforms

    transform = transforms.Compose(
        [
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    dataset = datasets.ImageFolder(path, transform=transform)
    check_enough_images(path, len(dataset), batch_size, world_size)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=workers,
        pin_memory=device.type == "cuda",
        drop_last=True,
        persistent_workers=workers > 0,
    )
    stream = _cycle(loader, sampler)

    def next_batch() -> Batch:
        images, labels = next(stream)
        images = images.to(device, non_blocking=True).contiguous(memory_format=memory_format)
        return images, labels.to(device, non_blocking=True)

    return next_batch


def _cycle(loader, sampler) -> Iterator[Batch]:
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1
