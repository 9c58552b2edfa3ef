"""The parts of a record, one dataclass each: what a record's nested mappings hold, key by key (`records/schema.py`
declares which field holds which part, with its meaning).

Every key is optional (None when absent): records written by older dlperfs, before a key existed, still load, and
keys a part does not declare are left out when loading, kept in the record's `origin`. Three mappings stay
free-form, each with its reason at its declaration: `FreeForm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

# A mapping whose keys dlperf does not choose: a run's `config` as the user and the workload gave it, the `env` as
# `dlperf env --json` gathers it from the machine, and a framework log's `peer_metrics` as its format names them.
FreeForm = dict[str, Any]
# What kind of run a run record is (orchestration/kinds.py): dlperf's timed loop, a rank task of its own
# (commbench), another framework's script (`--command`), or a log read by `dlperf extract`
Kind = Literal["native", "task", "external", "extracted"]


def given(part: Any) -> dict[str, Any]:
    """A part's keys that hold a value (absent and null alike are None), in declaration order: what a reader lists."""
    return {key: value for key, value in vars(part).items() if value is not None}


@dataclass(frozen=True)
class Failure:
    """Where a dead worker failed (`launch/messages.Failure.facts`)."""

    rank: int | None = None
    host: str | None = None
    exitcode: int | None = None
    signal: str | None = None


@dataclass(frozen=True)
class Interconnect:
    """A GPU's links, where NVML tells."""

    nvlink_links: int | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None


@dataclass(frozen=True)
class Accelerator:
    """The devices a run used (`metrics/accelerator.py`)."""

    kind: str | None = None
    name: str | None = None
    model: str | None = None
    memory_gib: float | None = None
    count: int | None = None
    per_node: int | None = None
    interconnect: Interconnect | None = None
    source: str | None = None


@dataclass(frozen=True)
class RepeatsStop:
    """`--repeats auto`'s decision after a repeat (`metrics/repeats.should_stop`)."""

    stop: bool | None = None
    reason: str | None = None
    repeats: int | None = None
    half_width: float | None = None
    target: float | None = None


@dataclass(frozen=True)
class Rank:
    """One rank's host, device, peak memory and threads (`harness/results.RankFacts` without its step times)."""

    rank: int | None = None
    host: str | None = None
    device: str | None = None
    peak_memory_mib: dict[str, float | None] | None = None
    local_rank: int | None = None
    cpu_threads: int | None = None


@dataclass(frozen=True)
class SteadyState:
    """Where the window throughputs become stationary (`metrics/steady.SteadyState`)."""

    stable: bool | None = None
    window_index: int | None = None
    iteration: int | None = None
    throughput: float | None = None
    windows_used: int | None = None
    tolerance: float | None = None
    windows_required: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Warmup:
    """The warm-up: `fixed` or `auto`, and for auto its windows and whether they settled."""

    mode: str | None = None
    iters: int | None = None
    stable: bool | None = None
    window_throughputs: list[float] | None = None
    max_iters: int | None = None
    reason: str | None = None
    elapsed_s: float | None = None  # the whole warm-up, its first step included
    compiled_ahead_s: float | None = None  # the step's compile before its first run (XLA's), not in elapsed_s


@dataclass(frozen=True)
class GpuProcess:
    """Another process on a run's GPU (NVML)."""

    device: int | str | None = None
    pid: int | None = None
    used_mib: float | None = None


@dataclass(frozen=True)
class MachineLoad:
    """One node's load over the timed window (`metrics/noise.MachineLoad`)."""

    wall_s: float | None = None
    cpu_count: int | None = None
    load_avg_start: list[float] | None = None
    load_avg_end: list[float] | None = None
    other_cpu_s: float | None = None
    other_cores: float | None = None
    gpu_other_processes: list[GpuProcess] | None = None
    gpu_note: str | None = None
    steal_cores: float | None = None


@dataclass(frozen=True)
class Stragglers:
    """Each rank's median own work per step and the ranks above `--straggler-pct` (`metrics/stragglers.py`)."""

    rank_median_ms: list[float] | None = None
    median_rank_ms: float | None = None
    slowest_rank: int | None = None
    slowest_host: str | None = None
    spread: float | None = None
    straggler_pct: float | None = None
    stragglers: list[int] | None = None
    flagged: bool | None = None
    measure: str | None = None


@dataclass(frozen=True)
class Phases:
    """The mean step's phases in milliseconds (`metrics/step_phases.PHASES`)."""

    data: float | None = None
    sync_in: float | None = None
    compute: float | None = None
    sync_out: float | None = None
    update: float | None = None


@dataclass(frozen=True)
class StepPhases:
    """Where the mean step's time went (`metrics/step_phases.StepPhases`)."""

    measure: str | None = None
    steps: int | None = None
    ranks: int | None = None
    phases_ms: Phases | None = None
    exposed_ms: float | None = None
    straggler_wait_ms: float | None = None
    rank_collective_ms: list[float] | None = None
    step_ms: float | None = None


