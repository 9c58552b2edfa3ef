"""What a model holds on this rank (parameter count and gradient bytes, for the record and `dlperf predict`), how
its parameters are grouped for the optimizer, and when data parallelism reduces their gradients."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from torch import nn


def parameter_facts(model: nn.Module) -> dict[str, int]:
    """Trainable parameters held by this rank (a DTensor's local shard under TP) and the bytes of their gradients,
    which is what data parallelism all-reduces each step (gradients take their parameter's dtype)."""
    parameters = gradient_bytes = 0
    for parameter in model.parameters():
        if not parameter.requires_grad:
            continue
        local = parameter.to_local() if hasattr(parameter, "to_local") else parameter
        parameters += local.numel()
        gradient_bytes += local.numel() * local.element_size()
    return {"parameters": parameters, "gradient_bytes": gradient_bytes}


def param_groups(model: nn.Module) -> list[dict]:
    """The trainable parameters in groups that one foreach/fused optimizer kernel can take: tensor parallelism's
    DTensors apart from plain tensors (the optimizer runs its kernel per group, and DTensor does not mix with
    plain tensors in one kernel)."""
    from torch.distributed.tensor import DTensor

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    return [{"params": group} for group in groups if group]


def grad_sync(model: nn.Module, enabled: bool) -> AbstractContextManager:
    """Skip the data-parallel gradient reduction on all but the last accumulation micro-batch."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return nullcontext() if enabled else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2, sharding or replicating
        model.set_requires_gradient_sync(enabled)
    return nullcontext()
