"""GPT pre-training under any dp x tp x pp layout: one training iteration is one global batch."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from dlperf.config import RunConfig
from dlperf.engine.precision import MixedPrecision
from dlperf.errors import ConfigError
from dlperf.metrics import flops
from dlperf.workloads.base import DistContext, TrainStep, Workload
from dlperf.workloads.gpt import cases, parallel
from dlperf.workloads.gpt.data import file_batches, open_token_file, synthetic_batches
from dlperf.workloads.gpt.model import GPT, GPTShape, padded_vocab

DEFAULT_LR = 1.5e-4  # Megatron's GPT-2 345M recipe


def variant_tag(config: RunConfig, layout: parallel.Layout) -> str:
    """Precision plus every switch that changes speed but not the layout name."""
    parts = [config.precision]
    if config.compile:
        parts.append("compile")
    if layout.pp > 1:
        parts.append(layout.pp_schedule)
    if layout.dp > 1 and layout.dp_mode != "ddp":
        parts.append(layout.dp_mode)
    if config.data != "synthetic":
        parts.append("realdata")
    return "_".join(parts)


def model_shape(config: RunConfig, tp: int) -> GPTShape:
    return GPTShape(
        config.num_layers, config.hidden_size, config.num_heads, config.seq_length, padded_vocab(config.vocab_size, tp)
    )


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


class GPTWorkload(Workload):
    name = "gpt"

    def validate(self, config: RunConfig) -> None:
        parallel.layout_of(config)
        if config.data != "synthetic":
            open_token_file(config.data, config.vocab_size, config.seq_length)
        if config.peak_tflops is not None and not config.peak_tflops > 0:
            raise ConfigError(f"--peak-tflops must be positive, got {config.peak_tflops!r}")

    def global_batch(self, config: RunConfig) -> int:
        return parallel.layout_of(config).global_batch_size

    def group(self, config: RunConfig) -> str:
        layout = parallel.layout_of(config)
        return f"{cases.short_name(config, layout.dp, layout.global_batch_size)}_{variant_tag(config, layout)}"

    def run_stem(self, config: RunConfig) -> str:
        """The report's log name, prefixed by the table group (DP_8x1x1 and 2D_8x1x1 are the same layout)."""
        layout = parallel.layout_of(config)
        name = cases.log_name(config, layout.dp, layout.global_batch_size)
        return f"{cases.report_group(config)}_{name}_{variant_tag(config, layout)}"

    def build(self, config: RunConfig, ctx: DistContext) -> TrainStep:
        layout = parallel.layout_of(config)
        dp_rank, stage, tp_rank = layout.coordinates(ctx.rank)
        torch.manual_seed(config.seed)  # every layout starts from the same full model
        with torch.device(ctx.device):
            model = GPT(model_shape(config, layout.tp))
        mesh = parallel.build_mesh(layout, ctx.device) if ctx.distributed else None
        if layout.pp > 1:
            parallel.keep_stage(model, stage, layout.pp)
        if layout.tp > 1:
            parallel.apply_tp(model, mesh["tp"])
        if config.compile:
            for block in model.layers.values():
                block.compile()
        tie_sync = parallel.TiedEmbeddingSync(layout, ctx.rank, model) if layout.pp > 1 else None
        wrapped: nn.Module = model
        if layout.dp > 1:
            wrapped = parallel.apply_dp(model, mesh, layout.dp_mode, ctx.device, layout.tp, layout.pp > 1)
        optimizer = torch.optim.AdamW(
            wrapped.parameters(),
            lr=config.lr if config.lr is not None else DEFAULT_LR,
            betas=(0.9, 0.95),
            weight_decay=config.weight_decay,
            # one fused kernel on CUDA; DTensor and plain parameters do not mix in one foreach/fused kernel
            fused=ctx.device.type == "cuda" and layout.tp == 1,
            foreach=False if layout.tp > 1 else None,
        )
        amp = MixedPrecision(config.precision, ctx.device)
        if amp.scaler and (layout.tp > 1 or layout.pp > 1 or layout.dp_mode == "fsdp"):
            # the model is split over ranks: one inf/nan verdict for all, so every rank skips the same steps
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            amp.scaler = ShardedGradScaler(ctx.device.type)
        rows = slice(
            dp_rank * layout.global_batch_size // layout.dp, (dp_rank + 1) * layout.global_batch_size // layout.dp
        )
        if config.data == "synthetic":
            batches = synthetic_batches(
                layout.global_batch_size, config.seq_length, config.vocab_size, config.seed, rows, ctx.device
            )
        else:
            batches = file_batches(
                config.data, layout.global_batch_size, config.seq_length, config.vocab_size, rows, ctx.device
            )
        iteration = 0
        steps = layout.accumulation_steps
        wrapped.train()

        if layout.pp > 1:
            run_pipeline = _pipeline(wrapped, layout, stage, ctx, mesh, amp)

        def step() -> torch.Tensor | None:
            nonlocal iteration
            inputs, labels = batches(iteration)
            iteration += 1
            if layout.pp > 1:
                loss = run_pipeline(inputs, labels)
                tie_sync()
            else:
                loss = torch.zeros((), device=ctx.device)
                for x, y, last in _micro_batches(inputs, labels, steps):
                    with parallel.grad_sync(wrapped, last):
                        with amp.autocast():
                            micro_loss = cross_entropy(wrapped(x), y) / steps
                        amp.backward(micro_loss)
                    loss += micro_loss.detach()
            amp.step(optimizer)
            return loss

        return step

    def read_loss(self, config: RunConfig, ctx: DistContext, loss: torch.Tensor | None) -> float | None:
        """The global batch's mean loss: one all-reduce at window edges, where the last stage's dp replicas
        (one tp rank each) contribute their share and every other rank zero."""
        if not ctx.distributed:
            return super().read_loss(config, ctx, loss)
        layout = parallel.layout_of(config)
        _, stage, tp_rank = layout.coordinates(ctx.rank)
        share = torch.zeros((), device=ctx.device)
        if loss is not None and stage == layout.pp - 1 and tp_rank == 0:
            share += loss.float() / layout.dp
        dist.all_reduce(share)
        return float(share.item())

    def derived_metrics(self, config: RunConfig, measured: dict[str, Any]) -> dict[str, Any]:
        layout = parallel.layout_of(config)
        vocab = padded_vocab(config.vocab_size, layout.tp)
        flops_per_iteration = flops.gpt_flops_per_iteration(
            layout.global_batch_size, config.seq_length, config.num_layers, config.hidden_size, vocab
        )
        throughput = measured["throughput"]
        seconds_per_iteration = layout.global_batch_size / throughput
        achieved = flops.tflops_per_device(flops_per_iteration, seconds_per_iteration, config.world_size)
        device = (measured.get("ranks") or [{}])[0].get("device", "cpu")
        mfu, note = flops.mfu(achieved, device, config.precision, config.peak_tflops)
        return {
            "report_case": cases.short_name(config, layout.dp, layout.global_batch_size),
            "report_group": cases.report_group(config),
            "parallel": layout.as_record(),
            "flops_per_iteration": flops_per_iteration,
            "tokens_per_s": throughput * config.seq_length,
            "tokens_per_s_per_device": throughput * config.seq_length / config.world_size,
            "tflops_per_device": achieved,
            "mfu": mfu,
            "mfu_note": note,
        }


