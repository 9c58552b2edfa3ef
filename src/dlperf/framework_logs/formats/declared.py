"""A log format declared in YAML, so that any script's output is read without code (`--log-format PATH.yaml`):

    line: 'step (?P<iteration>\\d+)/\\d+ .*loss (?P<loss>[\\d.]+) .*(?P<throughput>[\\d.]+) img/s'
    unit: images/s          # samples/s (default), images/s, sequences/s, tokens/s, records/s
    printed: per device     # or global (default): what the throughput group is
    throughput_counts: samples   # or iterations (an it/s figure: x the global batch)
    per: step               # or epoch: `iteration` counts epochs of `steps_per_epoch` (or a `steps` group) steps
    warmup: 10              # iterations skipped (default 0)
    window: 100             # iterations kept after it (default: to the end of the run)

Named groups: `iteration` (required; `epoch` too where the iteration restarts each epoch), and what gives samples
over time: `throughput`, `step_time` (seconds per iteration; `step_time_unit: ms`, or a group `step_time_unit`
capturing `us`/`ms`/`s` from the line itself), or `time` (ISO `2024-05-06 09:02:51[.123]`: time stamps x
iterations x the global batch); optionally `loss`. A format with none of them is refused when it is loaded.
Rates combine as samples over time, never as a mean of rates: each line's figure becomes its iterations' time
(global batch / rate), weighted by the iterations since the line before. In a one-process log, an iteration that
does not advance starts a new epoch (a script printing `32/32` per epoch), never another rank's line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.framework_logs.base import LogFormat, Point, RunShape, StepCounter, iso_time, to_float

UNITS = ("samples/s", "images/s", "sequences/s", "tokens/s", "records/s")
KEYS = {"name", "line", "unit", "printed", "warmup", "window", "step_time_unit", "description", "per",
        "steps_per_epoch", "throughput_counts"}  # fmt: skip
SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _fail(path: Path, what: str) -> ConfigError:
    return ConfigError(f"log format {path}: {what}")


def _count(path: Path, spec: dict[str, Any], key: str, default: int | None) -> int | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(path, f"{key} must be a non-negative number of iterations, got {value!r}")
    return value


# The enumerated keys: default, allowed values, and how the message names them.
CHOICES = {
    "unit": ("samples/s", UNITS, f"one of {', '.join(UNITS)}"),
    "printed": ("global", ("global", "per device"), "`global` or `per device`"),
    "step_time_unit": ("s", tuple(SECONDS), "s, ms or us"),
    "per": ("step", ("step", "epoch"), "step or epoch"),
    "throughput_counts": ("samples", ("samples", "iterations"), "samples or iterations"),
}


def _choice(path: Path, spec: dict[str, Any], key: str) -> str:
    default, allowed, wording = CHOICES[key]
    value = spec.get(key, default)
    if value not in allowed:
        raise _fail(path, f"{key} must be {wording}, got {value!r}")
    return value


@functools.lru_cache(maxsize=16)
def load(name: str) -> LogFormat:
    """The format declared in the YAML file `name`; ConfigError says what is wrong with it."""
    path = Path(name)
    spec = _read_spec(path)
    line = _line_pattern(path, spec)
    groups = set(line.groupindex)
    unit, printed = _choice(path, spec, "unit"), _choice(path, spec, "printed")
    steps = _count(path, spec, "steps_per_epoch", None)
    if _choice(path, spec, "per") == "epoch" and not steps and "steps" not in groups:
        raise _fail(path, "per: epoch needs steps_per_epoch: N or a (?P<steps>...) group: an epoch's iterations")
    reader = _LineReader(
        line,
        per_device=printed == "per device",
        unit=SECONDS[_choice(path, spec, "step_time_unit")],
        per_epoch=_choice(path, spec, "per") == "epoch",
        steps_per_epoch=steps,
        counts_iterations=_choice(path, spec, "throughput_counts") == "iterations",
    )
    figures = bool(groups & {"throughput", "step_time"})
    return LogFormat(
        name=str(spec.get("name") or path.stem),
        description=str(spec.get("description") or f"declared in {path}"),
        signature=line,
        read=reader.read,
        rules=(("printed", "timestamp") if "time" in groups else ("printed",)) if figures else ("timestamp",),
        warmup=_count(path, spec, "warmup", 0) or 0,
        window=_count(path, spec, "window", None),
        printed_from="seconds",
        unit=unit,
        printed=printed,
        practice=f"declared in {path}: samples over time of the lines after the warm-up",
    )


def _read_spec(path: Path) -> dict[str, Any]:
    """The YAML mapping, of known keys only."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise _fail(path, f"cannot read it: {error.strerror or error}") from None
    except yaml.YAMLError as error:
        raise _fail(path, f"not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise _fail(path, "expected a mapping with at least `line: REGEX`")
    if unknown := sorted(set(spec) - KEYS):
        raise _fail(path, f"unknown key(s) {', '.join(map(str, unknown))}: use {', '.join(sorted(KEYS))}")
    return spec


def _line_pattern(path: Path, spec: dict[str, Any]) -> re.Pattern[str]:
    """`line:` compiled, with the groups a reading needs: the iteration and a throughput or a step time."""
    if not isinstance(spec.get("line"), str):
        raise _fail(path, "`line:` must be a regular expression with named groups")
    try:
        line = re.compile(spec["line"])
    except re.error as error:
        raise _fail(path, f"`line:` is not a valid regular expression: {error}") from None
    groups = set(line.groupindex)
    if "iteration" not in groups or not groups & {"throughput", "step_time", "time"}:
        raise _fail(path, "`line:` cannot give samples over time: it needs the named groups (?P<iteration>...) and "
                    "(?P<throughput>...), (?P<step_time>...) or an ISO time stamp (?P<time>...)")  # fmt: skip
    return line


@dataclass(frozen=True)
class _LineReader:
    """Points from the lines `line` matches; a group the regex lacks or the line leaves empty is not read."""

    line: re.Pattern[str]
    per_device: bool  # the printed throughput is one device's
    unit: float  # seconds in the step_time's unit, where the line does not say
    per_epoch: bool = False  # `iteration` counts epochs
    steps_per_epoch: int | None = None
    counts_iterations: bool = False  # the throughput is iterations per second (x the global batch)

    def read(self, lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        epochs_of_one, last = 0, None  # one process: a step that does not advance starts an epoch
        for text in lines:
            m = self.line.search(text)
            if not (m and m["iteration"] is not None):
                continue
            found = m.groupdict()
            iteration = self._iteration(found)
            epoch = _optional_int(found, "epoch")
            if shape.world_size == 1 and epoch is None and last is not None and iteration <= last:
                epochs_of_one += last
            last = iteration
            yield self._point(found, epochs_of_one + steps(epoch, iteration), shape)

    def _iteration(self, found: dict[str, str | None]) -> int:
        """The line's iteration; where it counts epochs, the steps of that many epochs."""
        iteration = int(found["iteration"])  # type: ignore[arg-type]
        if self.per_epoch:
            iteration *= int(found.get("steps") or self.steps_per_epoch or 1)
        return iteration

    def _point(self, found: dict[str, str | None], step: int, shape: RunShape) -> Point:
        speed = seconds = None
        if found.get("throughput") is not None:
            speed = to_float(found["throughput"]) * (shape.world_size if self.per_device else 1)
            speed *= shape.global_batch if self.counts_iterations else 1
            seconds = shape.global_batch / speed if speed > 0 else None
        elif found.get("step_time") is not None:
            unit = SECONDS.get(found.get("step_time_unit") or "", self.unit)
            seconds = to_float(found["step_time"]) * unit
        loss = (("loss", to_float(found["loss"])),) if found.get("loss") is not None else ()
        stamp = iso_time(found["time"]) if found.get("time") is not None else None
        return Point(step=step, speed=speed, seconds=seconds, timestamp=stamp, metrics=loss)


def _optional_int(found: dict[str, str | None], group: str) -> int | None:
    text = found.get(group)
    return int(text) if text is not None else None


def is_declared(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))
