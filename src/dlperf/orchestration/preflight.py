"""Pre-flight: before launching, compare what a case needs with what this machine has, and say so in one line."""

from __future__ import annotations

from typing import Any

from dlperf.metrics.footprint import GIB, Machine, fit_problems
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, get_workload


def machine_from_env(env: dict[str, Any]) -> Machine:
    """The node's facts as `collect_environment` records them."""
    return Machine(
        cpu_cores=int(env.get("cpu_cores") or env.get("cpu_threads") or 1),
        memory_bytes=int(float(env.get("memory_gib") or 0) * GIB),
        gpu_memory_bytes=tuple(int(g["memory_mib"]) * 2**20 for g in env.get("gpus") or []),
    )


def preflight_warning(spec: RunSpec, plan: WorkloadPlan, env: dict[str, Any]) -> str | None:
    """One line when the case will not fit on, or will oversubscribe, this machine (its devices are local);
    None when it fits or the workload cannot estimate itself."""
    footprint = get_workload(spec.model).footprint(spec, plan)
    if footprint is None:
        return None
    on_gpu = spec.device == "cuda" or (spec.device == "auto" and bool(env.get("gpus")))
    problems = fit_problems(footprint, spec.devices_per_node, on_gpu, machine_from_env(env))
    if not problems:
        return None
    return f"warning: {spec.model} {spec.topology} {plan.group}: {'; '.join(problems)}; needs {footprint.describe()}"
