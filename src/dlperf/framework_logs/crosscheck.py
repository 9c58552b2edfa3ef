"""Two readings of one window must agree: the printed rule's figure against the log's own time stamps and counts.

A reader that misreads a unit or a scale is wrong by a factor the run's shape names: the device count (per device
read as global), the global batch (iterations read as samples) or the tokens per sample (tokens read as sequences).
Such a log contradicts itself, and dlperf refuses it with both figures rather than print either with confidence.
"""

from __future__ import annotations

from typing import Any

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, RunShape
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
    measured: Measured,
    rule: str,
    unit: str,
    shape: RunShape,
    second_is_lower_bound: bool = False,
    fmt: LogFormat | None = None,
    asked: bool = False,
) -> dict[str, Any]:
    """The record's `cross_check`: the second figure, their ratio and whether they agree; DataError where the log
    contradicts itself by a factor of the run's shape or by more than FLAG_WITHIN. A second reading that is a
    lower bound (the lines' arrival times, which hold everything the script's own clock leaves out: its printing,
    callbacks, a loaded machine's pauses) refutes a figure slower than itself by FLAG_WITHIN, a faster one only by
    LOWER_BOUND_WITHIN. Of a log's own two readings that disagree by less, the one that covers the whole iteration
    is taken by rule, or the log is refused (`fmt`: the log's format; `asked`: the user asked for the rule, whose
    figure then stands, flagged): two readings apart are never silently "ok"."""
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
    note = _batch_note(measured, shape, ratio, fmt) or _lower_bound_note(measured, ratio, about, second_is_lower_bound)
    if note is not None:
        return {**check, "note": note}
    judge = fmt if not (asked or second_is_lower_bound) else None
    if judge is not None and not about and (chosen := _whole_iteration(check, measured, (rule, unit), shape, judge)):
        return chosen
    if about or not (1 / FLAG_WITHIN <= ratio <= FLAG_WITHIN):
        raise _contradiction(measured, rule, unit, ratio, about, fmt)
    if judge is None:
        return check
    return _disagreement(check, measured, rule, unit, judge)


def _whole_iteration(
    check: dict[str, Any], measured: Measured, reading_unit: tuple[str, str], shape: RunShape, fmt: LogFormat
) -> dict[str, Any] | None:
    """Where the printed figure times a part of each iteration (a component timer) and the second reading is the
    time stamps, which cover all of it: the stamps' figure is taken (`taken`, which the caller pops: the record's
    figure), the printed one kept as the second reading, the evidence. Where the second reading is the component
    timer (`check_part`) and the faster, the printed figure stands, the timer's kept as the evidence. Stamps that
    count the given batch cannot overrule a printed figure that needs none: refused, both causes named."""
    (rule, unit), reading = reading_unit, str(measured.second_reading)
    if fmt.check_part and check["second"] > measured.throughput:
        return {
            **check,
            "note": f"the {reading} ({check['second']:.6g} {unit}) time only {fmt.check_part}; the printed figure "
            f"({measured.throughput:.6g}) covers the whole iteration: it is taken, the other kept as the second "
            "reading",
        }
    if not (rule == "printed" and fmt.printed_part and reading.startswith("time stamps")):
        return None
    if measured.batch_free and "the given global batch" in reading:
        raise _part_or_batch(check, measured, unit, shape, fmt)
    printed, stamps = measured.throughput, check["second"]
    return {
        **check,
        "second": printed,
        "ratio": stamps / printed,
        "reading": f"the printed figures, which time only {fmt.printed_part}",
        "note": f"the {reading} ({stamps:.6g} {unit}) cover the whole iteration, the printed figure ({printed:.6g}) "
        f"times only {fmt.printed_part}: the stamps' figure is taken, the printed one kept as the second reading",
        "taken": stamps,
    }


def _part_or_batch(check: dict[str, Any], measured: Measured, unit: str, shape: RunShape, fmt: LogFormat) -> DataError:
    """A batch-free component timer faster than the stamps at the given batch: its part or that batch is wrong."""
    ratio, batch = check["ratio"], shape.global_batch
    return DataError(
        f"two readings of the run disagree: the printed figure gives {measured.throughput:.6g} {unit} and needs no "
        f"batch, but times only {fmt.printed_part}; the {measured.second_reading} give {check['second']:.6g} "
        f"({ratio:.3g}x) over the whole iteration at the {batch} samples per iteration given: either the timer "
        f"leaves out {1 - 1 / ratio:.0%} of each iteration or an iteration trains about {batch * ratio:.4g} samples, "
        f"and the log prints no batch to tell; pass --rule timestamp if {batch} is right, --rule printed for the "
        "timer's figure"
    )


def _contradiction(
    measured: Measured, rule: str, unit: str, ratio: float, about: list[str], fmt: LogFormat | None
) -> DataError:
    """The log contradicts itself: about a factor of the run's shape (then the shape given may be the cause), or by
    more than FLAG_WITHIN and no factor (then it is not: what each figure is taken from is said)."""
    figures = f"the {rule} rule gives {measured.throughput:.6g} {unit}, its {measured.second_reading} give " + (
        f"{measured.second:.6g} ({ratio:.3g}x"
    )
    if about:
        return DataError(
            f"the log contradicts itself: {figures}, about {' or '.join(about)}); check --nodes/--devices-per-node/"
            f"--batch-size (the file's path) or read it with --rule, and say which is right"
        )
    part = f" (the printed figure times only {fmt.printed_part})" if fmt is not None and fmt.printed_part else ""
    return DataError(
        f"the log contradicts itself: {figures}, by no factor of the run's shape, so not its --nodes, "
        f"--devices-per-node or --batch-size){part}; read it with --rule to take one of them, and say which is right"
    )


def _disagreement(check: dict[str, Any], measured: Measured, rule: str, unit: str, fmt: LogFormat) -> dict[str, Any]:
    """Two readings of one window apart beyond TOLERANCE, within FLAG_WITHIN and by no factor of the run's shape,
    neither a part of the other: where the second reading counts less by design (real tokens, no padding) both
    stand, flagged; else the log is refused, both named."""
    first, second = measured.throughput, check["second"]
    reading = str(measured.second_reading)
    if fmt.check_counts_less and first > second:
        return {**check, "note": f"the {reading} count less than the figure by design: both kept"}
    raise DataError(
        f"two readings of the run disagree: the {rule} rule gives {first:.6g} {unit} (the framework's own figure), "
        f"its {reading} give {second:.6g} ({check['ratio']:.3g}x, beyond the {TOLERANCE:.0%} they agree within "
        f"when both time the same iterations) and neither covers more of the iteration than the other, so neither "
        f"is taken: pass --rule {rule} (or the other rule) to take one, flagged"
    )


def _factors_near(ratio: float, shape: RunShape, measured: Measured) -> list[str]:
    """The factors of the run's shape the two readings differ by (within TOLERANCE), either way."""
    return [
        name
        for name, factor in _factors(shape, measured).items()
        if abs(ratio / factor - 1) <= TOLERANCE or abs(ratio * factor - 1) <= TOLERANCE
    ]


def _batch_note(measured: Measured, shape: RunShape, ratio: float, fmt: LogFormat | None) -> str | None:
    """The printed figure needs no batch; the log's own stamps say the batch given for it is wrong (unless the
    figure times a part of each iteration and is the faster: then that part may be the cause)."""
    if not (measured.second_reading and "the given global batch" in measured.second_reading and measured.batch_free):
        return None
    if fmt is not None and fmt.printed_part and ratio > 1:
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
