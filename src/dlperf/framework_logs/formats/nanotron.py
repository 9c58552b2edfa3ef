"""nanotron's iteration lines (`DistributedTrainer.train_step_logs`, src/nanotron/trainer.py), numbers in its
`human_format` (3 significant digits, K/M/G/T suffixes):

01/17/2024 13:47:27 [INFO|DP=0|PP=0|TP=0|ip-26-0-160-225]: iteration: 992 / 1000 | consumed_tokens: 635K |
elapsed_time_per_iteration_ms: 41.2 | tokens_per_sec: 15.5K | tokens_per_sec_per_gpu: 1.94K | global_batch_size: 20 |
lm_loss: 10.6 | ...

What the figures are (nanotron trainer.py, `train_step_logs`, 2024-2025): `elapsed_time_per_iteration_ms` is the
logged iteration alone, from its start (`iteration_start_time`, set before its data) to the log after a barrier and
a CUDA synchronise; `tokens_per_sec` = global_batch_size x sequence_length / that time, GLOBAL;
`tokens_per_sec_per_gpu` = tokens_per_sec / the world size (so their ratio is the job's device count). Newer
nanotron names the time `time_per_iteration_ms` and prints global_batch_size in tokens.

Rule (the seeds' method): the first 5 iterations skipped; the tokens of the logged iterations after them over
their summed time: each line's tokens are global_batch_size x sequence_length where the `[Start training]` line
states the sequence length (global_batch_size itself where it counts tokens, as later nanotron prints it),
whichever tokens_per_sec x time confirms; else tokens_per_sec x time (3 significant digits each). Where the
counts give the tokens the printed tokens_per_sec is the second reading of each line. The printed rate over the
per-GPU one must be the device count given (--nodes x --devices-per-node): a log read with another device count
contradicts itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from dlperf.errors import DataError
from dlperf.framework_logs.base import InOrder, LogFormat, Point, RunShape, metrics_in, search_at_first

HUMAN = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[KMGTP]?"
SCALE = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
ITERATION = re.compile(r"\biteration: (?P<step>\d+) / \d+ \|")  # where LINE is tried (base.search_at_first)
LINE = re.compile(
    rf"{ITERATION.pattern}.*?\b(?:elapsed_)?time_per_iteration_ms: (?P<ms>{HUMAN}) \| "
    rf"tokens_per_sec: (?P<tps>{HUMAN}) \| tokens_per_sec_per_gpu: (?P<gpu>{HUMAN}) \| "
    rf"global_batch_size: (?P<batch>{HUMAN})"
)
START = re.compile(r"\[Start training\]")
SEQUENCE = re.compile(rf"{START.pattern}.*\| sequence_length: (\d+)")
EXTRA = {
    "tflops_per_device": re.compile(rf"\| model_tflops_per_gpu: ({HUMAN})"),
    "loss": re.compile(rf"\| lm_loss: ({HUMAN})"),
}


def human(text: str) -> float:
    """A number as nanotron's `human_format` prints it (`11.5K`)."""
    return float(text[:-1]) * SCALE[text[-1]] if text[-1] in SCALE else float(text)


def _resolution(text: str) -> float:
    """Half the last printed digit, relative: how far the printed figure can be from the one it rounds."""
    digits = text.rstrip("KMGTP")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return 0.5 * 10**-decimals / abs(float(digits)) if float(digits) else 1.0


def _tokens(batch: float, sequence: int | None, printed: float) -> tuple[float, bool]:
    """An iteration's tokens and whether the line's own counts give them (then its printed rate is a second
    reading): global_batch_size x the sequence length (samples, 2024-2025), or global_batch_size itself (tokens,
    later nanotron), whichever the printed rate x time (3 significant digits each: within 2 %) confirms; else that
    product alone."""
    for tokens in (batch * sequence if sequence else None, batch):
        if tokens and printed > 0 and abs(tokens / printed - 1) <= 0.02:
            return tokens, True
    return printed, False


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    sequence = None
    for line in lines:
        if "iteration: " not in line:
            if "[Start training]" in line and (s := search_at_first(SEQUENCE, START, line)):
                sequence = int(s[1])
            continue
        if (m := search_at_first(LINE, ITERATION, line)) is None:
            continue
        yield _point(m, line, sequence, shape)


def _point(m: re.Match[str], line: str, sequence: int | None, shape: RunShape) -> Point:
    seconds, rate = human(m["ms"]) / 1000, human(m["tps"])
    _check_devices(m, rate, shape)
    tokens, counted = _tokens(human(m["batch"]), sequence, rate * seconds)
    return Point(
        step=int(m["step"]),
        seconds=seconds,
        batch=tokens,
        check=rate if counted and seconds > 0 else None,
        resolution=seconds * _resolution(m["ms"]),
        tokens=sequence,
        metrics=metrics_in(line, EXTRA, human),
    )


def _check_devices(m: re.Match[str], rate: float, shape: RunShape) -> None:
    """The line's global and per-GPU rates must say the devices the file's path gives."""
    per_gpu = human(m["gpu"])
    if per_gpu > 0 and rate > 0 and abs(rate / per_gpu / shape.world_size - 1) > 0.02:
        raise DataError(
            f"its tokens_per_sec / tokens_per_sec_per_gpu ({m['tps']} / {m['gpu']}) say {rate / per_gpu:.3g} "
            f"devices, not the {shape.world_size} given: check --nodes/--devices-per-node (the file's path)"
        )


FORMATS = (
    LogFormat(
        name="nanotron",
        description="nanotron `iteration: i / N | ... elapsed_time_per_iteration_ms: t | tokens_per_sec: r | "
        "tokens_per_sec_per_gpu: g | global_batch_size: b` lines",
        # the `[Start training]` line comes first, and the reader takes the sequence length from it
        signature=InOrder(
            (r"\biteration: \d+ / \d+ \|", r"\b(?:elapsed_)?time_per_iteration_ms: ", r"\| tokens_per_sec: "),
            (r"\[Start training\] ", r"\| sequence_length: \d+"),
        ),
        clue=("| tokens_per_sec: ", "[Start training] "),
        reads=("| sequence_length: ",),
        read=read,
        warmup=5,
        printed_from="seconds",
        unit="tokens/s",
        check_reading="printed tokens_per_sec (global batch x sequence length / the iteration's time)",
        practice="nanotron trainer.py train_step_logs: tokens of the logged iterations after the first 5 over their "
        "summed elapsed_time_per_iteration_ms",
    ),
)
