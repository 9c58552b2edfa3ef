"""The machine's other load while a run ran, and the `noisy` verdict that keeps a loaded machine's number honest.

A snapshot (psutil; NVML on GPUs) is taken on every node at the start and at the end of the timed run. Between
the two:

- others' CPU time: the machine's busy CPU seconds (the kernel's /proc/stat: user, nice, system, interrupts and
  the time a hypervisor gave other guests, `steal`) less the user + system seconds of the run's own process tree,
  divided by the wall time, i.e. how many cores others kept busy on average. Counting the machine rather than the
  processes one can see catches what a process list misses: processes that start and end between the snapshots
  (a build, a test suite), kernel work, and a shared VM's neighbours (steal, also recorded on its own);
- the load average at start and end (it includes the run itself, so it is recorded, not judged);
- on GPUs, the compute processes NVML lists on the run's devices (mapped from the framework's numbering,
  machine/gpus.py) that are not the run's own. NVML reports the host's PIDs: inside a container (its own PID
  namespace) none of ours is listed under our PID, and the check is then skipped with that reason (`gpu_note`)
  rather than flagging every container run.

A run is `noisy` when any of these holds, each giving its reason:
- others kept more than `other_cores_limit(cores)` cores busy (10 % of the machine, at least half a core);
- another process computed on one of the run's GPUs;
- the coefficient of variation of the run's window throughputs exceeds `WINDOW_CV_LIMIT` (5 %): a quiet GPU
  run's windows agree within about 1 %, and a larger spread means the figure depends on when it was taken.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field

from dlperf.machine.gpus import GpuId, nvml_handles, others_on_gpus
from dlperf.metrics.energy import load_nvml

WINDOW_CV_LIMIT = 0.05
OTHER_CORES_FRACTION = 0.10
OTHER_CORES_MIN = 0.5


def other_cores_limit(cpu_count: int) -> float:
    """Cores' worth of other CPU use above which a run is noisy: 10 % of the machine, at least half a core."""
    return max(OTHER_CORES_MIN, OTHER_CORES_FRACTION * cpu_count)


@dataclass(frozen=True)
class LoadSnapshot:
    time: float
    load_avg: tuple[float, float, float]
    cpu_count: int
    busy_s: float  # the machine's non-idle CPU seconds since boot, steal included
    steal_s: float  # of which a hypervisor ran other guests
    own_seconds: dict[tuple[int, float], float]  # (pid, create time) -> user + system seconds, the run's own tree
    gpu_processes: list[dict[str, object]] | None  # other processes on the run's GPUs; None: not looked at / unknown
    gpu_note: str | None = None


def _busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot: everything but idle and I/O wait."""
    import psutil

    times = psutil.cpu_times()._asdict()
    steal = times.get("steal", 0.0)
    busy = sum(v for k, v in times.items() if k not in ("idle", "iowait", "guest", "guest_nice"))
    return busy, steal


def _own_tree(root_pid: int) -> set[int]:
    import psutil

    try:
        root = psutil.Process(root_pid)
        return {root_pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.Error:
        return {root_pid}


def _gpu_processes(gpus: Sequence[GpuId], own: set[int]) -> tuple[list[dict[str, object]] | None, str | None]:
    """Other compute processes on these GPUs (NVML names, machine/gpus.py), or None with the reason NVML could
    not tell."""
    pynvml, reason = load_nvml()
    if pynvml is None:
        return None, reason
    try:
        listed = []
        for gpu, handle in zip(gpus, nvml_handles(pynvml, gpus)):
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = proc.usedGpuMemory
                listed.append({"device": gpu, "pid": proc.pid, "used_mib": used / 2**20 if used else None})
        return others_on_gpus(listed, own)
    except pynvml.NVMLError as error:
        return None, f"NVML could not list processes: {error}"
    finally:
        pynvml.nvmlShutdown()


def take_snapshot(
    root_pid: int | None = None, extra_own_pids: Collection[int] = (), gpu_indices: Sequence[GpuId] = ()
) -> LoadSnapshot:
    """The machine's load now; the process tree of `root_pid` (default: this process) and `extra_own_pids` are ours."""
    import psutil

    own = _own_tree(os.getpid() if root_pid is None else root_pid) | set(extra_own_pids)
    seconds: dict[tuple[int, float], float] = {}
    for pid in own:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            seconds[(pid, proc.create_time())] = times.user + times.system
        except psutil.Error:
            continue  # ended since the tree was listed
    busy, steal = _busy_seconds()
    gpus, note = _gpu_processes(gpu_indices, own) if gpu_indices else (None, None)
    return LoadSnapshot(time.time(), psutil.getloadavg(), psutil.cpu_count() or 1, busy, steal, seconds, gpus, note)


