"""A run record's fields from its plan and the launcher's result (schema: dlperf.records.schema): those every
run shares and each kind's figures, which the run's kind (`orchestration/kinds.py`) puts together."""

from __future__ import annotations

import math
from typing import Any

from dlperf import __version__
from dlperf.launch.base import RunJob
from dlperf.launch.messages import Failure, RunResult
from dlperf.metrics.accelerator import accelerator_identity
from dlperf.metrics.stats import latency_summary
from dlperf.orchestration.evidence_fields import causal_mfu, evidence_fields, flops_fields
from dlperf.records.schema import SCHEMA
from dlperf.secrets import mask
from dlperf.workloads import get_workload


def common_fields(
    job: RunJob,
    result: RunResult,
    env: dict[str, Any],
    times: tuple[float, float],
    failure: Failure | None,
    *,
    kind: str,
    framework: str,
) -> dict[str, Any]:
    """The fields every run record shares: the spec, its kind and what ran it (`name version`), the plan's derived
    values, status and environment."""
    spec, plan = job.spec, job.plan
    return {
        "schema": get_workload(spec.model).record_schema or SCHEMA,
        "kind": kind,
        "dlperf_version": __version__,
        "model": spec.model,
        "engine": spec.engine,
        "framework": framework,
        "case": spec.topology,
        "group": plan.group,
        "table": plan.table,
        "repeat": job.repeat,
        "nodes": spec.nodes,
        "devices_per_node": spec.devices_per_node,
        "world_size": spec.world_size,
        "config": {**spec.to_dict(), "command": mask(spec.command) if spec.command else None},
        **plan.record_fields,
        "status": "failed" if failure else "ok",
        "error": failure.error if failure else None,
        "started_at": times[0],
        "finished_at": times[1],
        "log": job.paths.log.name,
        "env": env,
        "accelerator": _accelerator(job, result, env),
    }


def _accelerator(job: RunJob, result: RunResult, env: dict[str, Any]) -> dict[str, Any]:
    """What rank 0 ran on: its device as the ranks reported it, else (no rank reported) what the spec asked for on
    the node's devices."""
    spec, measured = job.spec, result.measured
    if measured and measured.ranks:
        rank0 = min(measured.ranks, key=lambda r: r.rank)
        return accelerator_identity(measured.device_type, rank0.device, env, spec.world_size, spec.devices_per_node)
    kind = "cpu" if spec.device == "cpu" else None
    return accelerator_identity(kind, None, env, spec.world_size, spec.devices_per_node)


def external_record(job: RunJob, result: RunResult, record: dict[str, Any], figures: dict) -> dict[str, Any]:
    """An external command's run: the peer reader's figures from its log, and the workload's derived metrics, which
    start from samples/s whatever the reading's unit."""
    from dlperf.orchestration.external_run import figures_of, noise_of  # see kinds._external

    spec = job.spec
    record.update(figures)
    reading = figures_of(figures)
    throughput, unit = reading.throughput, reading.unit
    record["throughput_per_device"] = throughput / spec.world_size
    record["hosts"] = sorted({n["node"] for n in result.node_envs if n.get("node")}) or [record["env"].get("host")]
    record.update(noise_of(reading, result.node_facts))
    notes = list(reading.reading_notes or [])
    tokens = getattr(spec.workload, "seq_length", None)
    samples_per_s = throughput if unit != "tokens/s" else throughput / tokens if tokens else None
    if samples_per_s is None:
        notes.append("the figure is in tokens/s and the case has no --seq-length: no TFLOP/s or MFU derived from it")
    else:
        derived = _flops(job, record, None, "an external command: its FLOPs are not counted", samples_per_s)
        record.update(derived)
        if unit != "tokens/s" and tokens:  # a tokens/s reading is the script's own count of its tokens
            counted = reading.tokens_per_s_counted
            record.update(_counted_tokens(samples_per_s * tokens, counted, spec.world_size, notes))
    if notes:
        record["reading_notes"] = notes
    return record


