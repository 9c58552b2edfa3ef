"""Pipeline parallelism through torch.distributed.pipelining for any workload whose stages are modules: which
stages a rank holds under each schedule, which layers a stage holds, and one global batch run through them.

Schedules by name: one stage per rank, `gpipe` (all forwards, then all backwards) and `1f1b`; several per rank,
`interleaved-1f1b` and `interleaved-zb` (zero bubble: input and weight gradients apart) with stages looped over the
ranks (rank r holds r, r + pp, ...), and `zbv` (zero bubble, V-shaped: rank r holds r and 2·pp - 1 - r).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

SCHEDULES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved-1f1b": "ScheduleInterleaved1F1B",
    "interleaved-zb": "ScheduleInterleavedZeroBubble",
    "zbv": "ScheduleZBVZeroBubble",
}
SINGLE_STAGE = ("gpipe", "1f1b")


def stage_layers(num_layers: int, stages: int, stage: int) -> range:
    """Contiguous blocks of layers; the first `num_layers % stages` stages take one more."""
    base, extra = divmod(num_layers, stages)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (stage < extra))


def stage_ids(schedule: str, pp_rank: int, pp: int, stages_per_rank: int) -> list[int]:
    """The stages rank `pp_rank` of the pipeline holds, in the order its schedule takes them."""
    if schedule == "zbv":
        return [pp_rank, 2 * pp - 1 - pp_rank]
    return [pp_rank + i * pp for i in range(stages_per_rank)]


class Pipeline:
    """This rank's stages under one schedule; calling it runs one global batch (`micro_batches` of it) forward and
    backward, and returns the mean loss over the micro-batches on the rank holding the last stage, else None.
    Gradients are scaled by 1/micro_batches (the schedule's `scale_grads`), as gradient accumulation does."""

    def __init__(
        self,
        modules: Sequence[nn.Module],
        ids: Sequence[int],
        num_stages: int,
        schedule: str,
        micro_batches: int,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        device: torch.device,
        group,
        scale: Callable[[torch.Tensor], torch.Tensor] | None = None,
        context: Callable[[], AbstractContextManager] = nullcontext,
    ) -> None:
        from torch.distributed import pipelining

        stages = [pipelining.PipelineStage(m, i, num_stages, device, group=group) for m, i in zip(modules, ids)]
        self.losses: list[torch.Tensor] = []

        def stage_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            loss = loss_fn(output, target)
            self.losses.append(loss.detach())
            return scale(loss) if scale else loss

        kind = getattr(pipelining, SCHEDULES[schedule])
        self.schedule = kind(stages[0] if schedule in SINGLE_STAGE else stages, micro_batches, loss_fn=stage_loss)
        self.micro_batches = micro_batches
        self.first, self.last = 0 in ids, num_stages - 1 in ids
        self.context = context
        # the last stage would otherwise keep every micro-batch's output until the step ends, to merge them
        keeps = "return_outputs" in inspect.signature(self.schedule.step).parameters
        self.keep_outputs = {"return_outputs": False} if keeps else {}

    def __call__(self, inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor | None:
        self.losses.clear()
        args = (inputs,) if self.first else ()
        target = {"target": labels, **self.keep_outputs} if self.last else {}
        with self.context():
            self.schedule.step(*args, **target)
        # the schedule's first step may also run the loss for shape inference: keep this batch's own
        return torch.stack(self.losses[-self.micro_batches :]).mean() if self.last else None
