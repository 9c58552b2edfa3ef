"""The plausibility table: the highest speed a run of a workload can print per device (screening refuses above)."""

from __future__ import annotations

from dlperf.framework_logs.base import LogFormat, RunShape
from dlperf.wording import count as counted
from dlperf.workloads import plausible_work
from dlperf.workloads.base import PlausibleWork

# A plausible speed's upper bound, per device. Where the workload's training FLOPs per sample are known (a low
# estimate, so the bound stays loose), no device can beat its peak: the fastest training device's dense FP8 peak is
# about 4.5e15 FLOP/s (B200), so 1e16 FLOP/s per device over the FLOPs per sample is a physical limit. Otherwise the
# fastest real figure among the framework logs bounds it: HugeCTR DLRM at 1.0e7 records/s on ONE GPU
# (tests/unit/test_logs_real.py), so 1e8 samples per second per device is not a training speed; token rates get 100x.
MAX_SAMPLES_PER_S_PER_DEVICE = 1e8
MAX_TOKENS_PER_S_PER_DEVICE = 1e10
MAX_FLOPS_PER_DEVICE = 1e16
# (workload class, name fragments, training FLOPs per sample, low estimates: 3 x forward at the smallest usual input):
# the workloads dlperf runs declare theirs (`Workload.plausible`); these are the ones only other frameworks' logs
# hold. Detection comes before ResNet so that `ssd_resnet34` keeps its detection bound.
FOREIGN_FLOPS_PER_SAMPLE = (
    PlausibleWork("a BERT-large sequence", ("bert-large", "bert_large", "bert"), 1e11),
    PlausibleWork("a Stable Diffusion image", ("stable-diffusion", "stable_diffusion", "sdxl"), 1e11),
    PlausibleWork("a 3D U-Net volume", ("unet3d",), 1e11),
    PlausibleWork("a detection image (SSD/RetinaNet/Mask R-CNN)", ("retinanet", "ssd", "maskrcnn", "mask-rcnn"), 1e10),
)


def workload_class(fmt: LogFormat, shape: RunShape) -> tuple[str, float] | None:
    """The workload's class and its FLOPs per sample where the model's name says (not for token rates)."""
    if fmt.unit == "tokens/s" or not shape.workload:
        return None
    name = shape.workload.lower()
    works = (*FOREIGN_FLOPS_PER_SAMPLE, *plausible_work())
    return next(((what, flops) for what, parts, flops in works if any(p in name for p in parts)), None)


def speed_bound(fmt: LogFormat, shape: RunShape) -> float:
    """The highest global speed (in the format's unit) a run of this shape and workload can plausibly print."""
    known = workload_class(fmt, shape)
    if known is not None:
        return MAX_FLOPS_PER_DEVICE / known[1] * shape.world_size
    per_device = MAX_TOKENS_PER_S_PER_DEVICE if fmt.unit == "tokens/s" else MAX_SAMPLES_PER_S_PER_DEVICE
    return per_device * shape.world_size


def above_bound(fmt: LogFormat, shape: RunShape) -> str:
    per_device = speed_bound(fmt, shape) / shape.world_size
    known = workload_class(fmt, shape)
    why = f" (1e16 FLOP/s per device over >= {known[1]:g} FLOPs for {known[0]})" if known else ""
    return f"above the plausible {per_device:g} {fmt.unit} per device{why} x {counted(shape.world_size, 'device')}"
