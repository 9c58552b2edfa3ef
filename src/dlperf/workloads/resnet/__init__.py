"""ResNet-50 v1.5 image classification (torchvision's resnet50 is the v1.5 variant): the definition, torch-free.

The torch step lives in `torch_step.py`; the data in `data.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import ConfigError, DataError
from dlperf.metrics.footprint import Footprint, activation_bytes_per_element, state_bytes
from dlperf.spec import RunSpec, choose, require_non_negative_number, require_positive_int, require_positive_number
from dlperf.workloads.base import Workload, WorkloadPlan
from dlperf.workloads.resnet.dali_data import require_dali

# torchvision's resnet50 without its 1000-class head (2048 x 1000 weights + 1000 biases): 25,557,032 in all
BACKBONE_PARAMS = 25_557_032 - 2048 * 1000 - 1000
# outputs of every layer for one 224 x 224 image (counted once with forward hooks on torchvision's resnet50):
# what the backward pass keeps, an upper bound since in-place ReLUs share their input's memory
ACTIVATIONS_PER_IMAGE_224 = 32_040_424

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
DATA_LOADERS = ("torchvision", "dali")
OPTIMIZER_IMPLS = ("auto", "fused", "foreach", "for-loop")


@dataclass(frozen=True)
class ResNetConfig:
    """ResNet's own settings; field names are the YAML keys and (with dashes) the flags."""

    batch_size: int = 128  # per device
    image_size: int = 224
    num_classes: int = 1000
    channels_last: bool = False
    data_loader: str = "torchvision"  # or "dali": JPEGs decoded on the GPU (dali_data.py)
    workers: int = 4  # loader worker threads/processes for --data PATH
    optimizer_impl: str = "auto"  # SGD's kernels: torch's own choice, or fused, foreach, for-loop
    lr: float | None = None  # None: 0.1 x global batch / 256, the linear scaling rule of the reference scripts
    momentum: float = 0.9
    weight_decay: float = 1e-4


def check_image_folder(path: str) -> None:
    """Fail before launching when the folder is missing or holds no class sub-folders with images."""
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"data folder {path} does not exist: pass --data synthetic or an ImageNet-style folder")
    classes = [d for d in root.iterdir() if d.is_dir()]
    has_images = any(f.suffix.lower() in IMAGE_SUFFIXES for d in classes for f in d.iterdir() if f.is_file())
    if not classes or not has_images:
        raise DataError(f"data folder {path} has no images in class sub-folders (expected {path}/<class>/<image>.jpg)")


def variant_tag(spec: RunSpec) -> str:
    """Precision plus every switch that changes speed, so no two variants share a file name."""
    config: ResNetConfig = spec.workload
    parts = [spec.precision]
    if spec.compile:
        parts.append("compile" if spec.compile_mode == "default" else f"compile-{spec.compile_mode}")
    if config.channels_last:
        parts.append("channels-last")
    if config.optimizer_impl != "auto":
        parts.append(config.optimizer_impl)
    if spec.data != "synthetic":
        parts.append("realdata" if config.data_loader == "torchvision" else f"realdata-{config.data_loader}")
    if spec.engine != "torch":
        parts.append(spec.engine)
    return "_".join(parts)


class ResNet50Workload(Workload):
    name = "resnet50"
    config_type = ResNetConfig
    builders = {"torch": "dlperf.workloads.resnet.torch_step:build", "jax": "dlperf.workloads.jax_step:build"}

    def validate(self, spec: RunSpec) -> None:
        config: ResNetConfig = spec.workload
        for name in ("batch_size", "image_size", "num_classes"):
            require_positive_int(name, getattr(config, name))
        if not isinstance(config.workers, int) or isinstance(config.workers, bool) or config.workers < 0:
            raise ConfigError(f"--workers must be a non-negative integer, got {config.workers!r}")
        if config.lr is not None:
            require_positive_number("lr", config.lr)
        require_non_negative_number("momentum", config.momentum)
        require_non_negative_number("weight_decay", config.weight_decay)
        choose("data_loader", config.data_loader, DATA_LOADERS)
        choose("optimizer_impl", config.optimizer_impl, OPTIMIZER_IMPLS)
        if config.data_loader == "dali" and spec.data == "synthetic":
            raise ConfigError("--data-loader dali reads a JPEG folder: give --data PATH, or drop --data-loader")
        if spec.data != "synthetic":
            check_image_folder(spec.data)
        if config.data_loader == "dali":
            require_dali()

    def plan(self, spec: RunSpec) -> WorkloadPlan:
        config: ResNetConfig = spec.workload
        group = f"b{config.batch_size}_{variant_tag(spec)}"
        return WorkloadPlan(
            global_batch=config.batch_size * spec.world_size,
            batch_per_device=config.batch_size,
            group=group,
            stem=f"{self.name}_{group}",
        )

    def footprint(self, spec: RunSpec, plan: WorkloadPlan) -> Footprint:
        config: ResNetConfig = spec.workload
        params = BACKBONE_PARAMS + 2049 * config.num_classes
        elements = ACTIVATIONS_PER_IMAGE_224 * (config.image_size / 224) ** 2 * plan.batch_per_device
        return Footprint(
            params_total=params,
            params_per_rank=params,
            state_bytes=state_bytes(params, "sgd-momentum", spec.precision),
            activation_bytes=int(elements * activation_bytes_per_element(spec.precision)),
        )