@dataclass(frozen=True)
class MachineLoad:
    """What others did on this machine during the run (record field `machine_load`, one per node)."""

    wall_s: float
    cpu_count: int
    load_avg_start: tuple[float, float, float]
    load_avg_end: tuple[float, float, float]
    other_cpu_s: float
    other_cores: float
    gpu_other_processes: list[dict[str, object]] | None
    gpu_note: str | None
    steal_cores: float = 0.0  # of other_cores, what a hypervisor gave other guests (a shared VM's neighbours)

    def as_record(self) -> dict[str, object]:
        return asdict(self)


def machine_load(start: LoadSnapshot, end: LoadSnapshot) -> MachineLoad:
    """Others' CPU time between two snapshots (the machine's less the run's own), and the GPU processes seen at
    either. An own process that started in between counts from zero."""
    own = sum(max(0.0, s - start.own_seconds.get(key, 0.0)) for key, s in end.own_seconds.items())
    other = max(0.0, end.busy_s - start.busy_s - own)
    wall = max(end.time - start.time, 1e-9)
    gpus = None
    if start.gpu_processes is not None or end.gpu_processes is not None:
        gpus = []
        for proc in (start.gpu_processes or []) + (end.gpu_processes or []):
            if proc not in gpus:
                gpus.append(proc)
    return MachineLoad(
        wall_s=wall,
        cpu_count=end.cpu_count,
        load_avg_start=start.load_avg,
        load_avg_end=end.load_avg,
        other_cpu_s=other,
        other_cores=other / wall,
        gpu_other_processes=gpus,
        gpu_note=end.gpu_note or start.gpu_note,
        steal_cores=max(0.0, end.steal_s - start.steal_s) / wall,
    )


def window_cv(window_throughputs: Sequence[float]) -> float | None:
    """Sample coefficient of variation of the window throughputs; None with fewer than 2 finite windows (a
    diverged run's windows may hold infinities, which have no spread)."""
    finite = [w for w in window_throughputs if isinstance(w, (int, float)) and math.isfinite(w)]
    if len(finite) < 2:
        return None
    mean = statistics.fmean(finite)
    return statistics.stdev(finite) / mean if mean else None


@dataclass(frozen=True)
class NoiseVerdict:
    noisy: bool
    reasons: list[str] = field(default_factory=list)
    window_cv: float | None = None

    def as_record(self) -> dict[str, object]:
        """Record fields: noisy, noise_reasons, window_cv."""
        return {"noisy": self.noisy, "noise_reasons": self.reasons, "window_cv": self.window_cv}


def noise_verdict(
    window_throughputs: Sequence[float],
    loads: Sequence[MachineLoad] = (),
    cv_limit: float = WINDOW_CV_LIMIT,
) -> NoiseVerdict:
    """`noisy` with its reasons, from the run's windows and each node's load."""
    reasons = []
    cv = window_cv(window_throughputs)
    if cv is not None and cv > cv_limit:
        reasons.append(f"window throughputs vary by CV {cv:.1%}, above the {cv_limit:.0%} limit")
    for node, load in enumerate(loads):
        limit = other_cores_limit(load.cpu_count)
        if load.other_cores > limit:
            steal = f", {load.steal_cores:.2f} of them other guests of the VM host" if load.steal_cores >= 0.01 else ""
            reasons.append(
                f"node {node}: others kept {load.other_cores:.2f} of {load.cpu_count} cores busy{steal} "
                f"(limit {limit:.2f})"
            )
        for proc in load.gpu_other_processes or []:
            reasons.append(f"node {node}: another process (pid {proc['pid']}) computed on GPU {proc['device']}")
    return NoiseVerdict(bool(reasons), reasons, cv)
