"""Two readings of one window must agree: the printed rule's figure against the log's own time stamps and counts.

A reader that misreads a unit or a scale is wrong by a factor the run's shape names: the device count (per device
read as global), the global batch (iterations read as samples) or the tokens per sample (tokens read as sequences).
Such a log contradicts itself, and dlperf refuses it with both figures rather than print either with confidence.
"""

from __future__ import annotations

from typing import Any

from dlperf.errors import DataError
from dlperf.framework_logs.base import RunShape
from dlperf.framework_logs.measure import Measured

TOLERANCE = 0.10  # readings of one window agree within 10 % (stamps include data loading and logging)
FLAG_WITHIN = 2.0  # a disagreement by less than 2x, and by no factor of the run's shape, is kept and flagged
# A figure faster than a lower-bound reading (arrival times) by up to this is kept: a script's clock leaving out its
# printing and callbacks, on a loaded machine, was seen at 2.5x; leaving out three quarters of the time is not that.
LOWER_BOUND_WITHIN = 4.0


def _factors(shape: RunShape, measured: Measured) -> dict[str, int]:
    found = {"the device count": shape.world_size, "the global batch": shape.global_batch}
    if measured.tokens_per_sample:
        found["the tokens per sample"] = measured.tokens_per_sample
    return {name: value for name, value in found.items() if value > 1}


def cross_check(
    measured: Measured, rule: str, unit: str, shape: RunShape, second_is_lower_bound: bool = False
) -> dict[str, Any]:
    """The record's `cross_check`: the second figure, their ratio and whether they agree; DataError where the log
    contradicts itself by a factor of the run's shape or by more than FLAG_WITHIN. A second reading that is a
    lower bound (the lines' arrival times, which hold everything the script's own clock leaves out: its printing,
    callbacks, a loaded machine's pauses) refutes a figure slower than itself by FLAG_WITHIN, a faster one only by
    LOWER_BOUND_WITHIN."""
    if measured.second is None:
        return {"agree": None, "second": None, "reading": None, "tolerance": TOLERANCE}
    first, second = measured.throughput, measured.second
    ratio = first / second
    check = {
        "agree": abs(ratio - 1) <= TOLERANCE,
        "second": second,
        "ratio": ratio,
        "reading": measured.second_reading,
        "tolerance": TOLERANCE,
    }
    if check["agree"]:
        return check
    about = _factors_near(ratio, shape, measured)
    note = _batch_note(measured, shape, ratio) or _lower_bound_note(measured, ratio, about, second_is_lower_bound)
    if note is not None:
        return {**check, "note": note}
    if about or not (1 / FLAG_WITHIN <= ratio <= FLAG_WITHIN):
        why = f"about {' or '.join(about)}" if about else "by no factor of the run's shape"
        raise DataError(
            f"the log contradicts itself: the {rule} rule gives {first:.6g} {unit}, its {measured.second_reading} "
            f"give {second:.6g} ({ratio:.3g}x, {why}); check --nodes/--devices-per-node/--batch-size (the file's "
            f"path) or read it with --rule, and say which is right"
        )
    return check


def _factors_near(ratio: float, shape: RunShape, measured: Measured) -> list[str]:
    """The factors of the run's shape the two readings differ by (within TOLERANCE), either way."""
    return [
        name
        for name, factor in _factors(shape, measured).items()
        if abs(ratio / factor - 1) <= TOLERANCE or abs(ratio * factor - 1) <= TOLERANCE
    ]


def _batch_note(measured: Measured, shape: RunShape, ratio: float) -> str | None:
    """The printed figure needs no batch; the log's own stamps say the batch given for it is wrong."""
    if not (measured.second_reading and "the given global batch" in measured.second_reading and measured.batch_free):
        return None
    return (
        f"the log's time stamps imply a global batch of about {shape.global_batch * ratio:.4g} per iteration, "
        f"not the {shape.global_batch} given: the printed figure does not depend on it"
    )


def _lower_bound_note(measured: Measured, ratio: float, about: list[str], lower_bound: bool) -> str | None:
    """A figure faster than a lower-bound second reading by no factor of the shape, up to LOWER_BOUND_WITHIN."""
    if not (lower_bound and not about and FLAG_WITHIN < ratio <= LOWER_BOUND_WITHIN):
        return None
    return (
        f"{ratio:.3g}x faster than the {measured.second_reading}, which also hold what the script's own clock "
        "leaves out (its printing, callbacks, pauses of a loaded machine): a lower bound, kept as such"
    )
