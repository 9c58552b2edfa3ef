"""Lines printed by several ranks for one iteration become one point: the median figures (the MXNet rule), and a
contradiction named where the ranks disagree beyond what ranks of one synchronous iteration differ by."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

from dlperf.framework_logs.base import Point

RANK_SPREAD = 0.10  # ranks of one synchronous iteration print figures within 10 % (the readings' own tolerance)

# how each field of the ranks' lines becomes the iteration's: the first line's, the median, the highest
_FIRST = ("step", "start", "run", "note", "tokens", "unit")
_MEDIAN = ("speed", "seconds", "samples", "batch", "check", "own")
_HIGHEST = ("timestamp", "memory_mib", "resolution")
_COMPARED = (("throughput", "speed"), ("time per iteration", "seconds"))


def combine(points: list[Point]) -> Point:
    """One point for one iteration printed by several ranks: median figures, the latest time stamp."""
    if len(points) == 1:
        return points[0]
    first = points[0]
    return Point(
        **{name: getattr(first, name) for name in _FIRST},
        **{name: _of_present(statistics.median, [getattr(p, name) for p in points]) for name in _MEDIAN},
        **{name: _of_present(max, [getattr(p, name) for p in points]) for name in _HIGHEST},
        metrics=_median_metrics(points),
        disagreement=_disagreement(points),
    )


def _of_present(reduce: Callable[[list[float]], float], values: list[float | None]) -> float | None:
    """`reduce` over the values a line printed (None where no rank printed one)."""
    present = [v for v in values if v is not None]
    return reduce(present) if present else None


def _median_metrics(points: list[Point]) -> tuple[tuple[str, float], ...]:
    names = {name for p in points for name, _ in p.metrics}
    return tuple((n, statistics.median([v for p in points for m, v in p.metrics if m == n])) for n in names)


def _disagreement(points: list[Point]) -> str | None:
    """Where the ranks printing one iteration disagree beyond RANK_SPREAD: what they printed."""
    for name, field in _COMPARED:
        spread = _spread([getattr(p, field) for p in points])
        if spread is not None:
            high, low = spread
            at = f"iteration {points[0].step}" if points[0].step is not None else "one iteration"
            return (
                f"{len(points)} ranks printing {at} disagree on its {name}: {high:.6g} and {low:.6g} "
                f"({high / low:.3g}x, beyond the {RANK_SPREAD:.0%} ranks of one run differ by); "
                "the median is kept"
            )
    return None


def _spread(values: list[float | None]) -> tuple[float, float] | None:
    """The highest and lowest of the usable figures, where they differ beyond RANK_SPREAD."""
    present = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    if len(present) > 1 and max(present) > min(present) * (1 + RANK_SPREAD):
        return max(present), min(present)
    return None
