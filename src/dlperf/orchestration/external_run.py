"""External runs (`--command`) from the parent's side: the command checked before launch, its log read after.

The log is read by the log readers of `dlperf extract` (the format named, or detected), with the run's shape
from its plan instead of a file name, so an external run and an extracted log give the same figures.
"""

from __future__ import annotations

import dataclasses
import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from dlperf.errors import ConfigError, DataError
from dlperf.external.identity import command_line, framework_label
from dlperf.external.template import case_values, check_template, node_processes, rendezvous_for
from dlperf.framework_logs.arrivals import arrival_reading
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.crosscheck import FLAG_WITHIN, TOLERANCE, cross_check
from dlperf.framework_logs.extract import Options, read_run
from dlperf.framework_logs.formats.dlperf_steps import NAME as STEPS_FORMAT
from dlperf.framework_logs.hookranks import Stream, counted_tokens_per_s, merge, write_stream
from dlperf.framework_logs.measure import CoarseLines, Measured
from dlperf.framework_logs.published_names import LogInfo
from dlperf.framework_logs.registry import BY_NAME, FORMATS, get_format
from dlperf.framework_logs.samestretch import hook_over_script_stretch
from dlperf.launch.base import RunJob
from dlperf.launch.external_node import error_at
from dlperf.launch.messages import CommandFacts
from dlperf.metrics.noise import MachineLoad, noise_verdict
from dlperf.records.codec import decode, dump
from dlperf.records.parts import CrossCheck, LikeForLike, SamplesPerStep
from dlperf.records.schema import ExternalRunRecord
from dlperf.spec import RunSpec
from dlperf.workloads import WorkloadPlan

TAIL_LINES = 20
SEARCHED_LINES = 100  # the last lines a failed rank's error is looked for in (launch's own tail: as many)
# The reader's record fields that a --command run states itself: its layout, and what it measured of the run
# (the framework from the script's interpreter, the devices from the ranks), not what the log's format names.
LAYOUT_KEYS = {"schema", "kind", "source", "file", "model", "case", "group", "repeat", "nodes", "devices_per_node",
               "world_size", "batch_size", "global_batch_size", "precision", "status", "error", "framework",
               "accelerator"}  # fmt: skip


def check_command(spec: RunSpec, plan: WorkloadPlan) -> None:
    """Before any process starts: every placeholder is known (the rendezvous ones and the case's keys) and the
    log format, where named, exists."""
    values = case_values(spec.to_dict(), plan.batch_per_device, plan.global_batch, 1)
    check_template(spec.command or "", spec.command_per, values)
    # filled in once here as the agent will (a format code that does not fit its value, e.g. {precision:d})
    rdzv = rendezvous_for(spec.nodes, spec.devices_per_node, "127.0.0.1", 29500, values)
    processes = node_processes(spec.command or "", rdzv, 0, spec.command_per, spec.shell)
    if spec.command_per == "rank" and (launcher := own_launcher(processes[0].argv)):
        raise ConfigError(
            f"--command starts {launcher}, which starts its own workers: dlperf would start it once per device "
            "(--command-per rank, the default); add --command-per node"
        )
    if spec.log_format != "auto":
        get_format(spec.log_format)


# Programs that start a node's workers themselves: (program, the word after it that makes it one, or None)
LAUNCHERS = (("torchrun", None), ("deepspeed", None), ("mpirun", None), ("mpiexec", None), ("horovodrun", None),
             ("accelerate", "launch"), ("lightning", "run"))  # fmt: skip
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch", "deepspeed.launcher.runner")


def own_launcher(argv: list[str]) -> str | None:
    """The launcher a command's program is, where it starts its own workers (`torchrun`, `accelerate launch`,
    `python -m torch.distributed.run`...); None otherwise."""
    words = command_line(argv).words
    if not words:
        return None
    name = os.path.basename(words[0])
    for program, verb in LAUNCHERS:
        if name == program and (verb is None or verb in words[1:2]):
            return f"`{program}{' ' + verb if verb else ''}`"
    if "-m" in words[1:2] and words[2:3] and words[2] in LAUNCHER_MODULES:
        return f"`python -m {words[2]}`"
    return None


def line_patterns(spec: RunSpec) -> tuple[str, ...]:
    """The throughput lines `--stop-after-lines` counts: the named reader's signature, or every reader's but a
    fallback's (a tqdm bar redraws many times a second)."""
    if spec.stop_after_lines is None:
        return ()
    formats = [f for f in FORMATS if not f.fallback] if spec.log_format == "auto" else [get_format(spec.log_format)]
    return tuple(f.signature.pattern for f in formats)


