"""The real-data loaders (torchvision DataLoader and NVIDIA DALI's CPU pipeline) on a generated JPEG folder:
batch shape, dtype, layout, labels, and one disjoint shard per rank in every epoch.

Every image is one solid colour that encodes its index in the folder, so a sample is still recognisable after
random-resized-crop, flip and normalisation: the shards can be checked sample by sample.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY, run_dlperf

from dlperf import install
from dlperf.errors import ConfigError
from dlperf.workloads.resnet.dali_data import IMAGENET_MEAN, IMAGENET_STD, dali_batches
from dlperf.workloads.resnet.data import folder_batches

CLASSES, PER_CLASS, BATCH, SIZE = 3, 8, 4, 32
IMAGES = CLASSES * PER_CLASS
STEP, OFFSET = 10, 8  # red channel of image i is OFFSET + STEP * i: far apart enough to survive JPEG

HAS_DALI = importlib.util.find_spec("nvidia") is not None and importlib.util.find_spec("nvidia.dali") is not None
needs_dali = pytest.mark.skipif(not HAS_DALI, reason="NVIDIA DALI is not installed (pip install 'dlperf[dali]')")


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 classes x 8 solid-colour JPEGs of 40-80 px on each side, none of them square like the output."""
    from PIL import Image

    root = tmp_path_factory.mktemp("jpegs")
    for index in range(IMAGES):
        folder = root / f"class{index // PER_CLASS}"
        folder.mkdir(exist_ok=True)
        red = OFFSET + STEP * index
        size = (40 + (index * 7) % 41, 80 - (index * 5) % 41)
        Image.new("RGB", size, color=(red, 255 - red, 128)).save(folder / f"{index}.jpg", quality=95)
    return root


def torchvision_loader(folder: Path, memory_format: torch.memory_format, rank: int, world_size: int):
    return folder_batches(str(folder), BATCH, SIZE, 0, torch.device("cpu"), memory_format, rank, world_size, seed=3)


def dali_loader(folder: Path, memory_format: torch.memory_format, rank: int, world_size: int):
    return dali_batches(
        str(folder), BATCH, SIZE, torch.device("cpu"), memory_format, rank, world_size, seed=3, workers=1
    )


LOADERS = [
    pytest.param(torchvision_loader, id="torchvision"),
    pytest.param(dali_loader, id="dali", marks=needs_dali),
]


def sample_indices(images: torch.Tensor) -> list[int]:
    """Undo the normalisation and read each image's index back from its mean red value."""
    mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
    red = ((images.float() * std + mean) * 255)[:, 0].mean(dim=(1, 2))
    return [round((value - OFFSET) / STEP) for value in red.tolist()]


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("memory_format", [torch.contiguous_format, torch.channels_last], ids=["nchw", "nhwc"])
def test_batches_have_shape_dtype_layout_and_labels(jpeg_folder: Path, loader, memory_format) -> None:
    next_batch = loader(jpeg_folder, memory_format, rank=0, world_size=1)
    for _ in range(IMAGES // BATCH + 1):  # past one epoch: the loader starts the next by itself
        images, labels = next_batch()
        assert images.shape == (BATCH, 3, SIZE, SIZE)
        assert images.dtype == torch.float32 and labels.dtype == torch.int64
        assert labels.shape == (BATCH,)
        assert images.is_contiguous(memory_format=memory_format)
        assert images.device.type == labels.device.type == "cpu"
        # Label = sorted class folder, the same image-to-class mapping for both loaders.
        assert labels.tolist() == [index // PER_CLASS for index in sample_indices(images)]
        assert all(0 <= label < CLASSES for label in labels.tolist())


@pytest.mark.parametrize("loader", LOADERS)
def test_each_rank_reads_its_own_shard_every_epoch(jpeg_folder: Path, loader) -> None:
    world_size, batches_per_epoch = 2, IMAGES // (2 * BATCH)
    ranks = [loader(jpeg_folder, torch.contiguous_format, rank, world_size) for rank in range(world_size)]
    orders = []
    for _epoch in range(2):
        shards = [
            [index for _ in range(batches_per_epoch) for index in sample_indices(next_batch()[0])]
            for next_batch in ranks
        ]
        assert all(len(set(shard)) == IMAGES // world_size for shard in shards)  # no image twice in a shard
        assert set(shards[0]).isdisjoint(shards[1])
        assert set(shards[0]) | set(shards[1]) == set(range(IMAGES))
        orders.append(shards[0])
    assert orders[0] != orders[1]  # reshuffled between epochs


def test_dali_missing_is_one_clear_config_error(jpeg_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """None in sys.modules makes `import nvidia.dali` fail, as on a machine without the wheel."""
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    with pytest.raises(ConfigError, match="needs NVIDIA DALI.*" + re.escape(install.extra("dali"))):
        dali_loader(jpeg_folder, torch.contiguous_format, rank=0, world_size=1)


@needs_dali
def test_a_run_reads_real_data_through_dali(jpeg_folder: Path, tmp_path: Path) -> None:
    """`dlperf run --data-loader dali` end to end on the CPU: the record names the loader in its group."""
    done = run_dlperf(
        ["run", *TINY, "--data", str(jpeg_folder), "--data-loader", "dali", "--workers", "1", "--out", str(tmp_path)]
    )
    assert done.returncode == 0, done.stderr
    (record_path,) = (tmp_path / "resnet50" / "1n1g").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "ok" and record["group"] == "b4_fp32_realdata-dali"
    assert record["config"]["data_loader"] == "dali" and record["throughput"] > 0
    refused = run_dlperf(["run", *TINY, "--data-loader", "dali", "--out", str(tmp_path / "x")])
    assert refused.returncode == 2 and "give --data PATH" in refused.stderr
