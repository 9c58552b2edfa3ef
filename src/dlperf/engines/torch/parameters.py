"""What a model holds on this rank: parameter count and gradient bytes, for the record and `dlperf predict`."""

from __future__ import annotations

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