def framework_of(spec: RunSpec, node_facts: list[CommandFacts]) -> str:
    """`name version`: an external run's `--framework` and the version its interpreter reported
    (external.identity), else `unknown`."""
    name = spec.framework or "unknown"
    version = next((c.framework_version for c in node_facts if c.framework_version), None)
    return framework_label(name, version)


def command_fields(spec: RunSpec, node_facts: list[CommandFacts]) -> dict[str, Any]:
    """An external record's evidence beside its log's figures: why the command ended, the sampled memory of
    every node's process tree (peak of the nodes), and each node's machine load with the noise verdict."""
    if not node_facts:
        return {}
    return {
        "ended_by": _first(c.ended_by for c in node_facts) or "the command exited",
        "host_memory_mib_sampled": _peak(c.host_memory_mib_sampled for c in node_facts),
        "gpu_memory_mib_sampled": _peak(c.gpu_memory_mib_sampled for c in node_facts),
        "memory_note": _first(c.memory_note for c in node_facts),
        "machine_load": _dumped(c.machine_load for c in node_facts),
        "threads": _dumped(c.threads for c in node_facts),
    }


def _first(values: Iterable[str | None]) -> str | None:
    return next((value for value in values if value), None)


def _peak(values: Iterable[float | None]) -> float | None:
    return max((value for value in values if value is not None), default=None)


def _dumped(parts: Iterable[Any]) -> list[Any]:
    return [dump(part) for part in parts if part]


def noise_of(figures: ExternalRunRecord, node_facts: list[CommandFacts]) -> dict[str, Any]:
    """The same `noisy` verdict as a native run's: the reader's kept windows and every node's load."""
    loads = [MachineLoad(**dump(c.machine_load)) for c in node_facts if c.machine_load]
    return noise_verdict(figures.window_throughputs or [], loads).as_record()


class ScriptFailed(DataError):
    """The script's log says its run failed (a NaN loss, an error after training): no timing makes that a figure."""


def read_figures(job: RunJob, node_facts: list[CommandFacts] | None = None) -> dict[str, Any]:
    """The run's figures: from dlperf's instrumentation side file where the hook timed the steps (the script's
    own printed figure beside it as the second reading), else the reader's from the run's log (throughput, latency
    where printed, format, rule, lines kept); DataError says why neither gives one."""
    script: dict[str, Any] | None = None
    try:
        script = _script_figures(job, node_facts or [])
    except ScriptFailed:
        raise
    except DataError as error:
        script_error = str(error)
    timed = _timed_figures(job)
    if timed is None:
        if script is None:
            raise DataError(script_error)
        return _script_only(job, script, node_facts or [])
    if script is not None:
        reading = figures_of(script)
        if reading.unit in SAMPLE_UNITS:  # the script's counting unit, where it counts samples
            timed["unit"] = reading.unit
        tokens = getattr(job.spec.workload, "seq_length", None)
        check = _script_check(figures_of(timed), reading, tokens, _same_stretch(job, reading))
    else:
        check = CrossCheck(tolerance=TOLERANCE, note=f"the script's own output gives no figure: {script_error}")
    timed["cross_check"] = dump(check)
    return timed


def figures_of(figures: dict[str, Any]) -> ExternalRunRecord:
    """A reading's fields (the log reader's, the hook's) as the record's types, for reading them."""
    return decode(ExternalRunRecord, figures)


def _script_only(job: RunJob, script: dict[str, Any], node_facts: list[CommandFacts]) -> dict[str, Any]:
    """The reader's figures alone, checked against the arrival times of its lines; why the hook did not time it."""
    reading = figures_of(script)
    script["cross_check"] = dump(_arrival_check(job, reading))
    unplaced = next((c.instrument.not_placed for c in node_facts if c.instrument and c.instrument.not_placed), None)
    if unplaced:
        script["reading_notes"] = [*(reading.reading_notes or []), f"not timed by dlperf's hook: {unplaced}"]
    return script


SAMPLE_UNITS = ("samples/s", "images/s", "sequences/s", "records/s")


SILENT = "the command printed nothing to its standard output or error"


def _and(reason: str, note: str | None) -> str:
    return f"{reason}; {note}" if note else reason