@dataclass(frozen=True)
class Ablation:
    """`--ablate sync`'s windows without gradient synchronisation beside the synchronised ones; `method` None
    with the `reason` where the step cannot skip it."""

    method: str | None = None
    reason: str | None = None
    throughput: float | None = None
    step_ms: float | None = None
    synced_step_ms: float | None = None
    ratio: float | None = None
    window_throughputs: list[float] | None = None
    synced_window_throughputs: list[float] | None = None
    iters: int | None = None
    elapsed_s: float | None = None  # the whole ablation, each window's settling step included


@dataclass(frozen=True)
class Energy:
    """The timed window's energy, all nodes summed (`metrics/energy.energy_result`)."""

    joules: float | None = None
    joules_per_sample: float | None = None
    avg_watts_per_device: float | None = None
    method: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class Parallel:
    """A run's layout: GPT's (`dp`, `tp`, `pp`, `dp_mode`) or Llama's mesh (`dp_replicate`, `dp_shard`, `cp`,
    `stages_per_rank`; the MoE workload's adds `ep`, folded inside dp_shard x cp), and the batches and pipeline
    schedule both have."""

    dp: int | None = None
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    dp_replicate: int | None = None
    dp_shard: int | None = None
    micro_batch_size: int | None = None
    global_batch_size: int | None = None
    accumulation_steps: int | None = None
    pp_schedule: str | None = None
    stages_per_rank: int | None = None
    dp_mode: str | None = None
    ep: int | None = None


@dataclass(frozen=True)
class SamplesPerStep:
    """An instrumented `--command`'s samples per update as the hook counted them, and the declared global batch."""

    counted: float | None = None
    declared: int | None = None


@dataclass(frozen=True)
class LikeForLike:
    """The hook's and the script's figures over the stretch the script's figure covers."""

    hook: float | None = None
    script: float | None = None
    ratio: float | None = None
    stretch: str | None = None


@dataclass(frozen=True)
class CrossCheck:
    """The second reading of a log beside the rule's figure (`framework_logs/crosscheck.py`)."""

    agree: bool | None = None
    second: float | None = None
    ratio: float | None = None
    reading: str | None = None
    tolerance: float | None = None
    note: str | None = None
    like_for_like: LikeForLike | None = None


@dataclass(frozen=True)
class OwnReading:
    """The framework's own practice's figure beside the rule's."""

    figure: float | None = None
    ratio: float | None = None
    reading: str | None = None


@dataclass(frozen=True)
class Threads:
    """A node's command processes' OMP_NUM_THREADS and who set it (`launch/external_node.Threads`)."""

    value: str | None = None
    set_by: str | None = None
    cores: int | None = None
    processes: int | None = None


@dataclass(frozen=True)
class CollectiveTime:
    """One collective at one message size, the slowest rank's mean call (`metrics/bandwidth.commbench_record`);
    the bandwidths None on one rank."""

    op: str | None = None
    size_bytes: int | None = None
    world_size: int | None = None
    seconds: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    bus_factor: float | None = None


@dataclass(frozen=True)
class CollectiveFit:
    """One collective's latency-bandwidth line over its sizes (`metrics/bandwidth.AlphaBetaFit`) and its
    large-message bus bandwidth."""

    op: str | None = None
    world_size: int | None = None
    alpha_s: float | None = None
    beta_s_per_byte: float | None = None
    r2: float | None = None
    max_rel_error: float | None = None
    points: int | None = None
    alpha_clamped: bool | None = None
    busbw_gbps: float | None = None


@dataclass(frozen=True)
class Probe:
    """One run of a max-batch search at one batch (`maxbatch/search.py`)."""

    batch: int | None = None
    fits: bool | None = None
    status: str | None = None
    throughput: float | None = None
    peak_memory_mib: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class MoEWindow:
    """What the MoE routers did in one timing window, all ranks' picks summed (`workloads/moe/meter.py`): picks per
    expert and per expert-parallel rank (summed over the MoE blocks), the imbalance max / mean (per block, then the
    blocks' mean; and the worst block's), the picks routed and those a capacity factor dropped."""

    tokens_per_expert: list[int] | None = None
    tokens_per_ep_rank: list[int] | None = None
    imbalance: float | None = None
    imbalance_worst_block: float | None = None
    ep_imbalance: float | None = None
    routed_tokens: int | None = None
    dropped_tokens: int | None = None


@dataclass(frozen=True)
class MoERouting(MoEWindow):
    """A MoE run's routing (`--routing`, `--load-balance`, `--capacity-factor`, `--experts-impl` as run: grouped or
    loop) and, measured over the whole timed window, `MoEWindow`'s figures, with each window's in `windows`."""

    routing: str | None = None
    load_balance: str | None = None
    capacity_factor: float | None = None
    experts_impl: str | None = None
    windows: list[MoEWindow] | None = None
