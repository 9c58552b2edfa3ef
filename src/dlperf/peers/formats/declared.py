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


@functools.lru_cache(maxsize=16)
def load(name: str) -> PeerFormat:
    """The format declared in the YAML file `name`; ConfigError says what is wrong with it."""
    import yaml

    path = Path(name)
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
    unit = spec.get("unit", "samples/s")
    if unit not in UNITS:
        raise _fail(path, f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    printed = spec.get("printed", "global")
    if printed not in ("global", "per device"):
        raise _fail(path, f"printed must be `global` or `per device`, got {printed!r}")
    time_unit = spec.get("step_time_unit", "s")
    if time_unit not in ("s", "ms"):
        raise _fail(path, f"step_time_unit must be s or ms, got {time_unit!r}")
    per_second = 1000.0 if time_unit == "ms" else 1.0
    scaled = printed == "per device"

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        steps = StepCounter()
        for text in lines:
            m = line.search(text)
            if not m or m["iteration"] is None:
                continue
            epoch = int(m["epoch"]) if "epoch" in groups and m["epoch"] is not None else None
            speed = seconds = None
            if "throughput" in groups and m["throughput"] is not None:
                speed = to_float(m["throughput"]) * (shape.world_size if scaled else 1)
            if "step_time" in groups and m["step_time"] is not None:
                seconds = to_float(m["step_time"]) / per_second
                if speed is None and seconds > 0:
                    speed = shape.global_batch / seconds
            loss = (("loss", to_float(m["loss"])),) if "loss" in groups and m["loss"] is not None else ()
            stamp = iso_time(m["time"]) if "time" in groups and m["time"] is not None else None
            yield Point(step=steps(epoch, int(m["iteration"])), speed=speed, seconds=seconds, timestamp=stamp,
                        metrics=loss)  # fmt: skip

    return PeerFormat(
        name=str(spec.get("name") or path.stem),
        description=str(spec.get("description") or f"declared in {path}"),
        signature=line,
        read=read,
        rules=("printed", "timestamp") if "time" in groups else ("printed",),
        warmup=_count(path, spec, "warmup", 0) or 0,
        window=_count(path, spec, "window", None),
        printed_from="speed" if "throughput" in groups else "seconds",
        unit=unit,
        printed=printed,
        practice=f"declared in {path}: mean of the printed figure after the warm-up",
    )


def is_declared(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))
