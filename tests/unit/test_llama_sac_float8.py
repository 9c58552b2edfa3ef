"""Llama's selective checkpointing keeps float8 matmuls, on the CPU (torch._scaled_mm and torchao run here): a
float8 matmul the policy sees as `_scaled_mm` runs once per step, not again in backward, and torchao's Float8Linear,
which the policy sees as `mm` on its float8 tensor subclass, has its output kept."""

from __future__ import annotations

from functools import partial

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from dlperf.workloads.llama.parallel import _selective_policy


class _Executions(TorchDispatchMode):
    """Counts the ops that really execute: below the checkpoint's own mode, so a kept output served from its cache
    in backward is not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.scaled_mm = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.scaled_mm += func is torch.ops.aten._scaled_mm.default
        return func(*args, **(kwargs or {}))


class _Float8Matmul(torch.autograd.Function):
    """A float8 matmul called directly (tensor-wise scales of 1), its gradient in high precision."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        one = torch.ones((), dtype=torch.float32)
        fp8 = torch.float8_e4m3fn
        return torch._scaled_mm(x.to(fp8), w.to(fp8).t(), one, one, out_dtype=torch.bfloat16)

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad = grad.float()
        return grad @ w, grad.t() @ x


def _selective(fn, *inputs):
    return checkpoint(fn, *inputs, use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts,
                                                                           _selective_policy))  # fmt: skip


def test_a_float8_matmul_runs_once_per_step_under_selective_checkpointing():
    x, w = torch.randn(32, 64, requires_grad=True), torch.randn(16, 64, requires_grad=True)

    def block(x, w):  # sin needs its input in backward: the region is recomputed, the matmul's output kept
        return _Float8Matmul.apply(torch.relu(x), w).float().sin()

    with _Executions() as executions:
        _selective(block, x, w).sum().backward()
    assert executions.scaled_mm == 1  # 2 without _scaled_mm in the keep-list: recomputed in backward
    assert x.grad is not None and w.grad is not None


def test_torchaos_float8_linear_reaches_the_policy_as_a_kept_mm():
    from torchao.float8 import convert_to_float8_training

    decisions = []

    def recording(ctx, op, *args, **kwargs):
        decision = _selective_policy(ctx, op, *args, **kwargs)
        decisions.append((op, decision))
        return decision

    model = torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False))
    convert_to_float8_training(model)
    x = torch.randn(32, 64, requires_grad=True)
    checkpoint(model, x, use_reentrant=False,
               context_fn=partial(create_selective_checkpoint_contexts, recording)).sum().backward()  # fmt: skip
    kept = {op for op, decision in decisions if decision == CheckpointPolicy.MUST_SAVE}
    assert torch.ops.aten.mm.default in kept  # the float8 matmul, on torchao's float8 tensors
    assert torch.ops.aten.max.default in kept  # the amax its scale comes from
