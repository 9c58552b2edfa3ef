"""The evidence a run's number carries, as record fields: steady state, noise, stragglers, energy and MFU.

Built in the parent from rank 0's measurement and every rank's gathered facts, with the torch-free modules of
`dlperf.metrics`; each field is documented where it is computed:

- `steady_state`, `steady_state_iter`, `throughput_steady` (metrics/steady.py) over the timed windows (with
  `--warmup-iters auto`, the warm-up windows first), and `warmup` (what warm-up ran and, for auto, whether it
  became stable);
- `noisy`, `noise_reasons`, `window_cv` (metrics/noise.py) from the timed windows and `machine_load`: one entry per
  node, snapshots by the node's local rank 0 at the start and end of the timed window;
- `stragglers` (metrics/stragglers.py) from each rank's own work per step (`measure` says what was timed);
- `step_phases` (metrics/step_phases.py): where the step's time went (data, collectives, compute, update), the
  exposed communication and the straggler wait, from every rank's step phases;
- `energy` (metrics/energy.py): every node's devices over the timed window, summed;
- `ablation` (`--ablate sync`): the same steps without gradient synchronisation, timed after the timed window;
- `tf32` (whether fp32 matmuls and convolutions ran on TF32 tensor cores, from `--fp32-math` on CUDA),
  `flops_per_iteration` (counted, FlopCounterMode), `tflops_per_device`, `mfu`, `mfu_measured` and the peaks' fields
  (metrics/flops.py, metrics/peaks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlperf.harness.results import RunMeasurement
from dlperf.metrics.energy import EnergyReading, energy_result
from dlperf.metrics.flops import mfu_fields, tflops_per_device
from dlperf.metrics.noise import MachineLoad, noise_verdict
from dlperf.metrics.steady import detect_steady_state
from dlperf.metrics.step_phases import summarise_phases
from dlperf.metrics.stragglers import find_stragglers
from dlperf.records.codec import dump
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan, get_workload

FLOPS_COUNTED = "counted: torch FlopCounterMode, one training step on the meta device at the run's shapes"


def steady_fields(spec: RunSpec, measured: RunMeasurement) -> dict[str, Any]:
    m = measured.measurement
    auto = bool(m.warmup_window_throughputs) or m.warmup_stable is not None
    windows = [*m.warmup_window_throughputs, *m.window_throughputs]
    lengths = [*m.warmup_window_iters, *(m.window_iters or [spec.window] * len(m.window_throughputs))]
    first = 1 if auto else m.warmup_iters  # auto: its windows start after the first step
    steady = detect_steady_state(windows, lengths, first_iter=first, samples_per_iter=m.global_batch)
    warmup: dict[str, Any] = {"mode": "auto" if auto else "fixed", "iters": m.warmup_iters, "stable": m.warmup_stable,
                              "elapsed_s": m.warmup_s, "compiled_ahead_s": m.compile_s}  # fmt: skip
    if auto:
        warmup["window_throughputs"] = m.warmup_window_throughputs
        warmup["max_iters"] = spec.max_warmup_iters
        if not m.warmup_stable:
            warmup["reason"] = (
                f"not stable within --max-warmup-iters {spec.max_warmup_iters}: timed anyway, throughput flagged"
            )
    return {
        "steady_state": dump(steady),
        "steady_state_iter": steady.iteration,
        "throughput_steady": steady.throughput,
        "warmup": warmup,
    }


def node_leaders(measured: RunMeasurement) -> list[Any]:
    return [r for r in measured.ranks if r.local_rank == 0]


def noise_fields(measured: RunMeasurement) -> dict[str, Any]:
    loads = [r.machine_load for r in node_leaders(measured) if r.machine_load]
    verdict = noise_verdict(measured.measurement.window_throughputs, [MachineLoad(**load) for load in loads])
    return {**verdict.as_record(), "machine_load": loads}


def straggler_fields(spec: RunSpec, measured: RunMeasurement) -> dict[str, Any]:
    ranks = sorted(measured.ranks, key=lambda r: r.rank)
    if len(ranks) < 2 or any(not r.own_step_ms for r in ranks):
        return {"stragglers": None}
    own, hosts = [r.own_step_ms for r in ranks], [r.host for r in ranks]
    found = find_stragglers(own, hosts, spec.straggler_pct / 100, measured.measurement.own_step_measure)
    return {"stragglers": dump(found)}


def phase_fields(measured: RunMeasurement) -> dict[str, Any]:
    """Null where a rank did not time its phases (a compiled step, a TP/PP/FSDP layout, JAX), or the ranks' phases
    disagree (another number of steps): the phases explain a run, they never fail it."""
    ranks = sorted(measured.ranks, key=lambda r: r.rank)
    if any(not r.phase_ms for r in ranks):
        return {"step_phases": None}
    try:
        phases = summarise_phases(
            [r.phase_ms for r in ranks], "CUDA events" if measured.device_type == "cuda" else "host clock"
        )
    except ValueError:
        return {"step_phases": None}
    return {"step_phases": dump(phases)}


NO_SYNC = (
    "no_sync: DDP's no_sync() every step, the gradient all-reduce skipped, in windows alternating with synchronised"
    " ones"
)


def ablation_fields(spec: RunSpec, measured: RunMeasurement) -> dict[str, Any]:
    """`--ablate sync`'s windows as the record's `ablation` (None when not asked): the unsynchronised steps' and
    the paired synchronised steps' time, and their ratio, which the waterfall applies to the timed window's step."""
    if spec.ablate == "off":
        return {"ablation": None}
    m = measured.measurement
    unsynced, synced = m.ablation_window_throughputs, m.ablation_synced_window_throughputs
    if not unsynced or not synced:
        reason = (
            "one rank: no gradient synchronisation to skip"
            if spec.world_size == 1
            else "this step cannot skip its gradient synchronisation (only eager DDP steps can: not compiled steps, "
            "TP/PP/FSDP layouts, JAX)"
        )
        return {"ablation": {"method": None, "reason": reason}}
    lengths = [min(spec.window, m.iters - i * spec.window) for i in range(len(unsynced))]
    step_ms = mean_step_ms(unsynced, lengths, m.global_batch)
    synced_ms = mean_step_ms(synced, lengths, m.global_batch)
    return {
        "ablation": {
            "method": NO_SYNC,
            "throughput": m.global_batch / step_ms * 1000,
            "step_ms": step_ms,
            "synced_step_ms": synced_ms,
            "ratio": step_ms / synced_ms,
            "window_throughputs": unsynced,
            "synced_window_throughputs": synced,
            "iters": m.iters,
            "elapsed_s": m.ablation_s,
        }
    }


def mean_step_ms(windows: list[float], lengths: list[int], global_batch: int) -> float:
    """The mean step of windows given as samples/s over `lengths` steps each: their time over their steps."""
    return sum(n * global_batch / w for w, n in zip(windows, lengths)) / sum(lengths) * 1000


def energy_fields(measured: RunMeasurement) -> dict[str, Any]:
    readings = [EnergyReading(**r.energy) for r in node_leaders(measured) if r.energy]
    m = measured.measurement
    result = energy_result(readings, m.global_batch * m.iters)
    return {"energy": dump(result)}


def flops_fields(
    spec: RunSpec,
    seconds_per_iteration: float,
    device: str,
    formula: float | None,
    counted: float | None,
    note: str | None,
    device_type: str | None = None,
) -> dict[str, Any]:
    """FLOPs per iteration and MFU, computed here and nowhere else: over the `counted` FLOPs, else the workload's
    published `formula` (`flops_per_iteration_formula`, from `derived_metrics`), else none with the reason;
    `device` (rank 0's) names the peak; `device_type` (a native run's) says whether fp32 ran on TF32, whose peak
    MFU then divides by."""
    basis = counted if counted is not None else formula
    source = f"formula (no count: {note})" if formula is not None else note
    source = FLOPS_COUNTED if counted is not None else source
    tf32 = spec.tf32(device_type) if device_type else False
    fields = mfu_fields(
        basis, seconds_per_iteration, spec.world_size, device, spec.precision, spec.peak_tflops, note, tf32=tf32
    )
    tf32_state = {"tf32": {"matmul": tf32, "conv": tf32}} if device_type else {}  # what --fp32-math set (CUDA only)
    return {**tf32_state, "flops_per_iteration": basis, "flops_source": source, **fields}


def causal_mfu(
    fields: dict[str, Any], causal: float | None, seconds_per_iteration: float, spec: RunSpec
) -> dict[str, Any]:
    """MaxText's convention beside the PaLM one (`metrics/flops.py`): TFLOP/s per device and MFU over the causal count
    `causal` (FLOPs per iteration), against the same peak `fields` names; nothing where the workload has no such
    count or the run no peak."""
    if causal is None:
        return {}
    achieved = tflops_per_device(causal, seconds_per_iteration, spec.world_size)
    peak = fields.get("mfu_peak_tflops")
    return {"tflops_per_device_causal": achieved, "mfu_causal": achieved / peak if peak else None}


@dataclass(frozen=True)
class WindowFigures:
    """What a run's live line shows beside a window's samples/s, from the workload's own figures."""

    tokens_per_s: float
    tflops_per_device: float | None
    mfu: float | None


def window_figures(spec: RunSpec, plan: WorkloadPlan, samples_per_s: float, device: str) -> WindowFigures | None:
    """Tokens/s, TFLOP/s per device and MFU of a window where the workload derives tokens (GPT, Llama); None
    where it does not (ResNet-50)."""
    derived = get_workload(spec.model).derived_metrics(spec, plan, samples_per_s)
    if "tokens_per_s" not in derived:
        return None
    formula = derived.get("flops_per_iteration_formula")
    flops = flops_fields(spec, plan.global_batch / samples_per_s, device, formula, None, None)
    return WindowFigures(derived["tokens_per_s"], flops.get("tflops_per_device"), flops.get("mfu"))


def evidence_fields(spec: RunSpec, measured: RunMeasurement) -> dict[str, Any]:
    """Every evidence field of a successful run's record but FLOPs and MFU (`flops_fields`, which need the
    workload's derived metrics first)."""
    return {
        **steady_fields(spec, measured),
        **noise_fields(measured),
        **straggler_fields(spec, measured),
        **phase_fields(measured),
        **energy_fields(measured),
        **ablation_fields(spec, measured),
    }
