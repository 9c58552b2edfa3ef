"""How long a run will take, said before it starts where that is long: a workload that declares its work per
sample on CPUs (`Workload.cpu_estimate`: ResNet-50, whose defaults mean hours there). A rough figure from the work
and a generous CPU rate, stated as such."""

from __future__ import annotations

from typing import Any

from dlperf.cli.display import duration
from dlperf.orchestration import SweepPlan, kind_of
from dlperf.spec import RunSpec
from dlperf.workloads import CpuEstimate, WorkloadPlan, get_workload

# Sustained fp32 training rate of one CPU core in PyTorch or XLA, on the generous side (AVX-512 servers reach it).
CPU_FLOPS_PER_CORE = 50e9
LONG_S = 600.0  # say nothing for runs shorter than this


def cpu_work(spec: RunSpec, env: dict[str, Any]) -> CpuEstimate | None:
    """The workload's work per sample for a run on CPUs; None where no estimate applies (a GPU, a workload that
    declares none, an external script, whose model is only its label)."""
    on_cpu = spec.device == "cpu" or (spec.device == "auto" and not env.get("gpus"))
    if not on_cpu or not kind_of(spec).knows_its_work:
        return None
    return get_workload(spec.model).cpu_estimate(spec)


def _cores(env: dict[str, Any]) -> int:
    return int(env.get("cpu_cores") or env.get("cpu_threads") or 1)


def run_seconds(spec: RunSpec, plan: WorkloadPlan, work: CpuEstimate, env: dict[str, Any]) -> float:
    """Rough seconds for one run of the case on this machine's CPUs."""
    warmup = spec.warmup_iters if isinstance(spec.warmup_iters, int) else spec.max_warmup_iters
    flop = work.flop_per_sample * plan.batch_per_device * spec.devices_per_node
    return flop * (warmup + spec.iters) / (CPU_FLOPS_PER_CORE * _cores(env))


def estimate_line(spec: RunSpec, plan: WorkloadPlan, work: CpuEstimate, seconds: float, env: dict[str, Any]) -> str:
    return (
        f"estimate: {spec.model} {spec.topology} {plan.group} {work.work} takes about {duration(seconds)} per run on "
        f"{_cores(env)} CPU cores (at most {CPU_FLOPS_PER_CORE / 1e9:.0f} GFLOP/s per core assumed; it may take "
        f"longer); for a quick look use {work.quick_look}"
    )


def single_run_estimate(spec: RunSpec, plan: WorkloadPlan, env: dict[str, Any]) -> str | None:
    if (work := cpu_work(spec, env)) is None:
        return None
    seconds = run_seconds(spec, plan, work, env)
    return estimate_line(spec, plan, work, seconds, env) if seconds >= LONG_S else None


def duration_estimates(plan: SweepPlan, env: dict[str, Any]) -> list[str]:
    """One line per long case, then the sweep's total where any case is long."""
    lines, total, known = [], 0.0, False
    for spec, case_plan in plan.cases:
        if (work := cpu_work(spec, env)) is None:
            continue
        known = True
        seconds = run_seconds(spec, case_plan, work, env)
        total += seconds * plan.repeats
        if seconds >= LONG_S:
            lines.append(estimate_line(spec, case_plan, work, seconds, env))
    if lines and known:
        lines.append(f"estimate: the whole sweep about {duration(total)} at most {plan.repeats} repeats per case")
    return lines
