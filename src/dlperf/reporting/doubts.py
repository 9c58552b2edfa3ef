"""The doubt rules, written once: why a number should not be taken at face value, and what to do about it.

Per run: noise, no steady state (or too few windows to tell), a straggler rank. Per case (a row of any table):
efficiency above 100 %, repeats that disagree, too few repeats, outlier repeats, and how many of its repeats had each
run doubt. The console, report.md, summary.json, report.html and the cross-source report all show these flags; a
record read from someone else's logs (`source: extract`) gets advice that fits a log nobody here can re-run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlperf.metrics.noise import WINDOW_CV_LIMIT
from dlperf.metrics.repeats import MIN_REPEATS, outliers
from dlperf.metrics.stats import spread
from dlperf.metrics.steady import DEFAULT_WINDOWS

BASELINE_CASE = "1n1g"
# Repeats of a quiet run agree like its windows do: the same documented limit as metrics/noise.WINDOW_CV_LIMIT.
REPEAT_CV_LIMIT = WINDOW_CV_LIMIT
EXTRACTED_ADVICE = "It comes from logs measured elsewhere: read the figure as indicative, or ask for logs of more runs."


@dataclass(frozen=True)
class Flag:
    """Why a row should not be taken at face value: a short label for the row, and the footnote saying what was
    seen and what to do."""

    label: str
    note: str


@dataclass(frozen=True)
class RunDoubt:
    """One run's reason for doubt: the table label, the console's loud label, what was seen, what to do."""

    label: str
    shout: str
    seen: str
    advice: str


def is_extracted(record: dict[str, Any]) -> bool:
    return record.get("source") == "extract"


def run_doubts(record: dict[str, Any]) -> list[RunDoubt]:
    """Every doubt about one successful run, in a fixed order."""
    extracted = is_extracted(record)
    found = []
    if record.get("noisy"):
        seen = "; ".join(record.get("noise_reasons") or []) or "the machine was busy"
        found.append(RunDoubt("noisy", "NOISY", seen, EXTRACTED_ADVICE if extracted else "Re-run on a quiet machine."))
    steady = record.get("steady_state") or {}
    warmup = record.get("warmup") or {}
    windows = len(record.get("window_throughputs") or []) if "window_throughputs" in record else None
    required = int(steady.get("windows_required") or DEFAULT_WINDOWS)
    if warmup.get("stable") is False:
        seen = warmup.get("reason") or "the warm-up never became stable"
        found.append(RunDoubt("unstable", "NEVER STABLE", seen, _unstable_advice(extracted)))
    elif steady.get("stable") is False and windows is not None and windows < required:
        seen = f"{windows} timing window{'s' if windows != 1 else ''}, fewer than the {required} a steady state needs"
        advice = EXTRACTED_ADVICE if extracted else f"Run at least {required} windows (more --iters)."
        found.append(RunDoubt("few windows", "FEW WINDOWS", seen, advice))
    elif steady.get("stable") is False:
        seen = (steady.get("reason") or "no steady state").removeprefix("never stable: ")
        found.append(RunDoubt("unstable", "NEVER STABLE", seen, _unstable_advice(extracted)))
    stragglers = record.get("stragglers") or {}
    if stragglers.get("flagged"):
        found.append(RunDoubt("straggler", "STRAGGLER", _straggler_text(stragglers), _straggler_advice(extracted)))
    return found


def _unstable_advice(extracted: bool) -> str:
    if extracted:
        return "Its throughput averages changing speeds. " + EXTRACTED_ADVICE
    return (
        "Its throughput averages changing speeds: use --warmup-iters auto (raise --max-warmup-iters) or more --iters."
    )


def _straggler_advice(extracted: bool) -> str:
    return EXTRACTED_ADVICE if extracted else "Check that host and device (clocks, other load, thermal throttling)."


def _straggler_text(s: dict[str, Any]) -> str:
    try:
        pct = s["rank_median_ms"][s["slowest_rank"]] / s["median_rank_ms"] - 1
        return (
            f"rank(s) {s['stragglers']}; rank {s['slowest_rank']} on {s['slowest_host']} {pct:.0%} slower than "
            f"the median rank (limit {s['straggler_pct']:.0%})"
        )
    except (KeyError, IndexError, TypeError, ZeroDivisionError):
        return f"rank(s) {s.get('stragglers')} (slowest on {s.get('slowest_host')})"


def console_flags(record: dict[str, Any]) -> str:
    """What the console prints after a run's line: ` [NOISY: ...] [NEVER STABLE: ...]`, empty for a clean run."""
    texts = [f"{d.shout}: {d.seen}" for d in run_doubts(record)]
    stop = record.get("repeats_stop")
    if stop:
        texts.append(f"repeats {'stopped' if stop.get('stop') else 'go on'}: {stop['reason']}")
    return "".join(f" [{text}]" for text in texts)


