"""ResNet-50 v1.5 image classification (torchvision's resnet50 is the v1.5 variant): the definition, torch-free.

The steps: `torch_step.py` (torchvision's model; the data in `data.py`) and `jax_step.py` (`jax_model.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dlperf.errors import ConfigError, DataError
from dlperf.metrics.footprint import Footprint, activation_bytes_per_element, state_bytes
from dlperf.spec import RunSpec, flag, setting
from dlperf.workloads.base import CpuEstimate, PlausibleWork, Workload, WorkloadPlan, variant_tag
from dlperf.workloads.resnet.dali_data import require_dali

# torchvision's resnet50 without its 1000-class head (2048 x 1000 weights + 1000 biases): 25,557,032 in all
BACKBONE_PARAMS = 25_557_032 - 2048 * 1000 - 1000
# outputs of every layer for one 224 x 224 image (counted once with forward hooks on torchvision's resnet50):
# what the backward pass keeps, an upper bound since in-place ReLUs share their input's memory
ACTIVATIONS_PER_IMAGE_224 = 32_040_424
# ResNet-50 forward: 4.1 G multiply-adds = 8.2 GFLOP per 224 px image; a training step is about 3 forwards.
TRAIN_FLOP_224 = 3 * 8.2e9

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
DataLoader = Literal["torchvision", "dali"]
OptimizerImpl = Literal["auto", "fused", "foreach", "for-loop"]


@dataclass(frozen=True)
class ResNetConfig:
    """ResNet's own settings; field names are the YAML keys and (with dashes) the flags."""

    batch_size: int = setting(128, "batch size per device", bound="positive")
    image_size: int = setting(224, "image side in pixels", bound="positive")
    num_classes: int = setting(1000, "classifier outputs", bound="positive")
    channels_last: bool = setting(False, "channels-last memory format", engines=("torch",))
    data_loader: DataLoader = setting(
        "torchvision",
        "for --data PATH: torchvision (CPU decoding) or dali (GPU decoding; dlperf's dali extra)",
        engines=("torch",),
    )
    workers: int = setting(4, "DataLoader worker processes for --data PATH", bound="non-negative")
    optimizer_impl: OptimizerImpl = setting(
        "auto", "SGD kernels (auto: torch's choice); fused keeps amp-fp16's inf check on the device", engines=("torch",)
    )
    lr: float | None = setting(
        None, "learning rate (default 0.1 x global batch / 256, the reference scripts' linear rule)", bound="positive"
    )
    momentum: float = setting(0.9, "SGD momentum", bound="non-negative")
    weight_decay: float = setting(1e-4, "SGD weight decay", bound="non-negative")


def check_image_folder(path: str) -> None:
    """Fail before launching when the folder is missing or holds no class sub-folders with images."""
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"data folder {path} does not exist: pass --data synthetic or an ImageNet-style folder")
    classes = [d for d in root.iterdir() if d.is_dir()]
    has_images = any(f.suffix.lower() in IMAGE_SUFFIXES for d in classes for f in d.iterdir() if f.is_file())
    if not classes or not has_images:
        raise DataError(f"data folder {path} has no images in class sub-folders (expected {path}/<class>/<image>.jpg)")


def work_tag(spec: RunSpec) -> str:
    """The work where it differs from the published case (224 x 224, 1000 classes): the record's `work`, which
    reports add to the series key, so runs of other shapes are never one series (file names keep the group)."""
    config: ResNetConfig = spec.workload
    parts = []
    if config.image_size != ResNetConfig.image_size:
        parts.append(f"{config.image_size}px")
    if config.num_classes != ResNetConfig.num_classes:
        parts.append(f"{config.num_classes}cls")
    return "_".join(parts)


def resnet_variant(spec: RunSpec) -> str:
    """The switches that change speed: channels-last, the optimizer's implementation, the data loader."""
    config: ResNetConfig = spec.workload
    optimizer = config.optimizer_impl if config.optimizer_impl != "auto" else ""
    data = "realdata" if config.data_loader == "torchvision" else f"realdata-{config.data_loader}"
    return variant_tag(spec, "channels-last" if config.channels_last else "", optimizer, data=data)


class ResNet50Workload(Workload):
    name = "resnet50"
    config_type = ResNetConfig
    title = "ResNet-50 (--model resnet50)"
    builders = {"torch": "dlperf.workloads.resnet.torch_step:build", "jax": "dlperf.workloads.resnet.jax_step:build"}
    batch_key = "batch_size"
    report_title = "ResNet-50"
    aliases = ("rn50", "resnet50v15", "resnet50v1")
    plausible = PlausibleWork("a ResNet image", ("resnet", "rn50", "rn101"), 1e9)

    def validate(self, spec: RunSpec) -> None:
        config: ResNetConfig = spec.workload
        if config.data_loader == "dali" and spec.data == "synthetic":
            raise ConfigError(
                f"{flag('data_loader')} dali reads a JPEG folder: give {flag('data')} PATH, "
                f"or drop {flag('data_loader')}"
            )
        if spec.data != "synthetic":
            check_image_folder(spec.data)
        if config.data_loader == "dali":
            require_dali()

    def plan(self, spec: RunSpec) -> WorkloadPlan:
        config: ResNetConfig = spec.workload
        group = f"b{config.batch_size}_{resnet_variant(spec)}"
        return WorkloadPlan(
            global_batch=config.batch_size * spec.world_size,
            batch_per_device=config.batch_size,
            group=group,
            stem=f"{self.name}_{group}",
            lr=config.lr if config.lr is not None else 0.1 * config.batch_size * spec.world_size / 256,
            record_fields={"work": work_tag(spec)},
        )

    def cpu_estimate(self, spec: RunSpec) -> CpuEstimate:
        """On CPUs the defaults (224 px, batch 128) mean hours: the FLOPs scale with the image's area."""
        size = spec.workload.image_size
        quick = "--image-size 32 --batch-size 8 --iters 40"
        return CpuEstimate(TRAIN_FLOP_224 * (size / 224) ** 2, f"at {size} px", quick)

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
