"""Bandwidth of collectives from their timings, and a latency/bandwidth (alpha-beta) fit per collective.

Sizes follow nccl-tests: `size_bytes` is the whole buffer (the all-reduce buffer, all-gather's output,
reduce-scatter's input, the message sent point-to-point). Algorithm bandwidth is size / time; bus bandwidth
multiplies it by the factor that makes it comparable to a link's speed whatever the number of ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dlperf.errors import ConfigError, clip
from dlperf.records.load import RecordLike, as_record
from dlperf.records.schema import CommbenchRecord

OPS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
SCHEMA = "dlperf.commbench/1"
ONE_RANK = (
    "one rank: nothing crosses a link (a collective over one rank is a no-op or a local copy), so no bandwidth "
    "is reported; run 2 ranks or more"
)


def bus_factor(op: str, world_size: int) -> float:
    """Bytes each rank moves per byte of buffer: a ring all-reduce is a reduce-scatter plus an all-gather; an
    all-to-all keeps its own 1/n of the buffer (nccl-tests' alltoall: busbw = algbw x (n-1)/n)."""
    if op not in OPS:
        raise ConfigError(f"unknown collective {op!r}: choose from {', '.join(OPS)}")
    if world_size < 1:
        raise ConfigError(f"world size must be at least 1, got {world_size}")
    n = world_size
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class Timing:
    """Mean seconds per call of one collective at one size, the slowest rank's."""

    op: str
    size_bytes: int
    world_size: int
    seconds: float

    @property
    def algbw(self) -> float:
        """Bytes per second of buffer."""
        return self.size_bytes / self.seconds

    @property
    def busbw(self) -> float:
        return self.algbw * bus_factor(self.op, self.world_size)


@dataclass(frozen=True)
class AlphaBetaFit:
    """time = alpha + beta * bytes, least squares over the sizes measured; r2 and the worst relative error
    say how far a straight line describes the measurements (protocol switches bend it)."""

    op: str
    world_size: int
    alpha_s: float
    beta_s_per_byte: float
    r2: float
    max_rel_error: float
    points: int
    alpha_clamped: bool = False  # least squares put the latency below zero: refit through the origin

    def seconds(self, size_bytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * size_bytes

    @property
    def busbw(self) -> float:
        """Bus bandwidth (bytes/s) of large messages, where the latency term no longer matters."""
        return bus_factor(self.op, self.world_size) / self.beta_s_per_byte


def fit_alpha_beta(op: str, world_size: int, sizes_bytes: Sequence[float], seconds: Sequence[float]) -> AlphaBetaFit:
    """Ordinary least squares of seconds on bytes; two distinct sizes at least. A latency below zero is no
    latency at all (noise around a tiny one, or a protocol switch bending the line): the line is then refitted
    through the origin, alpha 0, and `alpha_clamped` says so, with r2 and the worst error of that line."""
    import numpy as np  # numpy and scipy load only to fit: every command's start-up stays light
    from scipy.stats import linregress

    x = np.asarray(sizes_bytes, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if len(np.unique(x)) < 2:
        raise ConfigError(f"an alpha-beta fit of {op} needs timings at two sizes or more: add sizes to --sizes")
    line = linregress(x, y)
    alpha, beta, clamped = float(line.intercept), float(line.slope), False
    if alpha < 0:
        alpha, beta, clamped = 0.0, float(np.dot(x, y) / np.dot(x, x)), True
    predicted = alpha + beta * x
    r2 = 1 - float(np.sum((y - predicted) ** 2)) / float(np.sum((y - y.mean()) ** 2) or 1.0)
    return AlphaBetaFit(
        op=op,
        world_size=world_size,
        alpha_s=alpha,
        beta_s_per_byte=beta,
        r2=r2,
        max_rel_error=float(np.max(np.abs(predicted - y) / y)),
        points=len(x),
        alpha_clamped=clamped,
    )


def fit_timings(timings: Iterable[Timing]) -> dict[str, AlphaBetaFit]:
    """One fit per collective that was measured at two sizes or more."""
    by_op: dict[str, list[Timing]] = {}
    for timing in timings:
        by_op.setdefault(timing.op, []).append(timing)
    return {
        op: fit_alpha_beta(op, rows[0].world_size, [t.size_bytes for t in rows], [t.seconds for t in rows])
        for op, rows in by_op.items()
        if len({t.size_bytes for t in rows}) >= 2
    }


def build_commbench_record(
    timings: Sequence[Timing], *, nodes: int, devices_per_node: int, backend: str, device_type: str, dtype: str
) -> dict[str, Any]:
    """The record `dlperf commbench` writes and `dlperf predict` / `dlperf report` read; with one rank the times
    stay, and every bandwidth is None (n/a) with the reason in `note`."""
    linked = nodes * devices_per_node > 1
    return {
        "schema": SCHEMA,
        "nodes": nodes,
        "devices_per_node": devices_per_node,
        "world_size": nodes * devices_per_node,
        "backend": backend,
        "device_type": device_type,
        "dtype": dtype,
        "results": [
            {
                **asdict(t),
                "algbw_gbps": t.algbw / 1e9 if linked else None,
                "busbw_gbps": t.busbw / 1e9 if linked else None,
                "bus_factor": bus_factor(t.op, t.world_size),
            }
            for t in timings
        ],
        "fits": {
            op: {**asdict(fit), "busbw_gbps": fit.busbw / 1e9 if linked else None}
            for op, fit in fit_timings(timings).items()
        },
        "note": None if linked else ONE_RANK,
    }


def read_fit(record: RecordLike, op: str = "all_reduce") -> AlphaBetaFit:
    """A fit back from a commbench record."""
    record = as_record(record)
    if not isinstance(record, CommbenchRecord):
        raise ConfigError(f"not a commbench record (schema {record.schema!r}): give the JSON `dlperf commbench` wrote")
    fit = (record.fits or {}).get(op)
    if fit is None:
        raise ConfigError(
            f"the commbench record has no {op} fit: run dlperf commbench with --ops {op} and two sizes or more"
        )
    return _checked_fit(vars(fit), op)


def _checked_fit(fit: Any, op: str) -> AlphaBetaFit:
    """The stored fit, each field of the type AlphaBetaFit declares: a record edited by hand or cut short says
    which field is wrong instead of crashing the prediction that reads it."""
    fields = {"op": str, "world_size": int, "points": int, "alpha_s": float, "beta_s_per_byte": float}
    got = fit if isinstance(fit, dict) else {}
    for name, kind in fields.items():
        value = got.get(name)
        if not _valid(value, kind):
            raise ConfigError(
                f"the commbench record's {op} fit has {name} = {clip(repr(value), 80)}, not a finite "
                f"{'count' if kind is int else kind.__name__}: measure again with dlperf commbench"
            )
    quality = {name: float(got[name]) if _is_number(got.get(name)) else math.nan for name in ("r2", "max_rel_error")}
    return AlphaBetaFit(**quality, **{name: got[name] for name in fields})


def _valid(value: Any, kind: type) -> bool:
    """A finite number for a float field, a count in [1, 2^31] for an int, else of the type (no bool as a number)."""
    if kind is float:
        return _is_number(value) and math.isfinite(value)
    ok = isinstance(value, kind) and not isinstance(value, bool)
    return ok and (kind is not int or 1 <= value <= 2**31)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