def _script_figures(job: RunJob, node_facts: list[CommandFacts]) -> dict[str, Any]:
    """The log reader's figures from the run's log; where the log gives none and a process closed its output
    while it ran on, the error says where that output went (the agent's `output_note`)."""
    spec, log = job.spec, job.paths.log
    elsewhere = _first(c.output_note for c in node_facts)
    if not log.exists() or log.stat().st_size == 0:
        raise DataError(_and(SILENT, elsewhere))
    info = LogInfo(log, spec.model, spec.nodes, spec.devices_per_node, job.plan.batch_per_device, spec.precision, 1)
    try:
        extracted = read_run(info, Options(format=spec.log_format, warmup=spec.log_warmup, format_flag="--log-format"))
    except CoarseLines as error:
        if spec.instrument == "auto":
            raise  # the hook timed it, or says in the record why it could not
        raise DataError(f"{error}, or with --instrument auto, whose start-up hook times every step") from None
    except DataError as error:
        if elsewhere:
            raise DataError(_and(str(error), elsewhere)) from None
        raise
    reading = figures_of(extracted)
    if reading.status != "ok":
        raise ScriptFailed(str(reading.error))
    return {k: v for k, v in extracted.items() if k not in LAYOUT_KEYS}


def _arrival_check(job: RunJob, script: ExternalRunRecord) -> CrossCheck:
    """The reader's figure against the arrival times of its own lines, where the log gives no other second reading;
    DataError where they disagree by a factor of the run's shape, or the figure is over 2x slower or 4x faster
    than its lines came (the log contradicts itself); a figure 2x to 4x faster is kept with a note (the arrivals
    also time what the script's clock leaves out: crosscheck.LOWER_BOUND_WITHIN)."""
    check = script.cross_check or CrossCheck()
    if check.second is not None:
        return check
    fmt, shape = _format_and_shape(job, script)
    second = arrival_reading(job.paths.log, fmt, script.warmup_iterations, script.window_iterations, shape)
    if second is None:
        return check
    reading = "arrival times of its lines (dlperf's stamps) x the samples between them"
    measured = Measured(throughput=script.throughput, kept=script.kept_lines, first_step=None, last_step=None,
                        latency_ms=None, memory_mib=None, metrics={}, window_note=None, runs=1, second=second,
                        second_reading=reading)  # fmt: skip
    found = cross_check(measured, str(script.rule), str(script.unit), shape, second_is_lower_bound=True)
    return decode(CrossCheck, found)


def _planned_count(check: CrossCheck, hook: float, printed: float, stretch: str, unit: str) -> CrossCheck:
    """The script's figure counts the samples its loop planned; the hook counted fewer over the same stretch (a
    short last batch, an accumulation remainder): the hook's count is what trained, the script's kept beside it."""
    like = hook / printed
    note = (
        f"over {stretch} the script prints {printed:.6g} {unit}, the samples its loop planned over its time, and "
        f"the hook {hook:.6g} ({like:.3g}x), the samples each update trained (fewer: a short last batch or an "
        "accumulation remainder): the hook's count stands, the script's figure kept as the second reading"
    )
    pair = LikeForLike(hook=hook, script=printed, ratio=like, stretch=stretch)
    return dataclasses.replace(check, agree=False, note=note, like_for_like=pair)


def _steps(job: RunJob) -> Path:
    """The run's stream of the hook's updates (framework_logs/hookranks.py); its processes' files are `<it>.*`."""
    return job.paths.log.with_suffix(".steps")


def _timed_figures(job: RunJob) -> dict[str, Any] | None:
    """The figures of the hook's stream (rank 0's updates, the samples every rank counted), with the run's own
    warm-up and window; None where the hook was off, not placed, or timed fewer steps than a figure needs."""
    spec = job.spec
    stream = merge(_steps(job), spec.world_size, spec.devices_per_node) if spec.instrument == "auto" else None
    if stream is None:
        return None
    write_stream(_steps(job), stream)
    warmup = spec.log_warmup if spec.log_warmup is not None else spec.warmup_iters
    warmup = warmup if isinstance(warmup, int) else BY_NAME[STEPS_FORMAT].warmup  # `auto`: the format's own
    info = LogInfo(_steps(job), spec.model, spec.nodes, spec.devices_per_node, job.plan.batch_per_device,
                   spec.precision, 1)  # fmt: skip
    try:
        extracted = read_run(info, Options(format=STEPS_FORMAT, warmup=warmup, window=spec.iters))
    except DataError:
        return None  # too few steps for a figure: the script's own reading stands alone
    figures = {k: v for k, v in extracted.items() if k not in LAYOUT_KEYS}
    kept = figures_of(figures).kept_steps
    counted, note = samples_check(stream, kept, job.plan.global_batch)
    figures["samples_per_step"] = dump(counted)
    figures["tokens_per_s_counted"] = counted_tokens_per_s(stream, tuple(kept)) if kept else None
    figures["reading_notes"] = _hook_notes(stream, figures_of(figures), note)
    return figures


