"""FP32, or autocast mixed precision with a dynamic loss scale for fp16, behind one interface."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

from dlperf.engines.torch.host import check_precision_on_device

_AUTOCAST_DTYPES = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}


def set_fp32_math(math: str) -> None:
    """fp32 matmuls (cuBLAS) and convolutions (cuDNN) on TF32 tensor cores (`tf32`) or in IEEE FP32 (`ieee`).

    PyTorch's defaults differ (matmuls IEEE, cuDNN convolutions TF32) and JAX runs both on TF32, so each engine sets
    both explicitly. torch >= 2.9 keeps two APIs side by side, the legacy flags and `fp32_precision` per backend
    and operator, and its legacy getters raise ("mix of the legacy and new APIs") where the two disagree; inductor
    reads both: `get_float32_matmul_precision()` (select_algorithm, codecache), `cudnn.allow_tf32` and
    `cudnn.fp32_precision` (its convolution templates), `cuda.matmul.fp32_precision` (everywhere else). Setting
    only the new API left `get_float32_matmul_precision()` raising under `tf32` and `cudnn.allow_tf32` under `ieee`
    (torch 2.14.1). The legacy setters write both APIs' matmul and convolution values, and cuDNN's backend-wide
    value is written through the new API, so that every getter of either reads this one choice. (The legacy matmul
    setter covers oneDNN's CPU matmuls too; only a CUDA run calls this.)"""
    tf32 = math == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    if hasattr(torch.backends.cudnn, "fp32_precision"):
        torch.backends.cudnn.fp32_precision = "tf32" if tf32 else "ieee"


def tf32_state() -> dict[str, bool]:
    """Whether fp32 matmuls and convolutions may run on TF32 now (the legacy flags, which `set_fp32_math` keeps in
    step with the new API)."""
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32), "conv": bool(torch.backends.cudnn.allow_tf32)}


def keeps_inf_check_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """GradScaler hands the inf flag to optimizers that take it (the fused ones) and skips the step on the device;
    for any other it reads the flag on the host (`.item()`, a device sync) every step."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


def zero_momentum_buffers(optimizer: torch.optim.Optimizer) -> None:
    """Fused SGD's momentum buffers, created as zeros before the first step.

    Fused SGD makes its buffers with `empty_like` on its first step and its kernel returns early when the loss
    scaler found an inf, so a skipped first step (fp16's starting scale of 2**16 overflows routinely) leaves them
    uninitialised and the next step reads garbage: ResNet-50 amp-fp16 diverged to NaN on an H100 (torch 2.11).
    Zeros give the same first update as SGD's own `clone(grad)` (no dampening) and survive a skipped step."""
    if not isinstance(optimizer, torch.optim.SGD):
        return
    for group in optimizer.param_groups:
        if group.get("fused") and group["momentum"] != 0 and group["dampening"] == 0:
            for param in group["params"]:
                optimizer.state[param].setdefault("momentum_buffer", torch.zeros_like(param))


class MixedPrecision:
    """Wraps the forward in autocast and the backward/step in a GradScaler where fp16 needs one."""

    def __init__(self, precision: str, device: torch.device) -> None:
        check_precision_on_device(precision, device.type)
        self.device_type = device.type
        self.dtype = _AUTOCAST_DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(device.type) if precision == "amp-fp16" else None
        self.sharded = False

    def shard(self) -> None:
        """The model is split over ranks: one inf/nan verdict for all, so that every rank skips the same steps.
        ShardedGradScaler all-reduces the flag in `unscale_` only; its fused-optimizer path in `step` would keep
        each rank's own flag, so `step` unscales explicitly first."""
        if self.scaler:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            self.scaler = ShardedGradScaler(self.device_type)
            self.sharded = True

    def autocast(self) -> AbstractContextManager:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Optimizer step, skipped by the scaler on inf/nan gradients; gradients are cleared afterwards."""
        if self.scaler:
            if self.sharded:
                self.scaler.unscale_(optimizer)  # all-reduces found_inf over the ranks
                if keeps_inf_check_on_device(optimizer):
                    # ShardedGradScaler's flags have shape (1,); a fused step subtracts the flag from its step
                    # counts of shape (), which fails on (1,): the same flag as a scalar
                    state = self.scaler._per_optimizer_states[id(optimizer)]
                    flags = state["found_inf_per_device"]
                    state["found_inf_per_device"] = {device: flag.reshape(()) for device, flag in flags.items()}
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def loss_value(loss: torch.Tensor | None) -> float | None:
    """This rank's own loss as a float (a device sync), or None where the rank computes none."""
    return None if loss is None else float(loss.float().item())
