"""The JSON records dlperf writes, declared once: one dataclass per record kind, with each field's type and meaning.

A record's nested parts are dataclasses too (`records/parts.py`). One codec, pydantic's TypeAdapter over these
classes (`records/codec.py`), checks a record's types at every depth (`records/validate.py` adds the ranges), loads
it and generates the JSON Schema files (`records/json/*.json`, `docgen.json_schema`); the record reference in
`docs/records.md` (`docgen.reference_table`) is derived from them too, so a field is spelled in its declaration and
its readers, nowhere else (docs/architecture.md, "Add a record field"). The classes describe the on-disk JSON;
`records.store.write_record` holds every record, parts included, to its kind's declaration, so a misspelled field
fails where it is written. Readers get instances of these classes (`records.load`), so a misspelled field fails
where it is read; `tests/unit/test_record_reads.py` keeps string keys of record fields out of the readers.

`dlperf.run/4` (this version) writes an external run's `engine` null (it ran no engine: its `kind` says what it
is); `dlperf.run/3` writes the run's `kind` (`native`, `task`, `external`, `extracted`: the dataclass it loads
as); `dlperf.run/2` keeps only the workload's own keys in `config` and adds `batch_size_per_device`,
`micro_batch_size`, `engine` and `table`; `dlperf.run/1` records (one flat config for every model) stay
readable: `upgrade` fills the new fields from the old ones, an old record's kind derived once from its keys and
its engine `external` read as null.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict

from dlperf.records.codec import adapter, decode
from dlperf.records.parts import (
    Ablation,
    Accelerator,
    CollectiveFit,
    CollectiveTime,
    CrossCheck,
    Energy,
    Failure,
    FreeForm,
    Kind,
    MachineLoad,
    MoERouting,
    OwnReading,
    Parallel,
    Probe,
    Rank,
    RepeatsStop,
    SamplesPerStep,
    SteadyState,
    StepPhases,
    Stragglers,
    Threads,
    Warmup,
)

SCHEMA = "dlperf.run/4"
OLD_SCHEMAS = ("dlperf.run/1", "dlperf.run/2", "dlperf.run/3")  # `upgrade` brings them to SCHEMA
READABLE = (*OLD_SCHEMAS, SCHEMA)
MAXBATCH_SCHEMA = "dlperf.maxbatch/1"  # `dlperf maxbatch`'s record; the report's bsz=max column reads it
COMMBENCH_SCHEMA = "dlperf.commbench/1"
# Throughputs outside this range are no measurement (one sample in 11 days, or a trillion samples a second): they
# would overflow or divide by zero in speedups, so the validator refuses them
THROUGHPUT_RANGE = (1e-6, 1e12)

Check = Literal["name", "count", "positive", "throughput", ""]


def doc(
    meaning: str,
    check: Check = "",
    default: Any = None,
    track: Literal["param", "metric", ""] = "",
    show: tuple[str, str] = (),
) -> Any:
    """A declared field: its meaning (the docs' reference table), the value check beyond its type, whether an
    experiment tracker gets it as a run's parameter or metric (`reporting/tracking.py`), and its row in the table
    after a run (`cli/display.py`): the label (`{unit}`: what the throughput counts) and how the value is written,
    a format spec (`.2f`; `%`: a percentage) or a rendering of the console's own (`mfu`, `phases`, ...)."""
    return field(default=default, metadata={"doc": meaning, "check": check, "track": track, "show": show})


def tracked(kind: type, how: str) -> tuple[str, ...]:
    """The kind's fields declared with `track=how`, in declaration order."""
    return tuple(f.name for f in declared_fields(kind) if f.metadata.get("track") == how)


def shown(kind: type) -> tuple[tuple[str, str, str], ...]:
    """The kind's fields declared with a console row: (name, label, how), in declaration order."""
    return tuple((f.name, *f.metadata["show"]) for f in declared_fields(kind) if f.metadata.get("show"))


@dataclass(frozen=True)
class Origin:
    """Where a loaded record was read from, and its JSON as read: there an absent key differs from a null one, and
    keys its kind does not declare (another dlperf's) are kept for the history's copy, never read as fields."""

    path: str | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# The codec's rule for every record kind and its parts (records/codec.py): a number is finite. NaN and the
# infinities are no JSON; a writer's NaN becomes null (orchestration/record.strict_json) and a reader refuses one.
FINITE = ConfigDict(allow_inf_nan=False)


def loaded(factory: Any) -> Any:
    """An attribute of a loaded record that is no key of its JSON (`records.load` sets it): not in the docs, the
    JSON Schema or the validator, not compared."""
    return field(default_factory=factory, compare=False, repr=False, kw_only=True, metadata={"loaded": True})


@dataclass(frozen=True)
class RunRecord:
    """A run of `dlperf run`/`sweep` (ok, failed or diverged); the keys every run record kind shares."""

    __pydantic_config__ = FINITE

    schema: str = doc("`dlperf.run/4`; `dlperf.run/1` to `/3` records are still read (`upgrade`)", "name")
    kind: Kind = doc(
        "`native` (dlperf's timed loop), `task` (a rank task: commbench), `external` (`--command`) or `extracted`"
        " (`dlperf extract`); absent: `native`; derived from the keys for records older than `dlperf.run/3`",
        default="native",
    )
    dlperf_version: str | None = doc("the dlperf that wrote the record", track="param")
    model: str = doc("workload", "name", track="param")
    engine: str | None = doc("engine (`torch`, `jax`); null for an external or extracted run", track="param")
    case: str = doc("topology (`1n2g`)", "name", track="param")
    group: str = doc("report group (`b128_fp32`)", "name", track="param")
    table: str | None = doc("which report table (`scaling` or the GPT `layouts`)", track="param")
    repeat: int | None = doc("repeat number", "count", track="param")
    nodes: int = doc("nodes", "count", track="param")
    devices_per_node: int = doc("devices per node", "count", track="param")
    world_size: int = doc("processes (devices) in all", "count", track="param", show=("world size", "threads"))
    precision: str = doc("precision (`fp32`, `amp-bf16`, ...)", "name", track="param")
    batch_size: int | None = doc("= `batch_size_per_device`, the published name", "count")
    batch_size_per_device: int | None = doc(
        "samples per device per iteration (global batch / data-parallel size)", "count", track="param"
    )
    micro_batch_size: int | None = doc(
        "the micro batch where the step splits its batch (GPT), else null", "count", track="param"
    )
    global_batch_size: int | None = doc("samples per iteration", "count", track="param")
    config: FreeForm | None = doc(
        "the run's keys: the shared ones and the model's own (a GPT record has no `batch_size` key there)"
    )
    status: Literal["ok", "failed", "diverged"] = doc("`ok`, `failed` or `diverged`", default="ok")
    error: str | None = doc("the reason in one line, when not ok")
    failure: Failure | None = doc("rank, host, exit code and signal of a dead worker")
    started_at: float | None = doc("Unix time the run started")
    finished_at: float | None = doc("Unix time the run finished")
    log: str | None = doc("the run's log file, beside the record")
    env: FreeForm | None = doc("the environment, as `dlperf env --json` prints it")
    accelerator: Accelerator | None = doc(
        "the devices the run used (`metrics/accelerator.py`): `kind` (`cuda`, `cpu`, ...), `name` (rank 0's device as"
        " the framework reports it; the CPU model on CPUs), `model` (that name in dlperf's device table, e.g."
        " `H100 SXM`; null for a name it does not know exactly), `memory_gib` (per GPU; the host's on CPUs), `count`,"
        " `per_node`, `interconnect` (`nvlink_links` up, `pcie_generation`, `pcie_width`, where NVML tells) and"
        " `source`"
    )
    sweep_id: str | None = doc(
        "the sweep that made the record (absent for a single `dlperf run`); report keeps sweeps apart"
    )
    repeats_stop: RepeatsStop | None = doc(
        "with `--repeats auto`: the decision after this repeat (`stop`, `reason`, `half_width`, `target`)"
    )
    throughput: float | None = doc(
        "global samples/s over the timed iterations", "throughput", track="metric", show=("throughput ({unit})", ".2f")
    )
    throughput_per_device: float | None = doc(
        "throughput / world size", "positive", track="metric", show=("per device ({unit})", ".2f")
    )
    window_throughputs: list[float | None] | None = doc(
        "samples/s of each timing window (null: not finite)", show=("window throughputs", ".1f")
    )
    latency_ms: dict[str, float | None] | None = doc(
        "`mean`, `p50`, `p90` milliseconds per iteration (CUDA events on GPUs, no sync per step)",
        show=("latency (ms)", ".2f"),
    )
    peak_memory_mib: dict[str, float | None] | None = doc(
        "per device, max over ranks: CUDA `allocated` and `reserved` over the timed steps (the allocator's cache is "
        "released, `torch.cuda.empty_cache()`, before `reset_peak_memory_stats` at the window's start, so "
        "`reserved` holds none of the warm-up's cuDNN or autotuning workspaces); on CPUs the workers' peak `rss` "
        "(the process's, warm-up included)",
        show=("peak memory (MiB)", ".0f"),
    )
    device_type: str | None = doc("`cuda`, `cpu`, ...", track="param")
    ranks: list[Rank] | None = doc(
        "each rank's host, device, peak memory and, on a CPU device, `cpu_threads`: the threads it computed with "
        "(its device's share of the machine, `--cpu-threads`)"
    )
    hosts: list[str | None] | None = doc("the hosts the run used")
    elapsed_s: float | None = doc("timed window in seconds", track="metric")
    first_step_s: float | None = doc("time to the first finished step", track="metric", show=("first step (s)", ".2f"))
    compile_s: float | None = doc(
        "compile time (`--compile`; XLA's ahead-of-time compile on JAX)", track="metric", show=("compile (s)", ".1f")
    )
    loss_first: float | None = doc("loss of the first step", track="metric", show=("loss first", ".4g"))
    loss_last: float | None = doc("loss of the last timed step", track="metric", show=("loss last", ".4g"))
    parameters: int | None = doc("trainable parameters of rank 0's model (its shard under TP, PP or FSDP)")
    gradient_bytes: int | None = doc("bytes of those parameters' gradients (what DDP all-reduces per step)")
    parameters_total: int | None = doc(
        "MoE: every parameter of the whole model (embedding and untied output included; `workloads/moe/config.py`)",
        "count",
    )
    parameters_active: int | None = doc(
        "MoE: the parameters one token uses (top_k routed experts, not all of them; embedding included)", "count"
    )
    moe: MoERouting | None = doc(
        "MoE: the routing as run and as measured over the timed window (picks per expert and per EP rank, their "
        "imbalance max / mean, dropped picks), each timing window's too (`workloads/moe/meter.py`)",
        show=("expert imbalance (max/mean)", "routing"),
    )
    steady_state: SteadyState | None = doc(
        "where the window throughputs become stationary (3 windows within ±5 % of their median; `metrics/steady.py`);"
        " `stable: false` with the `reason` when never. `throughput` stays the published fixed-warm-up figure",
        show=("steady throughput ({unit})", "steady"),
    )
    steady_state_iter: int | None = doc("the iteration the steady state starts at")
    throughput_steady: float | None = doc("samples/s from the steady state on", track="metric")
    warmup: Warmup | None = doc(
        "`mode` (`fixed` or `auto`), `iters` run, `elapsed_s` (the first step included); for auto its"
        " `window_throughputs`, `max_iters`, `stable` and, when not stable, the `reason`"
    )
    noisy: bool | None = doc(
        "the run's verdict (`metrics/noise.py`): windows' CV above 5 %, others (the machine's busy CPU time less the"
        " run's own) busier than 10 % of the cores (at least half a core), or another process on the run's GPUs"
    )
    noise_reasons: list[str] | None = doc("why the run is noisy")
    window_cv: float | None = doc("coefficient of variation of the windows", track="metric", show=("window CV", "%"))
    machine_load: list[MachineLoad] | None = doc(
        "one entry per node, from snapshots by the node's local rank 0 at the start and end of the timed window:"
        " load averages, others' CPU seconds and cores (the machine's busy time less the run's own tree), of them"
        " `steal_cores` (a VM host's other guests), other GPU processes (NVML)"
    )
    stragglers: Stragglers | None = doc(
        "per-rank median of each rank's own work per step (`measure` says what), the median rank, slowest rank and"
        " host, spread, `stragglers` (ranks above `--straggler-pct`) and `flagged`; null for one rank"
    )
    step_phases: StepPhases | None = doc(
        "where the mean step's time went (`metrics/step_phases.py`): `phases_ms` (`data`, `sync_in`, `compute`,"
        " `sync_out`, `update` on the rank that waits most in collectives), `exposed_ms` (collective time of the"
        " slowest rank: communication no compute hid), `straggler_wait_ms` (the fastest rank's wait for the"
        " slowest), `rank_collective_ms`, `steps`, `ranks`, `step_ms` and `measure`; null where the step's phases"
        " are not timed (compiled steps, TP/PP/FSDP layouts, JAX, `--command`)",
        show=("step phases (ms)", "phases"),
    )
    ablation: Ablation | None = doc(
        "`--ablate sync`: after the timed window, the same ranks' steps without gradient synchronisation (DDP's"
        " no_sync()) in windows alternating with synchronised ones: `method`, `step_ms` and `throughput` without"
        " synchronisation, `synced_step_ms` of the paired windows, their `ratio`, `window_throughputs`,"
        " `synced_window_throughputs`, `iters`, `elapsed_s` (all of it, each window's one settling step included); or"
        " `method` null with the `reason` where the step cannot skip it"
        " (one rank, a compiled step, TP/PP/FSDP, JAX). The waterfall's machine sharing and communication come from"
        " `ratio` (docs/scaling.md)",
        show=("step without / with gradient sync (ms)", "ablation"),
    )
    energy: Energy | None = doc(
        "`joules`, `joules_per_sample`, `avg_watts_per_device`, `method` over the timed window, all nodes summed"
        " (NVML energy counter, else power sampling; RAPL on CPUs), or null values with the `reason`",
        show=("energy (J)", "energy"),
    )
    flops_per_iteration: float | None = doc(
        "FLOPs of one iteration counted by FlopCounterMode on the meta device at the run's shapes, else the"
        " workload's formula (GPT adds `flops_per_iteration_formula`, the published formula)",
        show=("FLOPs per iteration", ".4g"),
    )
    flops_source: str | None = doc("where `flops_per_iteration` comes from")
    tflops_per_device: float | None = doc(
        "achieved TFLOP/s per device", track="metric", show=("TFLOP/s per device", ".4g")
    )
    mfu: float | None = doc(
        "model FLOPs utilisation against `mfu_peak_tflops` (`metrics/flops.py`); an unknown device leaves it null"
        " with the reason in `mfu_note`, never a fallback",
        track="metric",
        show=("MFU", "mfu"),
    )
    mfu_note: str | None = doc("why MFU is null")
    mfu_peak_tflops: float | None = doc("the device's dense peak TFLOP/s (`metrics/peaks.py`)")
    mfu_peak_source: str | None = doc("where the peak comes from")
    mfu_peak_device: str | None = doc("the device name the peak table matched")
    mfu_peak_note: str | None = doc("why no peak")
    flops_convention: str | None = doc("which FLOPs the peak counts")
    parallel: Parallel | None = doc(
        "GPT: the layout (`dp`, `tp`, `pp`, ..., `global_batch_size`); Llama: the mesh (`pp`, `dp_replicate`,"
        " `dp_shard`, `cp`, `tp`), `dp`, the batches and the pipeline schedule"
    )
    report_case: str | None = doc(
        "GPT: the case's published short name (`DP_8x1x1_16_1536x16`); Llama: size, layout, sequence and batches"
        " (`llama3-8b_fsdp8_s8192_gbs16`)",
        track="param",
    )
    report_group: str | None = doc(
        "GPT: the published name's prefix, the layouts table's group (`DP_8x1x1`); Llama: the kinds of parallelism"
        " (`FSDP+TP`)",
        track="param",
    )
    tokens_per_s: float | None = doc(
        "GPT, Llama: throughput x sequence length", track="metric", show=("tokens/s", ".1f")
    )
    tokens_per_s_per_device: float | None = doc("GPT, Llama: tokens/s / world size", track="metric")
    flops_per_iteration_formula: float | None = doc(
        "GPT, Llama: the published formula's FLOPs per iteration, the MFU basis where no count exists"
    )
    flops_formula: str | None = doc(
        "GPT: which formula (Narayanan et al. 2021, eq. 3 without recomputation); Llama: 6N + 12·L·H·Q·T per token"
    )
    flops_per_token_causal: int | None = doc(
        "Llama: 6N + 6·L·H·Q·T, MaxText's count (the attention term halved for the causal mask; `metrics/flops.py`)",
        "count",
    )
    flops_per_iteration_causal: float | None = doc("Llama: that count's FLOPs per iteration")
    flops_formula_causal: str | None = doc("Llama: which formula `mfu_causal` uses")
    tflops_per_device_causal: float | None = doc("Llama: TFLOP/s per device by MaxText's causal count")
    mfu_causal: float | None = doc(
        "Llama: MFU by MaxText's causal count against the same `mfu_peak_tflops` as `mfu` (which is the PaLM and"
        " torchtitan count): `mfu` / `mfu_causal` = 1.04-1.125 for Llama 3.1 8B at 4,096-8,192 tokens"
    )
    flops_per_token: int | None = doc(
        "Llama: 6N + 12·L·H·Q·T, the PaLM formula torchtitan, MaxText and NeMo report MFU by (N without the token"
        " embedding; `metrics/flops.py`)",
        "count",
    )
    framework: str | None = doc(
        "`name version` of what ran it (`torch 2.9.1`, `tensorflow 2.20.0`; external runs: `--framework` and the"
        " version the command's interpreter reports, `docs/external-scripts.md`)",
        track="param",
    )
    work: str | None = doc(
        "the work where it differs from the published case (`32px`, `10cls`, `s128`): part of the reports' series key",
        track="param",
    )
    tf32: dict[str, bool] | None = doc(
        "`{matmul, conv}`: whether fp32 matmuls and convolutions ran on TF32 tensor cores (`--fp32-math`, CUDA only);"
        " an fp32 run with `tf32.matmul` true divides MFU by the TF32 peak"
    )
    mfu_peak_precision: str | None = doc("the precision whose peak MFU divides by (`tf32` for fp32 on TF32)")
    mfu_measured: float | None = doc(
        "MFU against the peak `dlperf peak` measured on this exact device and precision, where the run's parent found"
        " the peaks file; null otherwise",
        track="metric",
    )
    mfu_measured_peak_tflops: float | None = doc("that measured peak")
    mfu_measured_peak_source: str | None = doc("where that measured peak comes from")
    origin: Origin = loaded(Origin)


# how a reading note starts where the figure counts the batch the file's path or --batch-size gave, as no kept line
# of the log prints its own (framework_logs/measure.py writes it, reporting/doubts.py flags the row)
GIVEN_BATCH_NOTE = "samples per iteration: the given global batch,"


@dataclass(frozen=True)
class PeerReading:
    """What a peer-log reader adds to a record, for `dlperf extract` and a `--command` run alike
    (docs/peer-logs.md)."""

    __pydantic_config__ = FINITE

    format: str | None = doc("the peer reader that read the log", show=("log format", ""))
    rule: str | None = doc("the rule that read it", show=("rule", ""))
    unit: str | None = doc("what the throughput counts (`samples/s`, `tokens/s`)")
    printed_figure: str | None = doc("the figure the framework printed")
    warmup_iterations: int | None = doc("iterations the reader skipped as warm-up")
    window_iterations: int | None = doc("iterations in the timed window, when the rule fixes one")
    kept_lines: int | None = doc("the log lines the reader kept")
    kept_steps: list[int | None] | None = doc("the first and last step the kept lines cover")
    samples_per_step: SamplesPerStep | None = doc(
        "an instrumented --command: the kept updates' samples as the hook counted them, summed over ranks "
        "(`counted`, mean per update; None: not counted, `declared` taken) and the declared global batch"
    )
    tokens_per_s_counted: float | None = doc(
        "an instrumented --command: the real tokens (attention mask ones, labels not -100) the hook counted in "
        "the kept updates over their time; where given, tokens_per_s is it"
    )
    window_note: str | None = doc("why the window is shorter than the rule asks for (a short log)")
    rejected_lines: int | None = doc("lines whose figures cannot be a speed, left out")
    rejected_reason: str | None = doc("why the first rejected line was left out")
    cross_check: CrossCheck | None = doc(
        "the second reading of the same log (time stamps and counts) beside the printed-rule figure: `agree`,"
        " `ratio`, `reading`, `tolerance` and a `note` saying which reading is right and why (docs/peer-logs.md);"
        " an instrumented run whose script prints a whole-run or running figure adds `like_for_like`: the hook's"
        " figure over the stretch that figure covers (`hook`), the script's (`script`), their `ratio` and the"
        " `stretch` (docs/instrumentation.md)"
    )
    reading_notes: list[str] | None = doc("what the reader noticed on the way (restarts, gaps, merged lines)")
    own_reading: OwnReading | None = doc(
        "the framework's own practice beside the rule's figure, where they differ (torchtitan's and MaxText's last"
        " printed step, DeepSpeed's running average): `figure` (global, the record's unit), `ratio` (throughput /"
        " figure), `reading`"
    )
    contradictions: list[str] | None = doc(
        "what in the log disagrees with itself beyond its noise (ranks of one run printing different figures, a"
        " printed rate against the same lines' step times): the figure is kept and the row flagged"
    )
    peer_metrics: FreeForm | None = doc("other figures the log gives")
    warning: str | None = doc("what to know about the file (several runs in one log)")


@dataclass(frozen=True)
class ExternalRunRecord(RunRecord, PeerReading):
    """A `--command` run: the framework's own script, its log read by a peer reader."""

    command: str | None = doc("the `--command` template")
    log_tail: list[str] | None = doc("a failed run's last 20 log lines")
    label: str | None = doc("the command's label (its group token; `--label`, else its framework)")
    ended_by: str | None = doc("`the command exited`, or the stop rule that ended it (`--stop-after-*`)")
    host_memory_mib_sampled: float | None = doc("peak memory of the command's process tree, sampled every 0.5 s")
    gpu_memory_mib_sampled: float | None = doc("its GPU memory, sampled the same way (NVML; else `memory_note`)")
    memory_note: str | None = doc("why a sampled memory figure is missing")
    threads: list[Threads] | None = doc(
        "per node: the command processes' OMP_NUM_THREADS (`value`), who set it (`set_by`: dlperf, the run's CPU"
        " share, as torchrun's usable cores / processes for a run alone; the environment; or a per-node command's own"
        " launcher), `cores`, `processes`"
    )


@dataclass(frozen=True)
class ExtractedRecord(RunRecord, PeerReading):
    """A record `dlperf extract` made from another framework's log."""

    source: str = doc("`extract`", "name", default="extract")
    file: str | None = doc("the log the record was read from")


@dataclass(frozen=True)
class CommbenchRecord:
    """`dlperf commbench`: collective bandwidth per message size."""

    __pydantic_config__ = FINITE

    schema: str = doc("`dlperf.commbench/1`", "name", default=COMMBENCH_SCHEMA)
    status: Literal["ok", "failed", "diverged"] = doc("`ok` or `failed`", default="ok")
    case: str | None = doc("topology (`1n2g`)")
    world_size: int | None = doc("processes in all", "count")
    error: str | None = doc("the reason in one line, when failed")
    backend: str | None = doc("the collective backend (`nccl`, `gloo`)")
    dtype: str | None = doc("the element type of the messages")
    results: list[CollectiveTime] | None = doc(
        "per collective and message size: time, algbw_gbps, busbw_gbps (null on one rank) and bus_factor"
    )
    fits: dict[str, CollectiveFit] | None = doc(
        "per collective: the latency-bandwidth fit (alpha, beta) of its timings"
    )
    note: str | None = doc("why the bandwidths are null (one rank: no link was crossed)")
    warmup: int | str | None = doc("untimed repeats per size")
    repeats: int | None = doc("timed repeats per size")
    # A commbench run's record also carries a run record's common fields (model, env, ranks...: `RunRecord`'s),
    # loaded as `run`.
    SHARES: ClassVar[type] = RunRecord
    run: RunRecord = loaded(RunRecord)
    origin: Origin = loaded(Origin)


@dataclass(frozen=True)
class MaxbatchRecord:
    """`dlperf maxbatch`: the largest batch that fits, per variant."""

    __pydantic_config__ = FINITE

    schema: str = doc("`dlperf.maxbatch/1`", "name", default=MAXBATCH_SCHEMA)
    status: Literal["ok", "failed", "diverged"] = doc("`ok` or `failed`", default="ok")
    error: str | None = doc("why the search stopped, when it did")
    model: str | None = doc("workload", "name")
    case: str | None = doc("topology (`1n1g`)")
    variant: str | None = doc("the report group without its batch (`fp32`): what the report matches runs on")
    precision: str | None = doc("precision")
    batch_flag: str | None = doc("the flag the search varied (`--batch-size`, `--micro-batch-size`)")
    config: FreeForm | None = doc("the case's other keys, as given")
    headroom_pct: float | None = doc("memory kept free below the device's capacity, in percent")
    memory_cap_gib: float | None = doc("the memory cap each probe ran under (GiB of address space on a CPU)")
    max_batch: int | None = doc("the largest batch per device that ran", "count")
    best_batch: int | None = doc("the batch with the highest throughput")
    best_throughput: float | None = doc("that batch's throughput")
    probes: list[Probe] | None = doc("every probe: batch, status, throughput, peak memory, reason")
    finished_at: float | None = doc("when the search ended (Unix time)")
    origin: Origin = loaded(Origin)


KINDS: tuple[type, ...] = (RunRecord, ExternalRunRecord, ExtractedRecord, CommbenchRecord, MaxbatchRecord)
# A loaded record of any kind (external and extracted runs are run records).
Record = RunRecord | CommbenchRecord | MaxbatchRecord
RUN_KINDS = {"native": RunRecord, "task": RunRecord, "external": ExternalRunRecord, "extracted": ExtractedRecord}
BY_SCHEMA: dict[str, type] = {COMMBENCH_SCHEMA: CommbenchRecord, MAXBATCH_SCHEMA: MaxbatchRecord}


def declared_kind(record: Mapping[str, Any]) -> type:
    """The dataclass a record loads as: by its schema, a run record's by the `kind` it carries (an older one's as
    `upgrade` derives it)."""
    schema = record.get("schema")
    if schema in BY_SCHEMA:
        return BY_SCHEMA[schema]
    return RUN_KINDS.get(record.get("kind") or (_old_kind(record) if schema in OLD_SCHEMAS else ""), RunRecord)


def _old_kind(record: Mapping[str, Any]) -> Kind:
    """The kind of a record written before `dlperf.run/3`, from its keys: the one place a kind is derived."""
    if record.get("schema") == "dlperf.run/3":
        return "native"  # it says any other kind
    if record.get("source") == "extract":
        return "extracted"
    return "external" if record.get("engine") == "external" or "command" in record else "native"


def undeclared_fields(record: dict[str, Any]) -> list[str]:
    """The record's keys that its kind does not declare, sorted, and then those inside its parts that their
    dataclass does not (`energy.new_key`, `ranks[].new_key`): what no reader or docs know, which loading leaves out.
    A part's declared keys are those the codec dumps of it decoded (a value not of its type: DecodeError)."""
    kind = declared_kind(record)
    inside = [
        key
        for part, values in declared_values(kind, record)
        for key in _extra("", values, adapter(part).dump_python(decode(part, values), include=set(values)))
    ]
    return sorted(set(record) - declared_keys(kind)) + sorted(set(inside))


def _extra(path: str, given: Any, known: Any) -> list[str]:
    """The keys in `given` that `known` (it decoded and dumped) lacks, at any depth."""
    if isinstance(given, dict) and isinstance(known, dict):
        return [
            found
            for key, value in given.items()
            for found in ([path + key] if key not in known else _extra(f"{path}{key}.", value, known[key]))
        ]
    if isinstance(given, list) and isinstance(known, list):
        return [found for item, kept in zip(given, known) for found in _extra(path[:-1] + "[].", item, kept)]
    return []


def declared_fields(kind: type) -> tuple[dataclasses.Field, ...]:
    """A kind's fields that are keys of its JSON, in declaration order (not what loading adds)."""
    return tuple(f for f in dataclasses.fields(kind) if not f.metadata.get("loaded"))


def declared_values(kind: type, record: Mapping[str, Any]) -> list[tuple[type, dict[str, Any]]]:
    """A record's values split by the dataclass that decodes them: those its kind declares, then (for a kind that
    shares the run fields, `SHARES`) the shared ones it does not declare itself (a commbench record's `warmup` is
    its own). Validation checks and loading decodes these same groups."""
    own = {f.name: record[f.name] for f in declared_fields(kind) if f.name in record}
    shared = getattr(kind, "SHARES", None)
    if not shared:
        return [(kind, own)]
    return [
        (kind, own),
        (shared, {f.name: record[f.name] for f in declared_fields(shared) if f.name in record and f.name not in own}),
    ]


def declared_keys(kind: type) -> set[str]:
    """The fields a record of this kind may carry: its own, and those of the kind it shares fields with."""
    shared = getattr(kind, "SHARES", None)
    return {f.name for f in declared_fields(kind)} | (declared_keys(shared) if shared else set())


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A record of any readable version in today's shape (in place): derived fields from the old ones. The
    validator has checked the old fields' types first (`parallel` of a schema-1 GPT record)."""
    if record.get("schema") == "dlperf.run/1":
        parallel = record.get("parallel") or {}
        if record.get("model") == "gpt" and parallel.get("dp"):
            per_device = int(parallel["global_batch_size"]) // int(parallel["dp"])
            record["batch_size"] = per_device
            record.setdefault("micro_batch_size", parallel.get("micro_batch_size"))
        record.setdefault("batch_size_per_device", record.get("batch_size"))
        record.setdefault("engine", "torch")
        record.setdefault("table", "layouts" if record.get("model") == "gpt" else "scaling")
    if record.get("schema") in OLD_SCHEMAS:
        record.setdefault("kind", _old_kind(record))
        if record.get("engine") == "external":  # before dlperf.run/4 the external kind was spelled as an engine
            record["engine"] = None
    return record


_BATCH_PREFIX = re.compile(r"^b\d+_")


def batch_free_group(group: str) -> str:
    """A table group without its batch (`b128_fp32` -> `fp32`): what a max-batch search shares with every run of
    its variant, whatever batch they ran at."""
    return _BATCH_PREFIX.sub("", group)
