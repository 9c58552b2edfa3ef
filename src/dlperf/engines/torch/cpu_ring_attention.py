"""Context parallelism on the CPU: torch's own ring attention (`context_parallel`'s load-balanced rotation and
log-sum-exp merge, forward and backward) run over the CPU attention kernel, which torch registers no handler for.

torch 2.14 routes only the CUDA kernels (flash, memory-efficient, cuDNN) through its ring; the CPU flash kernel
(`aten._scaled_dot_product_flash_attention_for_cpu`) returns the same (output, logsumexp) pair in the same
(batch, heads, sequence) layout, so the ring takes it unchanged. This module adds only what torch lacks for it: the
sequence-sharded strategies and the two handlers, installed while a context-parallel region is open. It reaches
into torch's private ring functions, so a torch without them is refused in one line rather than half-run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cache

import torch

from dlperf.errors import ConfigError

SEQ_DIM = 2  # (batch, heads, sequence, head_dim), as torch's ring assumes
aten = torch.ops.aten
FORWARD = aten._scaled_dot_product_flash_attention_for_cpu.default
BACKWARD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
MISSING = (
    "context parallelism on the CPU needs torch's ring attention internals as torch 2.14 has them "
    "(torch.distributed.tensor.experimental._context_parallel): use --cp 1, a CUDA device, or --engine jax"
)


def _torch_ring():
    """torch's private ring pieces, or one line saying this torch lacks them."""
    try:
        from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
        from torch.distributed.tensor.experimental._context_parallel import _attention
        from torch.distributed.tensor.experimental._context_parallel._sharding_rules import (
            _cp_sharding,
            _single_dim_strategy_context,
        )
    except ImportError:
        raise ConfigError(MISSING) from None
    needed = ("_templated_ring_attention", "_templated_ring_attention_backward")
    if not all(hasattr(_attention, name) for name in needed):
        raise ConfigError(MISSING)
    return _attention, _cp_sharding, _single_dim_strategy_context, RuntimeSchemaInfo


def _ring_calls(ring) -> dict:
    """The kernel's forward and backward, each as torch's ring over the local (sequence-split) shards."""

    def forward(mesh, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
        if attn_mask is not None:
            raise NotImplementedError("ring attention takes is_causal, not an explicit mask")
        return ring._templated_ring_attention(
            mesh.get_group(), SEQ_DIM, aten._scaled_dot_product_flash_attention_for_cpu,
            query=query, key=key, value=value, is_causal=is_causal, dropout_p=dropout_p, scale=scale,
        )  # fmt: skip

    def backward(mesh, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                 scale=None):  # fmt: skip
        return ring._templated_ring_attention_backward(
            mesh.get_group(), SEQ_DIM, BACKWARD, grad_out=grad_out, grad_out_name="grad_out", query=query, key=key,
            value=value, out=out, logsumexp=logsumexp, is_causal=is_causal, dropout_p=dropout_p, scale=scale,
        )  # fmt: skip

    return {FORWARD: forward, BACKWARD: backward}


@cache
def _installation() -> tuple[dict, list, Callable]:
    """Built once: the handler of both ops (as torch's own SDPA handler: unwrap the sequence-split DTensors, run the
    ring on the local shards, wrap), their strategies (every tensor, in and out, split along the sequence: forward
    output, logsumexp, q, k, v; backward grad q/k/v, grad_out, q, k, v, output, logsumexp), and torch's context that
    installs a strategy for a while."""
    from torch.distributed.tensor import DTensor

    ring, cp_sharding, strategy_context, schema_info = _torch_ring()
    calls = _ring_calls(ring)
    dispatcher = DTensor._op_dispatcher

    def handler(op_call, args, kwargs):
        info = dispatcher.unwrap_to_op_info(op_call, args, kwargs)
        dispatcher.sharding_propagator.propagate(info)
        if info.output_sharding is None or info.output_sharding.needs_redistribute:
            raise AssertionError("ring attention's inputs must all be split along the sequence")
        local = calls[op_call](info.compute_mesh, *info.local_args, **info.local_kwargs)
        return dispatcher.wrap(local, info.output_sharding.output_spec)

    strategies = [
        (FORWARD, lambda *_: [[cp_sharding()] * 5], schema_info(3)),
        (BACKWARD, lambda *_: [[cp_sharding()] * 9], None),
    ]
    return dict.fromkeys(calls, handler), strategies, strategy_context


@contextmanager
def cpu_ring_attention() -> Iterator[None]:
    """Open inside torch's `context_parallel` region: the CPU kernel's strategies and handler, for its length."""
    from torch.distributed.tensor import DTensor

    handlers, strategies, strategy_context = _installation()
    dispatcher = DTensor._op_dispatcher
    before = dispatcher._custom_op_handlers
    with ExitStack() as stack:
        for op, strategy, schema in strategies:
            stack.enter_context(strategy_context(op, strategy, schema))
        dispatcher._custom_op_handlers = {**before, **handlers}
        try:
            yield
        finally:
            dispatcher._custom_op_handlers = before
