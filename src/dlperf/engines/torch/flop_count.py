"""FLOPs of one training step of any model, counted by PyTorch's own FlopCounterMode, once per model and shape.

A formula exists for GPT only; for every other workload MFU needs the FLOPs the step actually performs.
`torch.utils.flop_counter.FlopCounterMode` counts the matrix multiplies, convolutions and attention kernels that
dispatch (2 FLOPs per multiply-add, the convention of `dlperf.metrics.peaks`); element-wise ops, normalisation and
the optimizer are not counted, as in the published formulas. The count follows the kernels that really run:
PyTorch's flash-attention backward (CPU and CUDA) recomputes the score matrix, so attention backward counts 2.5x
its forward where the GPT formula assumes 2x. The CPU kernels' formula is dlperf's own (`_cpu_attention_formulas`):
torch's counter has none for them in some releases.

The count runs the step once at the run's shapes: on the run's device, or on the meta device (`torch.device("meta")`
model and inputs), which needs neither memory nor compute; results are cached per
(model class, parameter shapes and dtypes, input shapes and dtypes, loss function), so a sweep counts each
model and shape once. torch is imported inside the functions: importing this module stays torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

_CACHE: dict[tuple, int] = {}


def _signature(model: Any, inputs: Sequence[Any]) -> tuple:
    params = tuple((name, tuple(p.shape), str(p.dtype)) for name, p in model.named_parameters())
    shapes = tuple((tuple(x.shape), str(x.dtype)) if hasattr(x, "shape") else repr(x) for x in inputs)
    return type(model).__module__, type(model).__qualname__, params, shapes


def _attention_flops(query: Any, key: Any, value: Any) -> int:
    """Q·K^T and scores·V of one attention forward, from the three shapes (the counter passes shapes, not
    tensors): 2 FLOPs per multiply-add, causal masking not subtracted, as torch's formula for the CUDA kernels and
    the published formulas count it."""
    batch, heads, s_q, d_qk = query
    s_k, d_v = key[-2], value[-1]
    return 2 * batch * heads * s_q * s_k * (d_qk + d_v)


def _cpu_flash_forward(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    return _attention_flops(query, key, value)


def _cpu_flash_backward(grad_out: Any, query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    """The flash backward recomputes Q·K^T, then four products for dV, dScores, dQ and dK: 2.5x the forward."""
    return _attention_flops(query, key, value) * 5 // 2


def _cpu_attention_formulas() -> dict[Any, Callable[..., int]]:
    """The CPU flash-attention kernels, which torch's FlopCounterMode counts in some releases and not in others
    (2.13 and 2.14 count zero): dlperf states their formula once so a count does not depend on the release."""
    import torch

    aten = torch.ops.aten
    formulas: dict[Any, Callable[..., int]] = {}
    for name, formula in (
        ("_scaled_dot_product_flash_attention_for_cpu", _cpu_flash_forward),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_flash_backward),
    ):
        if hasattr(aten, name):
            formulas[getattr(aten, name)] = formula
    return formulas


def _count(run: Callable[[], None]) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping=_cpu_attention_formulas())
    with counter:
        run()
    return int(counter.get_total_flops())


def forward_flops(model: Any, example_inputs: Sequence[Any]) -> int:
    """FLOPs of one forward pass of `model(*example_inputs)` (no autograd graph kept)."""
    import torch

    key = ("forward", *_signature(model, example_inputs))
    if key not in _CACHE:

        def run() -> None:
            with torch.no_grad():
                model(*example_inputs)

        _CACHE[key] = _count(run)
    return _CACHE[key]


def training_step_flops(model: Any, example_inputs: Sequence[Any], loss_fn: Callable[[Any], Any]) -> int:
    """FLOPs of forward, `loss_fn(output)` and backward of one step; leaves the model's gradients None."""
    loss_name = f"{getattr(loss_fn, '__module__', '')}.{getattr(loss_fn, '__qualname__', repr(loss_fn))}"
    key = ("train", loss_name, *_signature(model, example_inputs))
    if key not in _CACHE:

        def run() -> None:
            loss_fn(model(*example_inputs)).backward()

        try:
            _CACHE[key] = _count(run)
        finally:
            model.zero_grad(set_to_none=True)
    return _CACHE[key]


def clear_cache() -> None:
    _CACHE.clear()