def _micro_batches(inputs: torch.Tensor, labels: torch.Tensor, steps: int):
    """(inputs, labels, is_last) per accumulation micro-batch of this replica's rows."""
    for i, (x, y) in enumerate(zip(inputs.chunk(steps), labels.chunk(steps))):
        yield x, y, i == steps - 1


def _pipeline(module: nn.Module, layout: parallel.Layout, stage: int, ctx: DistContext, mesh, amp: MixedPrecision):
    """This rank's pipeline stage and schedule; returns a function running one global batch through it."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    pipe_stage = PipelineStage(module, stage, layout.pp, ctx.device, group=mesh["pp"].get_group())
    losses: list[torch.Tensor] = []

    def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = cross_entropy(logits, labels)
        losses.append(loss.detach())
        return amp.scaler.scale(loss) if amp.scaler else loss

    schedule_type = ScheduleGPipe if layout.pp_schedule == "gpipe" else Schedule1F1B
    schedule = schedule_type(pipe_stage, n_microbatches=layout.accumulation_steps, loss_fn=loss_fn)
    first, last = stage == 0, stage == layout.pp - 1

    def run(inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        losses.clear()
        with amp.autocast():
            if first:
                schedule.step(inputs)
            elif last:
                schedule.step(target=labels)
            else:
                schedule.step()
        # the schedule's first step may also run the loss for shape inference: keep this batch's own
        return torch.stack(losses[-layout.accumulation_steps :]).mean() if last else None

    return run
