"""The doubt rules, written once: why a number should not be taken at face value, and what to do about it.

Per run: noise, no steady state (or too few windows to tell), a straggler rank. Per case (a row of any table):
efficiency above 100 %, repeats that disagree, too few repeats, outlier repeats, and how many of its repeats had each
run doubt. The console, report.md, summary.json, report.html and the cross-source report all show these flags; a
record read from someone else's logs (`source: extract`) gets advice that fits a log nobody here can re-run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from dlperf.metrics.noise import WINDOW_CV_LIMIT
from dlperf.metrics.repeats import MIN_REPEATS, outliers
from dlperf.metrics.stats import spread
from dlperf.metrics.steady import DEFAULT_WINDOWS
from dlperf.records.load import RecordLike, as_record
from dlperf.records.parts import SteadyState, Stragglers, Warmup
from dlperf.records.schema import GIVEN_BATCH_NOTE, ExtractedRecord, PeerReading, RunRecord

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


def run_doubts(record: RecordLike) -> list[RunDoubt]:
    """Every doubt about one successful run, in a fixed order."""
    record = as_record(record)
    extracted = isinstance(record, ExtractedRecord)
    found = [_noise_doubt(record, extracted), _steady_doubt(record, extracted), _straggler_doubt(record, extracted)]
    return [doubt for doubt in found if doubt is not None]


def _noise_doubt(record: RunRecord, extracted: bool) -> RunDoubt | None:
    if not record.noisy:
        return None
    seen = "; ".join(record.noise_reasons or []) or "the machine was busy"
    return RunDoubt("noisy", "NOISY", seen, EXTRACTED_ADVICE if extracted else "Re-run on a quiet machine.")


def _steady_doubt(record: RunRecord, extracted: bool) -> RunDoubt | None:
    """A warm-up that never settled, too few windows to tell, or no steady state in the timed windows."""
    steady = record.steady_state or SteadyState()
    warmup = record.warmup or Warmup()
    if warmup.stable is False:
        seen = warmup.reason or "the warm-up never became stable"
        return RunDoubt("unstable", "NEVER STABLE", seen, _unstable_advice(extracted))
    if steady.stable is not False:
        return None
    few = _too_few_windows(record, steady)
    if few:
        windows, required = few
        seen = f"{windows} timing window{'s' if windows != 1 else ''}, fewer than the {required} a steady state needs"
        advice = EXTRACTED_ADVICE if extracted else f"Run at least {required} windows (more --iters)."
        return RunDoubt("few windows", "FEW WINDOWS", seen, advice)
    seen = (steady.reason or "no steady state").removeprefix("never stable: ")
    return RunDoubt("unstable", "NEVER STABLE", seen, _unstable_advice(extracted))


def _too_few_windows(record: RunRecord, steady: SteadyState) -> tuple[int, int] | None:
    """(windows, required) when the run had fewer timing windows than a steady state needs: too few to tell
    (None where the record holds no windows: another framework's log)."""
    if record.window_throughputs is None:
        return None
    windows = len(record.window_throughputs)
    required = int(steady.windows_required or DEFAULT_WINDOWS)
    return (windows, required) if windows < required else None


def _straggler_doubt(record: RunRecord, extracted: bool) -> RunDoubt | None:
    stragglers = record.stragglers or Stragglers()
    if not stragglers.flagged:
        return None
    advice = EXTRACTED_ADVICE if extracted else "Check that host and device (clocks, other load, thermal throttling)."
    return RunDoubt("straggler", "STRAGGLER", _straggler_text(stragglers), advice)


def _unstable_advice(extracted: bool) -> str:
    if extracted:
        return "Its throughput averages changing speeds. " + EXTRACTED_ADVICE
    return (
        "Its throughput averages changing speeds: use --warmup-iters auto (raise --max-warmup-iters) or more --iters."
    )


def _straggler_text(s: Stragglers) -> str:
    try:
        pct = s.rank_median_ms[s.slowest_rank] / s.median_rank_ms - 1  # type: ignore[index,operator]
        return (
            f"rank(s) {s.stragglers}; rank {s.slowest_rank} on {s.slowest_host} {pct:.0%} slower than "
            f"the median rank (limit {s.straggler_pct:.0%})"
        )
    except (KeyError, IndexError, TypeError, ZeroDivisionError):
        return f"rank(s) {s.stragglers} (slowest on {s.slowest_host})"


def console_flags(record: RecordLike) -> str:
    """What the console prints after a run's line: ` [NOISY: ...] [NEVER STABLE: ...]`, empty for a clean run."""
    record = as_record(record)
    texts = [f"{d.shout}: {d.seen}" for d in run_doubts(record)]
    stop = record.repeats_stop
    if stop:
        texts.append(f"repeats {'stopped' if stop.stop else 'go on'}: {stop.reason}")
    return "".join(f" [{text}]" for text in texts)


def throughputs(records: Sequence[RunRecord]) -> list[float]:
    return [float(r.throughput) for r in records if isinstance(r.throughput, (int, float))]


@dataclass(frozen=True)
class _Row:
    """One table row as the case rules see it: its good repeats, their speeds and its scaling efficiency."""

    records: Sequence[RunRecord]
    efficiency: float | None

    @property
    def n(self) -> int:
        return len(self.records)

    @cached_property
    def extracted(self) -> bool:
        return bool(self.records) and all(isinstance(r, ExtractedRecord) for r in self.records)

    @cached_property
    def speeds(self) -> list[float]:
        return throughputs(self.records)

    def advice(self, here: str) -> str:
        return EXTRACTED_ADVICE if self.extracted else here


def case_flags(records: Sequence[RecordLike], efficiency: float | None = None) -> list[Flag]:
    """Every reason to doubt one table row: its good repeats' `records` and its scaling efficiency, if any."""
    row = _Row([as_record(r) for r in records], efficiency)
    return [flag for rule in _CASE_RULES for flag in rule(row)]


def _efficiency_flags(row: _Row) -> list[Flag]:
    if row.efficiency is None or row.efficiency <= 1:
        return []
    return [
        Flag(
            "eff>100%",
            f"scaling efficiency {row.efficiency:.0%} is above 100 %: more devices cannot do the same work faster "
            f"than perfectly; the {BASELINE_CASE} baseline or this case was disturbed (see CV and noisy). "
            + row.advice("Re-run both on a quiet machine."),
        )
    ]


# how each command repeats a case: a sweep by itself, `dlperf run` (which has no --repeats) by number
MORE_REPEATS = "`dlperf sweep --repeats auto`, or `dlperf run --repeat 2`, `--repeat 3`... into the same --out"


def _spread_flags(row: _Row) -> list[Flag]:
    cv = spread(row.speeds).get("cv") if row.speeds else None
    if cv is None or cv <= REPEAT_CV_LIMIT:
        return []
    return [
        Flag(
            "CV",
            f"repeats vary by CV {cv:.1%}, above the {REPEAT_CV_LIMIT:.0%} limit: the median is not reproducible. "
            + row.advice(f"Re-run on a quiet machine, with more repeats ({MORE_REPEATS})."),
        )
    ]


def _count_flags(row: _Row) -> list[Flag]:
    n = row.n
    if not 0 < n < MIN_REPEATS:
        return []
    what = f"median of {n} good {'run' if row.extracted else 'repeat'}{'s' if n > 1 else ''}, fewer than {MIN_REPEATS}"
    advice = (
        "the logs hold too few runs for a reproducible median: read it as indicative, or ask for more logs."
        if row.extracted
        else f"run more repeats ({MORE_REPEATS})."
    )
    return [Flag(f"n={n}", f"{what}: {advice}")]


def _run_doubt_flags(row: _Row) -> list[Flag]:
    """How many of the row's repeats had each run doubt, in the fixed order of `_RUN_VERBS`."""
    by_label: dict[str, list[RunDoubt]] = {}
    for record in row.records:
        for doubt in run_doubts(record):
            by_label.setdefault(doubt.label, []).append(doubt)
    flags = []
    for label in (label for label in _RUN_VERBS if label in by_label):
        hits = by_label[label]
        seen = "; ".join(dict.fromkeys(d.seen for d in hits)) if label == "noisy" else hits[0].seen
        flags.append(Flag(label, f"{len(hits)} of {row.n} repeats {_RUN_VERBS[label]} ({seen}). {hits[0].advice}"))
    return flags


def _reading_flags(row: _Row) -> list[Flag]:
    peers = [r for r in row.records if isinstance(r, PeerReading)]
    return _contradiction_flags(peers, row.n) + _cross_check_flags(peers, row.n) + _given_batch_flags(peers, row.n)


def _given_batch_flags(peers: list[PeerReading], n: int) -> list[Flag]:
    """Logs whose figure counts the batch the file's path (or --batch-size) gave, their lines printing none."""
    given = [note for r in peers for note in r.reading_notes or [] if note.startswith(GIVEN_BATCH_NOTE)]
    if not given:
        return []
    return [Flag("batch given", f"{len(given)} of {n} logs print no batch: {given[0]}. Check it against the run.")]


def _contradiction_flags(peers: list[PeerReading], n: int) -> list[Flag]:
    """Logs whose lines contradict each other."""
    contradicting = [r for r in peers if r.contradictions]
    if not contradicting:
        return []
    first = contradicting[0].contradictions[0]  # type: ignore[index]
    return [
        Flag(
            "contradicts",
            f"{len(contradicting)} of {n} logs contradict themselves: {first}. Check the log (ranks of "
            "different shapes or speeds, a rank printing its own figure).",
        )
    ]


def _cross_check_flags(peers: list[PeerReading], n: int) -> list[Flag]:
    """Logs whose rule's figure and their own readings disagree beyond the tolerance."""
    split = [r for r in peers if r.cross_check and r.cross_check.agree is False]
    if not split:
        return []
    c = split[0].cross_check
    return [
        Flag(
            "readings",
            f"{len(split)} of {n} logs disagree with themselves: the {split[0].rule} rule gives "
            f"{c.ratio:.3g}x what {c.reading} give (beyond {c.tolerance:.0%}). "
            f"{c.note or 'Check the log and the shape its path declares.'}",
        )
    ]


def _outlier_flags(row: _Row) -> list[Flag]:
    speeds = row.speeds
    if len(speeds) != row.n:
        return []
    out = [r.repeat for r, is_out in zip(row.records, outliers(speeds)) if is_out]
    if not out:
        return []
    return [
        Flag(
            "outlier",
            f"repeat(s) {', '.join(f'#{r}' for r in out)} more than 3 MADs from the median, kept in it: "
            "look at what else ran then.",
        )
    ]


_CASE_RULES = (_efficiency_flags, _spread_flags, _count_flags, _run_doubt_flags, _reading_flags, _outlier_flags)

_RUN_VERBS = {
    "noisy": "ran noisy",
    "unstable": "never reached a steady state",
    "few windows": "had too few timing windows to check for a steady state",
    "straggler": "had a straggler",
}