def throughputs(records: Sequence[dict[str, Any]]) -> list[float]:
    return [float(r["throughput"]) for r in records if isinstance(r.get("throughput"), (int, float))]


def case_flags(records: Sequence[dict[str, Any]], efficiency: float | None = None) -> list[Flag]:
    """Every reason to doubt one table row: its good repeats' `records` and its scaling efficiency, if any."""
    found: list[Flag] = []
    n = len(records)
    extracted = bool(records) and all(is_extracted(r) for r in records)
    speeds = throughputs(records)
    if efficiency is not None and efficiency > 1:
        found.append(
            Flag(
                "eff>100%",
                f"scaling efficiency {efficiency:.0%} is above 100 %: more devices cannot do the same work faster "
                f"than perfectly; the {BASELINE_CASE} baseline or this case was disturbed (see CV and noisy). "
                + (EXTRACTED_ADVICE if extracted else "Re-run both on a quiet machine."),
            )
        )
    cv = spread(speeds).get("cv") if speeds else None
    if cv is not None and cv > REPEAT_CV_LIMIT:
        found.append(
            Flag(
                "CV",
                f"repeats vary by CV {cv:.1%}, above the {REPEAT_CV_LIMIT:.0%} limit: the median is not "
                "reproducible. "
                + (EXTRACTED_ADVICE if extracted else "Re-run on a quiet machine, or with --repeats auto."),
            )
        )
    if 0 < n < MIN_REPEATS:
        what = f"median of {n} good {'run' if extracted else 'repeat'}{'s' if n > 1 else ''}, fewer than {MIN_REPEATS}"
        advice = (
            "the logs hold too few runs for a reproducible median: read it as indicative, or ask for more logs."
            if extracted
            else "run more repeats (--repeats auto)."
        )
        found.append(Flag(f"n={n}", f"{what}: {advice}"))
    by_label: dict[str, list[tuple[dict[str, Any], RunDoubt]]] = {}
    for record in records:
        for doubt in run_doubts(record):
            by_label.setdefault(doubt.label, []).append((record, doubt))
    for label in (label for label in _RUN_VERBS if label in by_label):
        hits = by_label[label]
        doubt = hits[0][1]
        seen = "; ".join(dict.fromkeys(d.seen for _, d in hits)) if label == "noisy" else doubt.seen
        found.append(Flag(label, f"{len(hits)} of {n} repeats {_RUN_VERBS[label]} ({seen}). {doubt.advice}"))
    split = [r for r in records if (r.get("cross_check") or {}).get("agree") is False]
    if split:
        c = split[0]["cross_check"]
        found.append(
            Flag(
                "readings",
                f"{len(split)} of {n} logs disagree with themselves: the {split[0].get('rule')} rule gives "
                f"{c['ratio']:.3g}x what {c['reading']} give (beyond {c['tolerance']:.0%}). "
                f"{c.get('note') or 'Check the log and the shape its path declares.'}",
            )
        )
    out = [r.get("repeat") for r, is_out in zip(records, outliers(speeds)) if is_out] if len(speeds) == n else []
    if out:
        found.append(
            Flag(
                "outlier",
                f"repeat(s) {', '.join(f'#{r}' for r in out)} more than 3 MADs from the median, kept in it: "
                "look at what else ran then.",
            )
        )
    return found


_RUN_VERBS = {
    "noisy": "ran noisy",
    "unstable": "never reached a steady state",
    "few windows": "had too few timing windows to check for a steady state",
    "straggler": "had a straggler",
}