def _hook_notes(stream: Stream, read: ExternalRunRecord, note: str | None) -> list[str]:
    """What the hook's record says: that the hook timed it, what merging found, where the steady-state test placed
    the window (the stream's reading), and how the samples were counted."""
    hook = "timed by dlperf's start-up hook: every update"
    return [hook, *stream.notes, *(read.reading_notes or []), *([note] if note else [])]


def samples_check(stream: Stream, kept: list[int] | None, declared: int) -> tuple[SamplesPerStep, str | None]:
    """The samples per update of the kept steps as counted (summed over ranks) against the declared global batch
    (counted None: not counted, the declared taken), and a note where they differ or something was not counted."""
    if not kept:
        return SamplesPerStep(None, declared), None
    if all(n is None for n in stream.samples.values()):
        return SamplesPerStep(None, declared), (
            f"samples not counted at any update (no DataLoader, trainer batch or model input was seen): the "
            f"declared {declared} per update (--global-batch-size, or --batch-size x devices) was taken on trust"
        )
    return _counted_check([stream.samples.get(s) for s in range(kept[0], kept[1] + 1)], kept[0], declared)


def _counted_check(counts: list[int | None], first: int, declared: int) -> tuple[SamplesPerStep, str | None]:
    """The window's counts (from update `first` on) against the declared batch, in a run that counted some."""
    counted = sum(n or 0 for n in counts) / len(counts)
    missing = [first + i for i, n in enumerate(counts) if n is None]
    if missing:
        return SamplesPerStep(counted, declared), _uncounted(missing, len(counts), declared)
    note = None if counted == declared else _differs(counted, sorted({n or 0 for n in counts}), declared)
    return SamplesPerStep(counted, declared), note


def _differs(counted: float, sizes: list[int], declared: int) -> str:
    """The note for counts that differ from the declared batch: the counted ones make the figure."""
    each = f"{sizes[0]}-{sizes[-1]}" if len(sizes) > 1 else f"{sizes[0]}"
    return (
        f"counted {counted:.6g} samples per update (each {each}, all ranks) where {declared} is declared "
        f"(--global-batch-size, or --batch-size x devices: the samples of one optimizer update): the counted "
        "samples make the figure"
    )


def _uncounted(missing: list[int], updates: int, declared: int) -> str:
    """The note for updates of the window the hook counted nothing for where it counted the others."""
    named = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
    return (
        f"no samples counted at {len(missing)} of the window's {updates} updates ({named}) where the others were: "
        f"they count none, not the declared {declared} (a loader that fetches ahead, as apex's data_prefetcher "
        "does, counts each batch at the update before it: an epoch's first update two batches, its last none; "
        "the window's samples are right to a batch at each end)"
    )


def _same_stretch(job: RunJob, script: ExternalRunRecord) -> tuple[float, float | None, str] | None:
    """The hook's figure over the stretch the script's own figure covers, where its format says which."""
    kept = tuple(script.kept_steps) if script.kept_steps else None
    fmt, shape = _format_and_shape(job, script)
    return hook_over_script_stretch(job.paths.log, _steps(job), fmt, shape, kept)  # type: ignore[arg-type]


def _format_and_shape(job: RunJob, script: ExternalRunRecord) -> tuple[Any, RunShape]:
    """The script's log format (a declared format by its file, not its name) and the run's shape."""
    named = job.spec.log_format
    fmt = get_format(named if named != "auto" else str(script.format))
    return fmt, RunShape(job.plan.global_batch, job.spec.world_size, job.spec.model)


SAME_STRETCH_AGREE = 0.02  # the hook and the script over one stretch: within 2 % they agree


