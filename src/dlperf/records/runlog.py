"""dlperf's own log format: a config header, then one line per timing window.

    [dlperf] config {"model": "resnet50", ..., "global_batch_size": 256, "world_size": 2}
    [dlperf] warmup done iters 10 first_step_s 3.210 elapsed_s 5.432 time 1763829990.000000
    [dlperf] warmup done iters 10 first_step_s 0.410 elapsed_s 1.432 compile_s 63.100 time 1763829990.000000
    [dlperf] iter 20/100 loss 6.912345 samples/s 1234.56 ms/iter 207.35 time 1763830000.123456

`iter` counts timed iterations (warm-up excluded); `samples/s` and `ms/iter` are the window's own;
`time` is the Unix time stamp at the window's end. The warm-up line says how long start-up and compiling
(`first_step_s`, the first step alone) and the whole warm-up (`elapsed_s`) took, and, where the step was compiled
ahead of its first run (JAX/XLA), how long that took before the warm-up (`compile_s`). Files are appended and flushed
line by line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

PREFIX = "[dlperf]"
WINDOW_RE = re.compile(
    r"^\[dlperf\] iter (?P<iter>\d+)/(?P<total>\d+) loss (?P<loss>\S+) samples/s (?P<speed>[\d.]+) "
    r"ms/iter (?P<ms>[\d.]+) time (?P<time>[\d.]+)$"
)
WARMUP_RE = re.compile(
    r"^\[dlperf\] warmup done iters (?P<iters>\d+) first_step_s (?P<first>[\d.]+) elapsed_s (?P<elapsed>[\d.]+) "
    r"(?:compile_s (?P<compile>[\d.]+) )?time (?P<time>[\d.]+)$"
)
CONFIG_RE = re.compile(r"^\[dlperf\] config (?P<json>\{.*\})$")


@dataclass(frozen=True)
class WindowLine:
    iteration: int
    total: int
    loss: float | None
    samples_per_s: float
    ms_per_iter: float
    timestamp: float


def format_window(line: WindowLine) -> str:
    loss = "nan" if line.loss is None else f"{line.loss:.6f}"
    return (
        f"{PREFIX} iter {line.iteration}/{line.total} loss {loss} samples/s {line.samples_per_s:.2f} "
        f"ms/iter {line.ms_per_iter:.3f} time {line.timestamp:.6f}"
    )


def parse_window(text: str) -> WindowLine | None:
    match = WINDOW_RE.match(text.strip())
    if not match:
        return None
    loss = float(match["loss"])
    return WindowLine(
        iteration=int(match["iter"]),
        total=int(match["total"]),
        loss=None if loss != loss else loss,
        samples_per_s=float(match["speed"]),
        ms_per_iter=float(match["ms"]),
        timestamp=float(match["time"]),
    )


@dataclass(frozen=True)
class WarmupLine:
    iters: int
    first_step_s: float
    elapsed_s: float
    timestamp: float
    compile_s: float | None = None  # ahead-of-time compiling before the first step (JAX/XLA), not in elapsed_s


def format_warmup(line: WarmupLine) -> str:
    compiled = f"compile_s {line.compile_s:.3f} " if line.compile_s is not None else ""
    return (
        f"{PREFIX} warmup done iters {line.iters} first_step_s {line.first_step_s:.3f} "
        f"elapsed_s {line.elapsed_s:.3f} {compiled}time {line.timestamp:.6f}"
    )


def parse_warmup(text: str) -> WarmupLine | None:
    match = WARMUP_RE.match(text.strip())
    if not match:
        return None
    compiled = float(match["compile"]) if match["compile"] else None
    return WarmupLine(
        int(match["iters"]), float(match["first"]), float(match["elapsed"]), float(match["time"]), compiled
    )


def parse_config(text: str) -> dict[str, Any] | None:
    match = CONFIG_RE.match(text.strip())
    return json.loads(match["json"]) if match else None


class RunLogWriter:
    """Rank 0's log: every line reaches the file as it is produced."""

    def __init__(self, path: str | Path) -> None:
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def config(self, values: dict[str, Any]) -> None:
        self._write(f"{PREFIX} config {json.dumps(values, sort_keys=True)}")

    def warmup(self, line: WarmupLine) -> None:
        self._write(format_warmup(line))

    def window(self, line: WindowLine) -> None:
        self._write(format_window(line))

    def _write(self, text: str) -> None:
        self._file.write(text + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
