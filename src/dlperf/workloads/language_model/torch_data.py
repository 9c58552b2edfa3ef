"""What the language models' PyTorch steps (GPT, Llama, the MoE) share: training batches, a fixed random batch or
contiguous windows of a flat token file (format: tokens.py), each data-parallel replica its rows; their next-token
loss, accumulated over micro-batches and read as the global batch's mean; blocks compiled one by one."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from dlperf.engines.torch.parameters import grad_sync
from dlperf.engines.torch.precision import MixedPrecision
from dlperf.spec import CUDA_GRAPH_MODES, RunSpec
from dlperf.workloads.base import WorkloadPlan
from dlperf.workloads.language_model.tokens import open_token_file

Batches = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The next-token loss in fp32 over every position of the batch."""
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def synthetic_batches(
    global_batch: int, seq_length: int, vocab_size: int, seed: int, rows: slice, device: torch.device
) -> Batches:
    """One random global batch drawn from `seed` (identical for every layout), this rank's rows kept on device."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab_size, (global_batch, seq_length + 1), generator=generator)[rows].to(device)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    return lambda iteration: (inputs, labels)


def file_batches(
    path: str, global_batch: int, seq_length: int, vocab_size: int, rows: slice, device: torch.device
) -> Batches:
    """Iteration k's rows of contiguous seq+1 windows, copied to the device."""
    tokens = open_token_file(path, vocab_size, seq_length)
    window = seq_length + 1
    windows = len(tokens) // window
    pin = device.type == "cuda"

    def batch(iteration: int) -> tuple[torch.Tensor, torch.Tensor]:
        first = iteration * global_batch
        samples = [(first + i) % windows for i in range(global_batch)[rows]]
        host = torch.from_numpy(np.stack([tokens[s * window : (s + 1) * window] for s in samples]).astype(np.int64))
        if pin:
            host = host.pin_memory()
        data = host.to(device, non_blocking=pin)
        return data[:, :-1], data[:, 1:]

    return batch


def replica_batches(spec: RunSpec, plan: WorkloadPlan, dp_rank: int, device: torch.device) -> Batches:
    """This data-parallel replica's rows of each global batch, synthetic or read from the token file."""
    config = spec.workload
    rows = slice(dp_rank * plan.batch_per_device, (dp_rank + 1) * plan.batch_per_device)
    if spec.data == "synthetic":
        return synthetic_batches(plan.global_batch, config.seq_length, config.vocab_size, spec.seed, rows, device)
    return file_batches(spec.data, plan.global_batch, config.seq_length, config.vocab_size, rows, device)


def owned(batch: tuple[torch.Tensor, ...], copy: bool) -> tuple[torch.Tensor, ...]:
    """Context parallelism splits the batch in place: it gets copies, so the fixed synthetic batch stays whole."""
    return tuple(t.clone() for t in batch) if copy else batch


def accumulated(model: nn.Module, steps: int, amp: MixedPrecision, device: torch.device, cp=None,
                after_backward: Callable[[], None] | None = None):  # fmt: skip
    """One global batch as `steps` micro-batches, gradients reduced over the data-parallel ranks on the last; each
    under context parallelism (`cp(inputs, labels)`, a context) where planned."""

    def run(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = torch.zeros((), device=device)
        for i, micro in enumerate(zip(inputs.chunk(steps), labels.chunk(steps))):
            x, y = owned(micro, cp is not None)
            with grad_sync(model, i == steps - 1), cp(x, y) if cp else nullcontext():
                with amp.autocast():
                    micro_loss = cross_entropy(model(x), y) / steps
                amp.backward(micro_loss)
            if after_backward:
                after_backward()
            loss += micro_loss.detach()
        return loss

    return run


def training_step(spec: RunSpec, device: torch.device, batches: Batches, run_batch: Callable, amp: MixedPrecision,
                  optimizer: torch.optim.Optimizer, before_step: Callable[[], None] | None = None,
                  after_step: Callable[[], None] | None = None) -> Callable[[], torch.Tensor | None]:  # fmt: skip
    """One iteration: global batch k through `run_batch` (its loss, not waited for), then the optimizer step with
    `before_step` (GPT's tied embedding) and `after_step` (the MoE's expert bias, float8's scales) around it."""
    graphs = spec.compile and spec.compile_mode in CUDA_GRAPH_MODES and device.type == "cuda"
    iteration = 0

    def step() -> torch.Tensor | None:
        nonlocal iteration
        if graphs:  # a new iteration: the CUDA graphs of the blocks may reuse the previous one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        loss = run_batch(*batches(iteration))
        iteration += 1
        if before_step:
            before_step()
        amp.step(optimizer)
        if after_step:
            after_step()
        return loss

    return step


def global_loss(holds_loss: bool, replicas: int, device: torch.device) -> Callable[[torch.Tensor | None], float]:
    """The global batch's mean loss: one all-reduce at window edges, where each replica of the last stage's loss
    (one tp rank each: data- and context-parallel ranks) contributes its share and every other rank zero."""

    def read_loss(loss: torch.Tensor | None) -> float:
        share = torch.zeros((), device=device)
        if loss is not None and holds_loss:
            share += loss.float() / replicas
        dist.all_reduce(share)
        return float(share.item())

    return read_loss


def compile_blocks(model: nn.Module, spec: RunSpec) -> None:
    """Each block compiled on its own, where asked (`--compile`)."""
    if spec.compile:
        for block in model.layers.values():
            block.compile(mode=None if spec.compile_mode == "default" else spec.compile_mode)
