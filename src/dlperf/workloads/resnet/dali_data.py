"""ImageNet-style JPEG folders read, decoded and augmented by NVIDIA DALI: on the GPU with the mixed (nvJPEG)
decoder, so real data can keep up with a fast training step; on the CPU where there is no GPU.

The batches match `image_data.folder_batches` (RandomResizedCrop, horizontal flip, ImageNet mean/std, labels
int64 by sorted class folder, each rank its own shard of a seeded global shuffle that changes every epoch).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from dlperf.errors import ConfigError, DataError
from dlperf.install import extra as install

if TYPE_CHECKING:
    import torch

INSTALL_HINT = f"{install('dali')} (or the nvidia-dali-cuda120 wheel for CUDA 12)"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
READER_NAME = "Reader"
# nvJPEG scratch buffers sized for full ImageNet JPEGs (the values of NVIDIA's ResNet-50 DALI example), so the
# mixed decoder does not reallocate when a larger image arrives mid-run.
_DEVICE_MEMORY_PADDING = 211_025_920
_HOST_MEMORY_PADDING = 140_544_512


def require_dali() -> None:
    """Refuse `--data-loader dali` up front, with the reason and the fix, where DALI cannot be imported.

    Imports DALI's core and its PyTorch plugin only (no torch at module level), so a launcher can call it
    before any worker starts.
    """
    for module in ("nvidia.dali", "nvidia.dali.plugin.pytorch"):
        try:
            importlib.import_module(module)
        except (ImportError, OSError) as exc:
            raise ConfigError(
                f"--data-loader dali needs NVIDIA DALI, which cannot be imported here ({exc}): "
                f"{INSTALL_HINT}, or use --data-loader torchvision"
            ) from None


def check_enough_images(folder: str, images: int, batch_size: int, world_size: int) -> None:
    """Both loaders drop a last partial batch: a folder needs one whole global batch."""
    if images < batch_size * world_size:
        raise DataError(
            f"data folder {folder} has {images} images, fewer than one global batch "
            f"({batch_size} x {world_size}): add images or lower --batch-size"
        )


def dali_batches(
    folder: str,
    batch_size: int,
    image_size: int,
    device: torch.device,
    memory_format: torch.memory_format,
    rank: int,
    world_size: int,
    seed: int,
    workers: int,
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Return a function giving the next (images, labels) batch on `device`, cycling epochs without end.

    Images are float32 NCHW; with `torch.channels_last` DALI writes NHWC and the tensor is its NCHW view
    (channels-last strides, no copy). `workers` is DALI's CPU thread count (at least one).
    """
    require_dali()
    import torch
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    on_gpu = device.type == "cuda"
    channels_last = memory_format == torch.channels_last
    device_id = (device.index if device.index is not None else torch.cuda.current_device()) if on_gpu else None
    pipeline = _build_pipeline(folder, batch_size, image_size, device_id, rank, world_size, seed, max(1, workers),
                               "HWC" if channels_last else "CHW")  # fmt: skip
    check_enough_images(folder, pipeline.epoch_size(READER_NAME), batch_size, world_size)
    # DROP: every batch is full, as with the DataLoader's drop_last; auto_reset starts the next epoch.
    loader = DALIGenericIterator(pipeline, ["images", "labels"], reader_name=READER_NAME,
                                 last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)  # fmt: skip
    stream = _forever(loader)

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        batch = next(stream)[0]
        images = batch["images"]
        if channels_last:
            images = images.permute(0, 3, 1, 2)
        return images, batch["labels"].view(-1).long()

    return next_batch


def _build_pipeline(folder: str, batch_size: int, image_size: int, device_id: int | None, shard_id: int,
                    num_shards: int, seed: int, num_threads: int, layout: str):  # fmt: skip
    """The DALI graph: file reader -> decode with a random crop -> resize -> flip + normalise (+ layout)."""
    from nvidia.dali import fn, pipeline_def, types

    on_gpu = device_id is not None

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed)
    def pipeline():
        # A seeded global reshuffle every epoch, the same on every rank, each rank its contiguous slice:
        # the shards of one epoch are disjoint and cover the folder, as with a DistributedSampler.
        jpegs, labels = fn.readers.file(
            file_root=folder,
            shard_id=shard_id,
            num_shards=num_shards,
            shuffle_after_epoch=True,
            shuffle_after_epoch_seed=seed,
            name=READER_NAME,
        )
        # The random-resized-crop window is decoded alone (ROI decode), drawn as torchvision's RandomResizedCrop
        # draws it: area 8-100 %, aspect 3/4-4/3, 10 attempts.
        mixed = {"device": "mixed", "device_memory_padding": _DEVICE_MEMORY_PADDING,
                 "host_memory_padding": _HOST_MEMORY_PADDING}  # fmt: skip
        decoder_options = mixed if on_gpu else {"device": "cpu"}
        images = fn.decoders.image_random_crop(
            jpegs,
            output_type=types.RGB,
            random_area=[0.08, 1.0],
            random_aspect_ratio=[3 / 4, 4 / 3],
            num_attempts=10,
            **decoder_options,
        )
        images = fn.resize(images, resize_x=image_size, resize_y=image_size, interp_type=types.INTERP_LINEAR)
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout=layout,
            mean=[255 * m for m in IMAGENET_MEAN],
            std=[255 * s for s in IMAGENET_STD],
            mirror=fn.random.coin_flip(probability=0.5),
        )
        return images, labels.gpu() if on_gpu else labels

    built = pipeline()
    built.build()
    return built


def _forever(loader) -> Iterator[list[dict[str, torch.Tensor]]]:
    """Epoch after epoch: the iterator ends each epoch with StopIteration and resets itself (auto_reset)."""
    while True:
        yield from loader
