"""A log format declared in YAML, so that any script's output is read without code (`--log-format PATH.yaml`):

    line: 'step (?P<iteration>\\d+)/\\d+ .*loss (?P<loss>[\\d.]+) .*(?P<throughput>[\\d.]+) img/s'
    unit: images/s          # samples/s (default), images/s, sequences/s, tokens/s, records/s
    printed: per device     # or global (default): what the throughput group is
    warmup: 10              # iterations skipped (default 0)
    window: 100             # iterations kept after it (default: to the end of the run)

Named groups: `iteration` (required; `epoch` too where the iteration restarts each epoch), one of `throughput` or
`step_time` (seconds per iteration, or milliseconds with `step_time_unit: ms`; the figure is then global batch /
time), and optionally `loss`. Where the lines carry a time stamp (group `time`, ISO `2024-05-06 09:02:51[.123]`),
time stamps x iterations x the global batch are the second reading.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.peers.base import PeerFormat, Point, RunShape, StepCounter, iso_time, to_float

UNITS = ("samples/s", "images/s", "sequences/s", "tokens/s", "records/s")
KEYS = {"name", "line", "unit", "printed", "warmup", "window", "step_time_unit", "description"}


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
    "step_time_unit": ("s", ("s", "ms"), "s or ms"),
}


def _choice(path: Path, spec: dict[str, Any], key: str) -> str:
    default, allowed, wording = CHOICES[key]
    value = spec.get(key, default)
    if value not in allowed:
        raise _fail(path, f"{key} must be {wording}, got {value!r}")
    return value


@functools.lru_cache(maxsize=16)
def load(name: str) -> PeerFormat:
    """The format declared in the YAML file `name`; ConfigError says what is wrong with it."""
    path = Path(name)
    spec = _read_spec(path)
    line = _line_pattern(path, spec)
    groups = set(line.groupindex)
    unit, printed = _choice(path, spec, "unit"), _choice(path, spec, "printed")
    per_second = 1000.0 if _choice(path, spec, "step_time_unit") == "ms" else 1.0
    return PeerFormat(
        name=str(spec.get("name") or path.stem),
        description=str(spec.get("description") or f"declared in {path}"),
        signature=line,
        read=_LineReader(line, printed == "per device", per_second).read,
        rules=("printed", "timestamp") if "time" in groups else ("printed",),
        warmup=_count(path, spec, "warmup", 0) or 0,
        window=_count(path, spec, "window", None),
        printed_from="speed" if "throughput" in groups else "seconds",
        unit=unit,
        printed=printed,
        practice=f"declared in {path}: mean of the printed figure after the warm-up",
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
    if "iteration" not in groups or not groups & {"throughput", "step_time"}:
        raise _fail(path, "`line:` needs the named groups (?P<iteration>...) and (?P<throughput>...) or "
                    "(?P<step_time>...)")  # fmt: skip
    return line


@dataclass(frozen=True)
class _LineReader:
    """Points from the lines `line` matches; a group the regex lacks or the line leaves empty is not read."""

    line: re.Pattern[str]
    per_device: bool  # the printed throughput is one device's
    per_second: float  # step_time units in a second

    def read(self, lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for text in lines:
            m = self.line.search(text)
            if m and m["iteration"] is not None:
                yield self._point(m.groupdict(), steps, shape)

    def _point(self, found: dict[str, str | None], steps: StepCounter, shape: RunShape) -> Point:
        epoch = int(found["epoch"]) if found.get("epoch") is not None else None
        speed = seconds = None
        if found.get("throughput") is not None:
            speed = to_float(found["throughput"]) * (shape.world_size if self.per_device else 1)
        if found.get("step_time") is not None:
            seconds = to_float(found["step_time"]) / self.per_second
            if speed is None and seconds > 0:
                speed = shape.global_batch / seconds
        loss = (("loss", to_float(found["loss"])),) if found.get("loss") is not None else ()
        stamp = iso_time(found["time"]) if found.get("time") is not None else None
        return Point(step=steps(epoch, int(found["iteration"])), speed=speed, seconds=seconds, timestamp=stamp,
                     metrics=loss)  # fmt: skip


def is_declared(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))
