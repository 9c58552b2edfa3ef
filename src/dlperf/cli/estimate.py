"""How long a run will take, said before it starts where that is long: ResNet-50 on CPUs, where the defaults
(224 px, batch 128) mean hours. A rough figure from the work and a generous CPU rate, stated as such."""

from __future__ import annotations

from typing import Any

from dlperf.cli.display import duration
from dlperf.orchestration.sweep_plan import SweepPlan
from dlperf.spec import EXTERNAL, RunSpec
from dlperf.workloads import WorkloadPlan

# ResNet-50 forward: 4.1 G multiply-adds = 8.2 GFLOP per 224 px image; a training step is about 3 forwards.
RESNET50_TRAIN_FLOP_224 = 3 * 8.2e9
# Sustained fp32 training rate of one CPU core in PyTorch or XLA, on the generous side (AVX-512 servers reach it).
CPU_FLOPS_PER_CORE = 50e9
LONG_S = 600.0  # say nothing for runs shorter than this


def run_seconds(spec: RunSpec, plan: WorkloadPlan, env: dict[str, Any]) -> float | None:
    """Rough seconds for one run of a ResNet-50 case on this machine's CPUs; None where no estimate applies (a
    GPU, another model, an external script)."""
    on_cpu = spec.device == "cpu" or (spec.device == "auto" and not env.get("gpus"))
    if not on_cpu or spec.model != "resnet50" or spec.engine == EXTERNAL:  # a script's model is only its label
        return None
    image_size = getattr(spec.workload, "image_size", 224)
    warmup = spec.warmup_iters if isinstance(spec.warmup_iters, int) else spec.max_warmup_iters
    flop = RESNET50_TRAIN_FLOP_224 * (image_size / 224) ** 2 * plan.batch_per_device * spec.devices_per_node
    cores = int(env.get("cpu_cores") or env.get("cpu_threads") or 1)
    return flop * (warmup + spec.iters) / (CPU_FLOPS_PER_CORE * cores)


def estimate_line(spec: RunSpec, plan: WorkloadPlan, seconds: float, env: dict[str, Any]) -> str:
    image_size = getattr(spec.workload, "image_size", 224)
    cores = int(env.get("cpu_cores") or env.get("cpu_threads") or 1)
    return (
        f"estimate: {spec.model} {spec.topology} {plan.group} at {image_size} px takes about {duration(seconds)} "
        f"per run on {cores} CPU cores (at most {CPU_FLOPS_PER_CORE / 1e9:.0f} GFLOP/s per core assumed; it may take "
        "longer); for a quick look use --image-size 32 --batch-size 8 --iters 40"
    )


def single_run_estimate(spec: RunSpec, plan: WorkloadPlan, env: dict[str, Any]) -> str | None:
    seconds = run_seconds(spec, plan, env)
    return estimate_line(spec, plan, seconds, env) if seconds is not None and seconds >= LONG_S else None


def duration_estimates(plan: SweepPlan, env: dict[str, Any]) -> list[str]:
    """One line per long case, then the sweep's total where any case is long."""
    lines, total, known = [], 0.0, False
    for spec, case_plan in plan.cases:
        seconds = run_seconds(spec, case_plan, env)
        if seconds is None:
            continue
        known = True
        total += seconds * plan.repeats
        if seconds >= LONG_S:
            lines.append(estimate_line(spec, case_plan, seconds, env))
    if lines and known:
        lines.append(f"estimate: the whole sweep about {duration(total)} at most {plan.repeats} repeats per case")
    return lines