def _counted_tokens(assumed: float, counted: float | None, world_size: int, notes: list[str]) -> dict:
    """tokens_per_s as the data says where the hook counted each batch's real tokens (an attention mask's ones,
    labels that are not -100: padding left out), else said in `notes` to be assumed (every sample --seq-length
    tokens, `assumed`)."""
    if counted is None:
        notes.append("tokens/s assumed: every sample --seq-length tokens (no batch said which tokens are padding)")
        return {}
    notes.append(f"tokens/s counted from the data's real tokens ({counted / assumed:.4g}x the --seq-length figure: "
                 "padding left out)")  # fmt: skip
    return {"tokens_per_s": counted, "tokens_per_s_per_device": counted / world_size}


def _flops(
    job: RunJob,
    record: dict[str, Any],
    counted: float | None,
    note: str | None,
    samples_per_s: float | None = None,
    device_type: str | None = None,
) -> dict[str, Any]:
    """The workload's derived figures from the run's samples/s (the throughput where not given), then FLOPs and MFU
    (`flops_fields`)."""
    spec, throughput = job.spec, samples_per_s or record["throughput"]
    derived = get_workload(spec.model).derived_metrics(spec, job.plan, throughput)
    device = (record.get("ranks") or [{}])[0].get("device") or "cpu"
    formula = derived.get("flops_per_iteration_formula")
    seconds = record["global_batch_size"] / throughput
    fields = flops_fields(spec, seconds, device, formula, counted, note, device_type)
    return {**derived, **fields, **causal_mfu(fields, derived.get("flops_per_iteration_causal"), seconds, spec)}


def _ranks_fields(result: RunResult) -> dict[str, Any]:
    measured = result.measured
    return {
        "peak_memory_mib": measured.peak_memory_mib,
        "device_type": measured.device_type,
        "ranks": [
            {k: v for k, v in vars(r).items() if k not in ("own_step_ms", "phase_ms", "machine_load", "energy")}
            for r in measured.ranks
        ],
        "hosts": sorted({r.host for r in measured.ranks}),
    }


def task_record(job: RunJob, result: RunResult, record: dict[str, Any]) -> dict[str, Any]:
    """A rank task of its own (commbench): the workload makes its record from rank 0's output."""
    measured = result.measured
    record.update(_ranks_fields(result))
    workload = get_workload(job.spec.model)
    record.update(workload.task_record(job.spec, job.plan, measured.output or {}, measured.device_type))
    return record


def measured_record(job: RunJob, result: RunResult, record: dict[str, Any]) -> dict[str, Any]:
    """A timed-loop run: throughput, windows, latency, memory, the evidence and MFU; a non-finite loss makes it
    `diverged`."""
    spec, measured = job.spec, result.measured
    m = measured.measurement
    record.update(_ranks_fields(result))
    record.update(
        {
            "throughput": measured.throughput,
            "throughput_per_device": measured.throughput / spec.world_size,
            "window_throughputs": m.window_throughputs,
            "latency_ms": latency_summary(m.step_ms),
            "elapsed_s": m.elapsed_s,
            "first_step_s": m.first_step_s,
            "compile_s": m.compile_s if m.compile_s is not None else (m.first_step_s if spec.compile else None),
            "loss_first": m.loss_first,
            "loss_last": m.loss_last,
            **m.model,  # parameters and gradient_bytes of rank 0's model (its shard under TP/PP/FSDP)
        }
    )
    record.update(evidence_fields(spec, measured))
    record.update(_flops(job, record, measured.flops_per_iteration, measured.flops_note, None, measured.device_type))
    losses = [m.loss_first, m.loss_last]
    if any(isinstance(loss, float) and not math.isfinite(loss) for loss in losses):
        record["status"] = "diverged"
        record["error"] = (
            f"the loss diverged (first {m.loss_first}, last {m.loss_last}): the speed of a diverged run is not "
            "comparable; lower --lr, or use fp32 or bf16 instead of fp16"
        )
    return record


def strict_json(value: Any) -> Any:
    """The value with every NaN or infinity as None: records are strict JSON (`null`), readable by any parser."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value
