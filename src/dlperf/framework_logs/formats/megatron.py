"""Megatron-LM `training_log` lines (the time stamp in brackets is printed by recent versions):

[2024-05-01 10:00:05] iteration       20/     100 | consumed samples:         2560 | elapsed time per
iteration (ms): 812.4 | throughput per GPU (TFLOP/s/GPU): 181.2 | ... | global batch size:   128 | ...

Rule (the published Megatron-LM-Attention-Benchmark figures, gdn_carry_throughput_bench.md): drop the first 20
iterations, average `elapsed time per iteration` and TFLOP/s/GPU over the rest of the run. Elapsed time is per
iteration, averaged over the log interval; throughput = global batch size / that time (global sequences/s), i.e. the
kept iterations' samples over their summed time. Megatron logs a run's first iteration without resetting its
interval timer (`is_first_iteration`: "to document initialization overhead"), so the next line averages over every
iteration since the start: its interval starts at iteration 0. Its timer stops during evaluation and checkpoint
saving, which the time stamps include. The planned length (`iteration i/ N`) tells runs apart; Slurm and torchrun
prefixes are stripped beforehand.

Megatron-Bridge (NeMo's trainer on Megatron-core, `megatron.bridge.training.utils.train_utils.training_log`) prints
the same line from its own loop, and on rank 0 before it `Step Time : 4.65s GPU utilization: 59892.5TFLOP/s/GPU`
(`MODEL_TFLOP/s/GPU` since late 2025): the same interval's time in seconds, and FLOPs the model's configured
`seq_length` gives, which need not be the data's (the fixture's 59,892.5 TFLOP/s per H100 is none a device can do).
That line is not read. Bridge has no first-iteration exception: its interval timer is reset at every line, so where
the log holds a `Step Time` line the line after iteration 1 times that interval alone, not the run from its start.

Megatron-DeepSpeed (Microsoft's, BigScience's BLOOM) prints the same line with `elapsed time per iteration (s)` in
seconds and `samples per second` (training.py `training_log`: the global batch over the same elapsed time): that is
each line's second reading, so a printed rate that contradicts its own step time (or the batch given) shows.

A mixture-of-experts run (Megatron-Core's `track_moe_metrics`) prints its routers' auxiliary losses in the same
line, each averaged over the MoE layers and the log interval: `load_balancing_loss` (`aux_loss`),
`seq_load_balancing_loss`, `global_load_balancing_loss`, `z_loss`. They are kept in `peer_metrics` under those
names, the mean over the kept lines (1.0 is perfect balance for the load-balancing losses); tokens per expert and
the per-layer values go to TensorBoard / W&B only, never this line.

ALCF's fork (argonne-lcf/Megatron-DeepSpeed, `training_log`) prints the fields as `iteration=  N/  M |
consumed_samples= ... | elapsed_time_per_iteration_ms= ... | global_batch_size= ... | samples_per_second= ...`.
These logs hold DeepSpeed's engine lines too (`[Rank 0] step=`, its ThroughputTimer's, its pipeline engine's
`steps: N loss: ...`): the iteration lines are the log's, whatever engine line comes first (extract.py's detection;
the timer times a part of each iteration). Where an iteration line prints no `global batch size` (Megatron-LM
v1.1.5 under DeepSpeed, 2021), the engine's printed configuration (`[config.py:...:print]   train_batch_size ....
1024`, the global batch Megatron-DeepSpeed gives it) is its batch, before the file's path.

Every field of the line ends with ` |`, so an iteration line that does not end so was cut where a terminal or a
post wrapped it (BLOOM-176B's chronicles: 153 columns, `| global batch size: 2048 |` on the line after): the lines
after it that hold a field separator and start no record of their own are its rest, joined up to the one that
ends so (at most WRAP_MAX_PARTS; a wrap just after a ` |` ends the record there). textlines.rejoin_wrapped puts
back only records whose first part no format recognises, and this one's is recognised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.framework_logs.base import (
    NUMBER,
    InOrder,
    LogFormat,
    Point,
    RunShape,
    stamp_in,
    to_float,
)
from dlperf.framework_logs.formats.deepspeed import CONFIG_BATCH, PRINTED_BATCH, STAMP
from dlperf.framework_logs.textlines import WRAP_MAX_PARTS

ITERATION = re.compile(r"\biteration(?:\s+|=\s*)(\d+)/\s*(\d+) \|")
PAUSE = re.compile(r"saving checkpoint at iteration|validation loss at ")  # the interval timer stops for these
BRIDGE = re.compile(r"\bStep Time : \d+(?:\.\d+)?s GPU utilization: ")  # Megatron-Bridge's rank-0 line
MOE = re.compile(rf"\| ((?:[a-z]+_)*load_balancing_loss|z_loss): +({NUMBER})")  # the routers' aux losses, MoE runs

# ALCF's Megatron-DeepSpeed (argonne-lcf, AuroraGPT) prints the same fields as `key=value`
KEYS = {
    "elapsed time per iteration (ms)": "elapsed_time_per_iteration_ms",
    "global batch size": "global_batch_size",
    "samples per second": "samples_per_second",
    "consumed samples": "consumed_samples",
}


def _field(name: str) -> re.Pattern[str]:
    """A field's `| name: value` (or ALCF's `| key=value`)."""
    key = f"|{KEYS[name]}=\\s*" if name in KEYS else ""
    return re.compile(rf"\| (?:{re.escape(name)}: +{key})({NUMBER})")


FIELDS = {
    name: _field(name)
    for name in (
        "elapsed time per iteration (ms)",
        "elapsed time per iteration (s)",
        "global batch size",
        "samples per second",
        "consumed samples",
        "throughput per GPU (TFLOP/s/GPU)",
    )
}


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    after_first: tuple[int, int | None] | None = None  # (run, the step after its iteration 1): timed from the start
    between = _Between()
    for line in _records(lines):
        iteration = ITERATION.search(line)
        if not iteration:
            between.see(line)
            continue
        fields = {name: to_float(m[1]) for name, pattern in FIELDS.items() if (m := pattern.search(line))}
        ms = _iteration_ms(fields)
        if ms is None:
            continue
        step, run = int(iteration[1]), int(iteration[2])
        after_first = _after_first(after_first, step, run)
        from_start = after_first is not None and after_first[1] == step and not between.bridge
        yield _point(line, fields, (step, ms, run), (from_start, between.paused), between.engine_batch)
        between.paused = False


class _Between:
    """What the lines between iteration lines tell: a pause of the interval timer since the last one, that the log
    is Megatron-Bridge's, and DeepSpeed's printed train_batch_size (for lines that print no batch)."""

    def __init__(self) -> None:
        self.paused = self.bridge = False
        self.engine_batch: float | None = None

    def see(self, line: str) -> None:
        self.paused = self.paused or PAUSE.search(line) is not None
        self.bridge = self.bridge or BRIDGE.search(line) is not None
        if "train_batch_size" in line and (c := CONFIG_BATCH.search(line)) and int(c[1]) > 0:
            self.engine_batch = int(c[1])


def _records(lines: Iterable[str]) -> Iterator[str]:
    """The lines, an iteration line a wrap cut joined with its rest (the module's docstring)."""
    cut: _Cut | None = None
    for line in lines:
        if cut is not None and cut.take(line):
            if cut.ended():
                yield "".join(cut.parts)
                cut = None
            continue
        if cut is not None:
            yield "".join(cut.parts)
        cut = _Cut(line) if ITERATION.search(line) and not _ends(line) else None
        if cut is None:
            yield line
    if cut is not None:
        yield "".join(cut.parts)


class _Cut:
    """An iteration line a wrap cut, and its rest so far."""

    def __init__(self, line: str) -> None:
        self.parts = [line]

    def take(self, line: str) -> bool:
        """Whether `line` is more of the record (then joined): it holds a field separator, starts no line the
        reader looks at on its own (an iteration, a pause, Bridge's), and the parts are within the wrap's bound."""
        if "|" not in line or len(self.parts) >= WRAP_MAX_PARTS:
            return False
        if any(pattern.search(line) for pattern in (ITERATION, PAUSE, BRIDGE)):
            return False
        self.parts.append(line)
        return True

    def ended(self) -> bool:
        return _ends(self.parts[-1])


def _ends(line: str) -> bool:
    """Megatron ends every field, so its whole line, with ` |`."""
    return line.rstrip().endswith("|")


def _point(
    line: str,
    fields: dict[str, float],
    at: tuple[int, float, int],
    timing: tuple[bool, bool],
    engine_batch: float | None,
) -> Point:
    """An iteration line's point at (step, ms, run); `timing`: (its time is timed from the run's start, the line
    after iteration 1; a pause came before it); `engine_batch` where the line prints no batch of its own."""
    step, ms, run = at
    from_start, paused = timing
    tflops = fields.get("throughput per GPU (TFLOP/s/GPU)")
    moe = tuple((m[1], to_float(m[2])) for m in MOE.finditer(line))
    batch = fields.get("global batch size", engine_batch)
    printed = "global batch size" not in fields and batch is not None
    return Point(
        step=step,
        seconds=ms / 1000,
        batch=batch,
        start=0 if from_start else None,
        timestamp=stamp_in(STAMP, line),
        samples=fields.get("consumed samples"),
        run=run,
        metrics=(() if tflops is None else (("tflops_per_device", tflops),)) + moe,
        paused=paused,
        check=fields.get("samples per second"),
        note=PRINTED_BATCH if printed else None,
    )


def _iteration_ms(fields: dict[str, float]) -> float | None:
    """The printed time per iteration in ms (Megatron-DeepSpeed, BLOOM's, prints seconds)."""
    if "elapsed time per iteration (ms)" in fields:
        return fields["elapsed time per iteration (ms)"]
    seconds = fields.get("elapsed time per iteration (s)")
    return seconds * 1000 if seconds is not None else None


def _after_first(held: tuple[int, int | None] | None, step: int, run: int) -> tuple[int, int | None] | None:
    """(run, the step after its iteration 1) while the run's lines are its iteration 1 and the one after it: that
    line's time is timed from the run's start."""
    if step == 1:
        return (run, None)
    if held is not None and held[0] == run and held[1] in (None, step):
        return (run, step)
    return None


FORMATS = (
    LogFormat(
        name="megatron",
        description="Megatron-LM and Megatron-Bridge `iteration i/n | ... elapsed time per iteration (ms) | "
        "TFLOP/s/GPU` lines",
        signature=InOrder(
            (
                r"\biteration(?:\s+|=\s*)\d+/\s*\d+ \|",
                r"elapsed time per iteration \((?:ms|s)\): |\| elapsed_time_per_iteration_ms=",
            )
        ),
        clue=("elapsed time per iteration (", "elapsed_time_per_iteration_ms="),
        reads=("saving checkpoint at iteration", "validation loss at ", "Step Time : "),
        read=read,
        rules=("printed", "timestamp"),
        warmup=20,
        printed_from="seconds",
        unit="sequences/s",
        check_reading="printed samples per second (Megatron-DeepSpeed: the global batch over the same time)",
        practice="Megatron-LM-Attention-Benchmark docs: first 20 iterations dropped, the rest of the run averaged; "
        "sequences/s = global batch size / elapsed time per iteration",
    ),
)