def _script_check(
    timed: ExternalRunRecord,
    script: ExternalRunRecord,
    tokens_per_sample: int | None,
    same: tuple[float, float | None, str] | None,
) -> CrossCheck:
    """The script's own printed figure as the second reading of the instrumented one: both in samples, or the
    script's tokens against the case's samples x its tokens per sample (a GPT case's seq_length). Where the
    script's figure covers another stretch than the run's window, `same` is the hook's figure over that stretch:
    the pair is held like for like (`like_for_like`), DataError where they differ by more than TOLERANCE."""
    printed, unit = cast(float, script.throughput), str(script.unit)  # a reader's figure is never None
    reading = f"the script's own figure ({script.format}, {script.rule} rule, {unit})"
    first, scale = cast(float, timed.throughput), 1
    if unit == "tokens/s" and tokens_per_sample:
        scale, reading = tokens_per_sample, f"{reading}, against the case's samples x {tokens_per_sample}"
    elif unit not in SAMPLE_UNITS:
        return CrossCheck(second=printed, reading=reading, tolerance=TOLERANCE,
                          note="the script counts another unit: not compared")  # fmt: skip
    ratio = first * scale / printed
    check = CrossCheck(agree=abs(ratio - 1) <= TOLERANCE, second=printed, ratio=ratio, reading=reading,
                       tolerance=TOLERANCE)  # fmt: skip
    if same is not None:
        hook, stretch_printed, stretch = same
        planned = fmt.counts_planned if (fmt := BY_NAME.get(str(script.format))) else False
        try:
            return like_for_like(check, hook * scale, stretch_printed or printed, stretch, unit, planned)
        except DataError as error:  # what the hook counted says where the cause lies
            raise DataError(f"{error}; {counted_cause(timed.samples_per_step or SamplesPerStep())}") from None
    return check if check.agree else dataclasses.replace(check, note=_other_steps(script))


def _other_steps(script: ExternalRunRecord) -> str:
    """Why the script's own figure differs from the hook's window: what its reader noticed, else its format."""
    notes = "; ".join(script.reading_notes or []) or "see its format in docs/peer-logs.md"
    return "the script's figure covers other steps or time (its own warm-up, a whole-run average, evaluation): " + notes


def like_for_like(
    check: CrossCheck, hook: float, printed: float, stretch: str, unit: str, planned: bool = False
) -> CrossCheck:
    """`check` judged by the hook's and the script's figures over one stretch: they agree within
    SAME_STRETCH_AGREE; a gap up to TOLERANCE is the noise of where each clock stamps a step, noted; beyond it the
    log contradicts itself, unless the script's figure counts the samples its loop planned (`planned`) and the hook
    counted fewer: then the hook's count of what each update trained stands (`_planned_count`)."""
    like = hook / printed
    agree = abs(like - 1) <= SAME_STRETCH_AGREE
    if planned and 1 / FLAG_WITHIN <= like < 1 - TOLERANCE:
        return _planned_count(check, hook, printed, stretch, unit)
    if abs(like - 1) > TOLERANCE:
        raise DataError(
            f"the log contradicts itself: over {stretch} the script prints {printed:.6g} {unit} but dlperf's "
            f"hook timed {hook:.6g} ({like:.3g}x)"
        )
    covers = f"the record's window and the script's figure cover other steps ({check.ratio:.3g}x); "
    note = covers + (
        f"over {stretch} the hook and the script agree ({like:.4f}x)"
        if agree
        else f"over {stretch} they differ by {like - 1:+.1%}, beyond 2 % but within the noise of where each clock "
        "stamps a step"
    )
    pair = LikeForLike(hook=hook, script=printed, ratio=like, stretch=stretch)
    return dataclasses.replace(check, agree=agree, note=note, like_for_like=pair)


def counted_cause(counts: SamplesPerStep) -> str:
    """What the hook counted, and so where the cause of a contradiction lies: the batch flags only where the hook
    took the declared batch on trust."""
    if counts.counted is None:
        return (
            f"the hook counted no samples and took the declared {counts.declared or 'batch'} an update on trust: "
            "check --batch-size/--global-batch-size, and --log-format"
        )
    if counts.counted == counts.declared:
        return (
            f"the hook counted {counts.counted:.6g} samples an update, as declared, so not the batch flags: the "
            "script counts other samples or time over it than its reader knows (check --log-format)"
        )
    return (
        f"the hook counted {counts.counted:.6g} samples an update where {counts.declared} is declared, and its count "
        "makes its figure: the script counts other samples over it (the declared batch where its reader takes the "
        "batch from the flags, or its own planned count)"
    )


def log_tail(job: RunJob, lines: int = TAIL_LINES) -> list[str]:
    """The last lines of the run's log, else of its console: what a failed record shows."""
    for path in (job.paths.log, job.paths.console):
        if path.exists() and path.stat().st_size:
            with open(path, encoding="utf-8", errors="replace") as f:
                return tail_with_error([line.rstrip("\n") for line in deque(f, maxlen=SEARCHED_LINES)], lines)
    return []


def tail_with_error(lines: list[str], count: int) -> list[str]:
    """The last `count` lines; where the failed rank's own error is above them (torchrun's report after it is
    longer than a tail), that line first in place of the oldest: the tail shows the run's cause."""
    tail = lines[-count:] if count else []
    at = error_at(lines)
    if at is None or at >= len(lines) - len(tail) or not tail:
        return tail
    return [lines[at], *tail[1:]]
