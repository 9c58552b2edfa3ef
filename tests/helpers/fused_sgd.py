"""A loss-scaler-skipped first step under fused SGD, then a finite one, against foreach SGD's single step: shared
by the CPU unit test and the CUDA test (where ResNet-50 amp-fp16 diverged on an H100 before the buffers were
zeroed)."""

from __future__ import annotations

import torch
from torch import nn

from dlperf.engines.torch.precision import zero_momentum_buffers


def check_skipped_step_then_finite(device: str) -> None:
    torch.manual_seed(0)
    start = [torch.randn(64, 32, device=device), torch.randn(32, device=device)]
    grads = [torch.randn_like(t) for t in start]
    hyper = {"lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4}

    params = [nn.Parameter(t.clone()) for t in start]
    fused = torch.optim.SGD(params, **hyper, fused=True)
    zero_momentum_buffers(fused)
    scaler = torch.amp.GradScaler(device)
    for overflow in (True, False):
        loss = sum((p * g).sum() for p, g in zip(params, grads))
        if overflow:  # fp16's routine first-step overflow: an inf gradient, so the scaler skips this step
            loss = loss + (params[0] * torch.full_like(params[0], float("inf"))).sum()
        scaler.scale(loss).backward()
        scaler.step(fused)
        scaler.update()
        fused.zero_grad(set_to_none=True)
        if overflow:
            assert all(torch.equal(p, t) for p, t in zip(params, start)), "a skipped step moved the parameters"
            buffers = [fused.state[p]["momentum_buffer"] for p in params]
            assert all(torch.count_nonzero(b) == 0 for b in buffers), "a skipped step wrote the momentum buffers"

    reference = [nn.Parameter(t.clone()) for t in start]
    plain = torch.optim.SGD(reference, **hyper, foreach=True)
    for p, g in zip(reference, grads):
        p.grad = g.clone()
    plain.step()
    for got, want in zip(params, reference):
        torch.testing.assert_close(got, want)
