"""Pre-flight: before launching, compare what a case needs with what this machine has, and say so in one line."""

from __future__ import annotations

from typing import Any

from dlperf.errors import ConfigError
from dlperf.metrics.footprint import GIB, Footprint, Machine, fit_problems, over_memory
from dlperf.orchestration.kinds import kind_of
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, get_workload


def machine_from_env(env: dict[str, Any]) -> Machine:
    """The node's facts as `collect_environment` records them."""
    return Machine(
        cpu_cores=int(env.get("cpu_cores") or env.get("cpu_threads") or 1),
        memory_bytes=int(float(env.get("memory_gib") or 0) * GIB),
        gpu_memory_bytes=tuple(_gpu_memory_mib(g) * 2**20 for g in env.get("gpus") or []),
    )


def _gpu_memory_mib(gpu: dict[str, Any]) -> int:
    """The memory a run on this GPU has: its smallest MIG instance's where it is split, 0 where NVML did not say
    (0 refuses nothing)."""
    sizes = [m["memory_mib"] for m in gpu.get("mig") or [] if m.get("memory_mib")]
    return int(min(sizes) if sizes else gpu.get("memory_mib") or 0)


MAX_RANKS_PER_CORE = 4  # beyond this a CPU run measures the scheduler, not training (and 100000 ranks never start)
FORCE_HELP = (
    "start even when the memory estimate is above the machine's memory, or there are more than "
    f"{MAX_RANKS_PER_CORE} CPU ranks per core (default: refuse, exit 2)"
)


def preflight_warning(spec: RunSpec, plan: WorkloadPlan, env: dict[str, Any], force: bool = False) -> str | None:
    """One line when the case will not fit on, or will oversubscribe, this machine (its devices are local);
    None when it fits or the workload cannot estimate itself. A case whose estimate is above the machine's
    memory, or with more than MAX_RANKS_PER_CORE CPU ranks per core, is a ConfigError unless `force`."""
    machine = machine_from_env(env)
    on_gpu = spec.device == "cuda" or (spec.device == "auto" and bool(env.get("gpus")))
    footprint = get_workload(spec.model).footprint(spec, plan)
    crowded = not on_gpu and spec.devices_per_node > MAX_RANKS_PER_CORE * machine.cpu_cores
    problems = _problems(spec, footprint, on_gpu, machine, crowded)
    if not problems:
        return None
    line = f"{spec.model} {spec.topology} {plan.group}: {'; '.join(problems)}"
    line += f"; needs {footprint.describe()}" if footprint else ""
    if (crowded or _refused_memory(spec, footprint, on_gpu, machine)) and not force:
        raise ConfigError(f"{line}: refused (pass --force to start it anyway)")
    return f"warning: {line}"


def _problems(spec: RunSpec, footprint: Footprint | None, on_gpu: bool, machine: Machine, crowded: bool) -> list[str]:
    """What will not fit, by the workload's estimate; without one, too many CPU ranks per core."""
    if footprint is not None:
        return fit_problems(footprint, spec.devices_per_node, on_gpu, machine)
    return [f"{spec.devices_per_node} CPU ranks share {machine.cpu_cores} cores"] if crowded else []


def _refused_memory(spec: RunSpec, footprint: Footprint | None, on_gpu: bool, machine: Machine) -> bool:
    """An estimate above the machine's memory; an external script's model is only the case's label: dlperf's
    memory estimate of it warns, it does not refuse."""
    if footprint is None or not kind_of(spec).knows_its_work:
        return False
    return over_memory(footprint, spec.devices_per_node, on_gpu, machine)
