"""FP32, or autocast mixed precision with a dynamic loss scale for fp16, behind one interface."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

from dlperf.errors import ConfigError

_AUTOCAST_DTYPES = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}


def check_precision_on_device(precision: str, device_type: str) -> None:
    """fp16 autocast with a loss scaler is a CUDA path; refuse it up front elsewhere."""
    if precision == "amp-fp16" and device_type != "cuda":
        raise ConfigError("amp-fp16 needs a CUDA device: use --precision amp-bf16 or fp32 on the CPU")


class MixedPrecision:
    """Wraps the forward in autocast and the backward/step in a GradScaler where fp16 needs one."""

    def __init__(self, precision: str, device: torch.device) -> None:
        check_precision_on_device(precision, device.type)
        self.device_type = device.type
        self.dtype = _AUTOCAST_DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(device.type) if precision == "amp-fp16" else None

    def autocast(self) -> AbstractContextManager:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """Optimizer step, skipped by the scaler on inf/nan gradients; gradients are cleared afterwards."""
        if self.scaler:
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def loss_value(loss: torch.Tensor | None) -> float | None:
    """This rank's own loss as a float (a device sync), or None where the rank computes none."""
    return None if loss is None else float(loss.float().item())
