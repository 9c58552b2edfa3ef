"""An MLPerf log's timed intervals: blocks (`block_start`/`block_stop`), or its epochs where it times nothing else
(tinygrad's logs). A log without progress events has only these for figures: the samples an interval covers over
its time, counted the way MLPerf counts a run (by its evaluations) where the block's own statement disagrees."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dlperf.framework_logs.base import Point
from dlperf.framework_logs.formats.mlperf.counting import TOKEN_COUNTED, Counts
from dlperf.framework_logs.formats.mlperf.events import number
from dlperf.framework_logs.formats.mlperf.evidence import close

EVALUATIONS = {"eval_start", "eval_accuracy", "eval_stop"}  # their count is what the run trained by then


def _first_known(*values: float | None) -> float:
    """The first count that is known, else 0 (the run's start)."""
    return next((v for v in values if v is not None), 0.0)


@dataclass(frozen=True)
class Block:
    """An open timed block: when it started, the samples done then by its own count (`first_epoch_num`), its
    length where it states one, and the other counts it started at."""

    stamp: float
    begin: float | None
    size: float | None
    first: float | None  # first_epoch_num where the block also states epoch_count (Habana counts iterations)
    count: float | None  # samples_count at the start
    before: float | None  # samples done at the start by other events' counts

    def stated_span(self) -> tuple[float, float] | None:
        """The samples its own first_epoch_num + epoch_count state, where it states them."""
        if self.begin is None or self.size is None:
            return None
        return self.begin, self.begin + self.size

    def iterations_span(self, done: float | None, batch: float) -> tuple[float, float] | None:
        """Habana's count: first_epoch_num at a block's end is the iteration count done."""
        if self.first is None or done is None or done <= self.first:
            return None
        return self.first * batch, done * batch


class Blocks:
    """The open interval, the counts inside it, and where the last one ended."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.open: Block | None = None
        self.seen = False  # the log times blocks; without them (and tracked progress) its epochs are its intervals
        self.epochs_timed = 0
        self.epochs: list[Point] = []  # each epoch's figure, where epochs are the log's only intervals
        self.counted_inside = False  # the log's counts rose inside the open block
        self.marks: list[tuple[float, float]] = []  # (time, samples) of the evaluations inside the open block
        self.last_stop: tuple[float, float] | None = None  # (time, samples) at the last block's end

    def counted(self, key: Any, count: float, rose: bool, stamp: float) -> None:
        """Inside an open block: whether the counts rose, and the evaluations' counts (MLPerf counts a run by its
        evaluations)."""
        if self.open is None or key == "block_stop":
            return
        self.counted_inside = self.counted_inside or rose
        if key in EVALUATIONS and (not self.marks or count > self.marks[-1][1]):
            self.marks.append((stamp, count))

    def start(self, metadata: dict[str, Any], stamp: float) -> Block:
        first, count = number(metadata.get("first_epoch_num")), number(metadata.get("epoch_count"))
        begin = size = None
        if first is not None and count is not None:
            start, _ = self.counts.samples(first, count)
            length, _ = self.counts.samples(count, count)
            if start is not None and length is not None and length >= self.counts.batch:  # at least one step
                begin, size = start, length
        self.marks, self.counted_inside = [], False
        self.open = Block(
            stamp=stamp,
            begin=begin,
            size=size,
            first=first if count is not None else None,
            count=number(metadata.get("samples_count")),
            before=self.counts.cumulative,
        )
        return self.open

    def epoch_start(self, metadata: dict[str, Any], stamp: float) -> None:
        """An epoch timed as a block: an epoch benchmark's epoch is its data set."""
        block = self.start(metadata, stamp)
        if (size := self.counts.epoch_size()) is not None:
            self.open = replace(block, begin=self.epochs_timed * size, size=size)
        self.epochs_timed += 1

    def epoch_open(self) -> bool:
        """Whether an epoch is open as the log's timed interval (no blocks, no tracked progress)."""
        return self.open is not None and not self.seen

    def interval(self, metadata: dict[str, Any], stamp: float, step: int) -> Point | None:
        """The figure of the timed interval (block, or epoch where the log times no blocks) that ends here."""
        block, self.open = self.open, None
        start_time = self._began(block)
        begin, end, note = self._span(metadata, block)
        if end is not None:
            self.last_stop = (stamp, end)
        if start_time is None or begin is None or end is None or stamp <= start_time or end <= begin:
            return None
        return Point(
            step=step,
            speed=(end - begin) / (stamp - start_time),
            timestamp=stamp,
            samples=end,
            check=self._marks_figure(start_time, stamp),
            note=note or self._note(),
            tokens=self.counts.tokens_per_sample(),
        )

    def _marks_figure(self, start: float, stop: float) -> float | None:
        """The block's second reading: the counts its evaluations logged inside it over their time stamps (a block
        whose samples_count or statement disagrees with them by a factor makes the log contradict itself)."""
        inside = [(t, n) for t, n in self.marks if start <= t <= stop]
        if len(inside) < 2:
            return None
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 and n1 > n0 else None

    def _began(self, block: Block | None) -> float | None:
        """When a block began: its block_start, else the last block's end, else the run's start."""
        if block:
            return block.stamp
        return self.last_stop[0] if self.last_stop else self.counts.run_start

    def _note(self) -> str | None:
        if self.counts.evaluated and not self.counts.timed_eval:
            return "timed blocks: the log times no evaluation apart, so a block may include it"
        return None

    def _span(self, metadata: dict[str, Any], block: Block | None) -> tuple[float | None, float | None, str | None]:
        """The samples a finished block covers (begin, end) and a note where its own statement is overruled: the
        count at its stop (`samples_count`), else the count the log's events reached inside it (MLPerf's count of
        what a run trained is its last evaluation's), else what the block states."""
        before = self.last_stop[1] if self.last_stop else None
        if (count := number(metadata.get("samples_count"))) is not None:  # cumulative samples at the block's end
            return _first_known(before, block and block.count), count, None
        stated = block.stated_span() if block else None
        cumulative = self.counts.cumulative
        if self.counted_inside and cumulative is not None:  # counted inside it (bert's epoch_num, evaluations)
            begin = _first_known(before, block and block.before)
            return begin, cumulative, self._overruled(stated, cumulative - begin)
        return self._stated_span(metadata, block, stated)

    def _stated_span(
        self, metadata: dict[str, Any], block: Block | None, stated: tuple[float, float] | None
    ) -> tuple[float | None, float | None, str | None]:
        """What the block states it covers: `first_epoch_num` + `epoch_count`, the planned length up to the next
        evaluation, or Habana's iteration counters."""
        if block is None:
            return None, None, None
        span = stated or block.iterations_span(number(metadata.get("first_epoch_num")), self.counts.batch)
        return (*span, None) if span else (None, None, None)

    def _overruled(self, stated: tuple[float, float] | None, counted: float) -> str | None:
        if stated is None or close(stated[1] - stated[0], counted):
            return None
        unit = "sequences" if self.counts.benchmark in TOKEN_COUNTED else "samples"
        return (
            f"a timed block states {stated[1] - stated[0]:.6g} {unit} (epoch_count) but the log's evaluations count "
            f"{counted:.6g} by its stop: counted those (MLPerf counts a run by its evaluations)"
        )
