"""Counted FLOPs against the published ResNet-50 figure and the GPT formula, with the differences named."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from dlperf.engines.torch import flop_count
from dlperf.metrics.flops import gpt_flops_per_iteration
from dlperf.workloads.gpt.model import GPT, GPTShape


def test_importing_the_module_does_not_import_torch():
    code = "import sys, dlperf.engines.torch.flop_count; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_resnet50_forward_at_224_is_the_published_figure_and_cached():
    """He et al. (2016), table 1: ResNet-50 has 3.8 x 10^9 FLOPs (multiply-adds); torchvision lists 4.09 GMACs,
    widely quoted as 4.1 G multiply-adds = 8.2 GFLOPs per 224x224 image."""
    from torchvision.models import resnet50

    flop_count.clear_cache()
    with torch.device("meta"):  # counting needs shapes, not numbers: no memory, no compute
        model = resnet50(weights=None).eval()
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    image = torch.empty(1, 3, 224, 224, device="meta")
    flops = flop_count.forward_flops(model, (image,))
    assert flops == pytest.approx(8.2e9, rel=0.03)
    assert (
        flop_count.forward_flops(model, (torch.empty(1, 3, 224, 224, device="meta"),)) == flops and len(calls) == 1
    )  # cached


def test_gpt_training_step_matches_the_formula_within_5_percent():
    """Counted vs 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)). Differences: (1) the flash-attention backward recomputes
    Q·K^T, so attention counts 1 + 2.5 = 3.5x its forward 4·B·s²·h per layer where the formula has 3x: +2·B·s²·h·l;
    (2) nothing else: the formula and the counter both skip embeddings, LayerNorm, GELU, softmax and the loss."""
    batch, shape = 2, GPTShape(num_layers=2, hidden_size=64, num_heads=4, seq_length=32, vocab_size=512)
    torch.manual_seed(0)
    model = GPT(shape)
    tokens = torch.randint(0, shape.vocab_size, (batch, shape.seq_length))
    targets = torch.randint(0, shape.vocab_size, (batch, shape.seq_length))

    def loss_fn(logits: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    counted = flop_count.training_step_flops(model, (tokens,), loss_fn)
    formula = gpt_flops_per_iteration(batch, shape.seq_length, shape.num_layers, shape.hidden_size, shape.vocab_size)
    assert counted == pytest.approx(formula, rel=0.05)
    s, h, layers = shape.seq_length, shape.hidden_size, shape.num_layers
    assert counted - formula == 2 * batch * s**2 * h * layers  # exactly the recompute of difference (1)
    assert all(p.grad is None for p in model.parameters())
