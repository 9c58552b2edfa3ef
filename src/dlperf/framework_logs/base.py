"""What every framework-log reader shares: the parsed point, the format's description, and small line helpers."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from dlperf.errors import DataError

RULES = ("printed", "timestamp")


class AnyCase(str):
    """A string a reader looks for in any case (its pattern ignores case): LogFormat.reads."""


@dataclass(frozen=True)
class RunShape:
    """What a reader may need from the file's place in the layout to turn its lines into global figures."""

    global_batch: int
    world_size: int
    workload: str = ""  # the model's name (from the path or --model), for its plausible speed


@dataclass(frozen=True)
class Point:
    """One progress line of a log: the iteration it ends, what it printed, and when.

    `step` counts iterations from the start of the run (epochs folded in); `start` is the iteration the line's
    interval starts at when the line says so (else the previous line's step). `speed` is GLOBAL samples/s (a
    reader scales a per-device figure by the world size); `seconds` is seconds per iteration; `samples` is a
    cumulative sample count where the log prints one; `run` tells runs apart when a log prints it (e.g. the
    planned iteration count); `memory_mib` is a printed peak memory; `metrics` are extra per-device figures.
    `check` is the same interval's GLOBAL figure by a second reading the reader has (e.g. an MLPerf epoch's time
    stamps x the data set's size), the cross-check of `speed`; `note` says how the reader decided a figure's scale
    or unit, for the record. A `whole_run` point is a figure the framework computes for the run as a whole (DLLogger's
    final `training_sequences_per_second`): it stands apart from the iterations.
    """

    step: int | None
    speed: float | None = None
    seconds: float | None = None
    timestamp: float | None = None
    samples: float | None = None
    start: int | None = None
    run: Hashable = None
    memory_mib: float | None = None
    metrics: tuple[tuple[str, float], ...] = ()
    check: float | None = None
    note: str | None = None
    tokens: int | None = None  # tokens per sample where the log states it (a factor two readings may differ by)
    unit: str | None = None  # the figure's unit where the reader infers it (MLPerf: the benchmark's samples)
    batch: float | None = None  # GLOBAL samples per iteration where the line prints its own (else the run's)
    whole_run: bool = False  # the run's own figure for all of it, used only where the rule's window gives none
    paused: bool = False  # time the framework's step clock leaves out (evaluation, checkpoints) passed before it
    # how far the printed time can be from the true one, from its rounding (Keras' `20ms/step` is +-0.5 ms): for
    # `seconds` in the same unit, for `timestamp` in seconds; measure refuses a figure it leaves unknown to 2 %
    resolution: float | None = None
    # the GLOBAL figure the framework's own practice reads at this line (torchtitan's last step, DeepSpeed's running
    # average): the window's last kept one is kept beside the rule's figure
    own: float | None = None
    disagreement: str | None = None  # ranks printing this iteration disagree beyond their noise (ranks.combine)


Reader = Callable[[Iterable[str], RunShape], Iterator[Point]]


@dataclass(frozen=True)
class HookTrace:
    """One process's instrumentation side file (framework_logs/formats/dlperf_steps.py): each optimizer step's time and
    global samples, and the stretches the trainer's own printed figure covers where the hook marked them."""

    times: dict[int, float]  # step -> monotonic seconds after it
    samples: dict[int, float]  # step -> its global samples
    train: tuple[float, float] | None = None  # transformers' train_runtime span: (begin, end)
    epochs: tuple[float, ...] = ()  # Lightning: when each epoch began


def hook_over_steps(
    trace: HookTrace, points: list[Point], kept: tuple[int, int] | None, steps: Callable[[Point], tuple[int, int]]
) -> tuple[float, float, int] | None:
    """The hook's samples/s and the script's own figure over the steps the reader's kept points timed
    (`steps(point)`: the hook's steps (a, b] a point's printed time covers, each step that time), and how many
    points; a point whose clock left out a pause before it (timm's first update of an epoch) is left out of both,
    as the hook's stamps hold the pause. The script's samples per step: the line's own, else the hook's. None where
    the trace lacks any of the steps."""
    timed = _timed_in(points, kept)
    spans = [steps(p) for p in timed]
    if not spans or not all(_traced(trace, span) for span in spans):
        return None
    hook_samples = [sum(trace.samples[s] for s in range(a + 1, b + 1)) for a, b in spans]
    seconds = sum(trace.times[b] - trace.times[a] for a, b in spans)
    script_samples = sum(map(_script_samples, timed, spans, hook_samples))
    script_seconds = sum(map(_script_seconds, timed, spans))
    if seconds <= 0 or script_seconds <= 0:
        return None
    return sum(hook_samples) / seconds, script_samples / script_seconds, len(spans)


def _timed_in(points: list[Point], kept: tuple[int, int] | None) -> list[Point]:
    """The points in the kept steps that print a time and whose clock left out no pause before them."""
    if kept is None:
        return []
    first, last = kept
    return [p for p in points if p.seconds and p.step is not None and first <= p.step <= last and not p.paused]


def _traced(trace: HookTrace, span: tuple[int, int]) -> bool:
    """The trace holds both ends of the hook's steps (a, b], and they go forward."""
    a, b = span
    return a in trace.times and b in trace.times and b > a


def _script_seconds(point: Point, span: tuple[int, int]) -> float:
    """The script's printed time over the hook's steps (a, b], each step that time."""
    assert point.seconds is not None  # only timed points are held to the hook
    return point.seconds * (span[1] - span[0])


def _script_samples(point: Point, span: tuple[int, int], hook_samples: float) -> float:
    """The samples the script counts over its steps (a, b]: its line's own per step, else the hook's."""
    own = point.batch or (point.speed * point.seconds if point.speed and point.seconds else None)
    return own * (span[1] - span[0]) if own else hook_samples


# The hook's figure (samples/s) over the stretch the script's own figure covers, the script's figure over it where
# that is not its printed one (None: it is), and what that stretch is; None where the trace lacks it. Given the
# trace, the reader's points of the log, and the steps its window kept.
Stretch = Callable[[HookTrace, list[Point], tuple[int, int] | None], tuple[float, float | None, str] | None]


class InOrder:
    """A signature `A.*B|C` given as chains of parts, `InOrder((A, B), (C,))`, each part searched from where the one
    before it ended. Parts begin with a token, so a part's first match ends first and is as good as any later one:
    the line is read once per part, where `re` tries `.*B` from every A on the line (on a long line of A's and no B,
    time quadratic in its length). `pattern` is the same as one regex."""

    def __init__(self, *chains: tuple[str, ...]) -> None:
        self.chains = tuple(tuple(re.compile(part) for part in chain) for chain in chains)
        self.pattern = "|".join(".*".join(f"(?:{part})" for part in chain) for chain in chains)

    def search(self, line: str) -> re.Match[str] | None:
        """The last part's match where every part is found in order; else None."""
        return next((m for chain in self.chains if (m := _in_order(chain, line)) is not None), None)


def _in_order(parts: tuple[re.Pattern[str], ...], line: str) -> re.Match[str] | None:
    m: re.Match[str] | None = None
    for part in parts:
        m = part.search(line, m.end() if m else 0)
        if m is None:
            return None
    return m


def search_at_first(pattern: re.Pattern[str], head: re.Pattern[str], line: str) -> re.Match[str] | None:
    """`pattern.search(line)` for a pattern that is `head` then `.*?` (or `.*`): tried where `head` first matches
    only, since a later head leaves `.*?` less to span and cannot match where the first did not; `re` tries it at
    every head on the line, each to the line's end."""
    first = head.search(line)
    return pattern.match(line, first.start()) if first else None


@dataclass(frozen=True)
class LogFormat:
    """A framework's log format: how to recognise it, read it, and the published way to measure it.

    `warmup` and `window` count ITERATIONS: lines whose interval starts before iteration `warmup` are skipped,
    and the window covers the `window` iterations from the first kept one (None: to the end of the run).
    `last_only` keeps only the last printed line of the run (a whole-run figure such as HF Trainer's).
    """

    name: str
    description: str
    signature: re.Pattern[str] | InOrder  # a line that matches it identifies the format (used by --format auto)
    read: Reader
    warmup: int
    rules: tuple[str, ...] = ("printed",)  # supported rules, the default first
    window: int | None = None
    printed_from: Literal["speed", "seconds"] = "speed"
    # the printed figure needs no batch though the reader gives it as seconds per iteration (DeepSpeed's timer: the
    # given batch over the timer's own rate, which the rule divides by that batch again)
    batch_free: bool = False
    practice: str = ""  # the published rule and where it comes from
    framework: str | None = None  # the framework whose logs these are, as the records and reports name it
    unit: str = "samples/s"
    printed: str = "global"  # what the printed figure is: "global" or "per device" (readers scale to global)
    last_only: bool = False
    # the window starts where the kept lines settle (settle.py); False: the writer ran its own warm-up first and
    # logged only the timed windows after it (dlperf's own log, whose `--warmup-iters auto` measured it already)
    settles: bool = True
    memory_kind: str = "reserved"  # what a printed memory figure is, as dlperf's records name it
    steps_are_iterations: bool = True  # False: `step` numbers progress events, so the timestamp rule needs samples
    record_start: re.Pattern[str] | None = None  # where one of its records begins, to part records merged on a line
    check_reading: str = "the reader's second reading of each kept interval"  # what Point.check is
    success: re.Pattern[str] | None = None  # a line saying the run ended well: failure markers after it are exit noise
    fallback: bool = False  # recognised only where no other format recognises a line of the log (a tqdm bar)
    # where the format's figure covers a whole run or a running stretch (not the run's window): the hook's figure
    # over that same stretch, for a like-for-like comparison of an instrumented run (orchestration/external_run.py)
    same_stretch: Stretch | None = None
    # where the framework's own practice reads another figure than the rule (Point.own): what that figure is
    own_reading: str = ""
    # the default rule gives no figure where no line prints one (DeepSpeed's `step=` lines alone): the time stamps do
    stamps_when_unprinted: bool = False
    # printed rates combine as the window's samples over its time (each line's iterations at its rate), not as their
    # arithmetic mean (the DLPerf reports' rule for MXNet, TF2 and DLLogger rates, kept for those formats)
    rates_over_time: bool = False
    flops_count: str = "the framework's own count"  # how the format's printed TFLOP/s counts FLOPs (for MFU)
    # what the printed figure times where that is less than the whole iteration (a component timer): where it and
    # the time stamps disagree, the stamps, which cover the whole iteration, are taken (crosscheck.py)
    printed_part: str = ""
    # the reader's second reading counts less than the figure by design (real tokens where the figure counts padding)
    check_counts_less: bool = False
    # what the reader's second reading times where that is a part of each iteration (a component timer): where it is
    # the faster, the printed figure, which covers the whole, stands and the second is kept as evidence (crosscheck.py)
    check_part: str = ""
    # the printed figure counts the samples the loop planned (HF Trainer's train_samples_per_second: steps x the
    # global batch), not those it trained: a hook that counted fewer over the same stretch is right (external_run.py)
    counts_planned: bool = False
    # formats whose lines carry the iterations where this one's time a part of them (an engine inside a trainer):
    # a log holding lines of both is theirs, whichever comes first (extract.py's detection)
    yields_to: tuple[str, ...] = ()
    # a line the signature matches holds one of these strings: a literal scan (far faster than a signature that
    # cannot start with a literal) rules out other lines first, which on a megabyte line is most of detection's time
    clue: tuple[str, ...] = ()
    # ... and a line the reader (or `success`) acts on holds one of the clue's strings or of these (a config line it
    # takes its batch from, a line that pauses its clock; `AnyCase` where its pattern ignores case): in a long log
    # the lines holding neither, nor a failure word, are passed over unread (prefilter.py). No clue: all are read.
    reads: tuple[str, ...] = ()

    def recognises(self, line: str) -> bool:
        if self.clue and not any(clue in line for clue in self.clue):
            return False
        return self.signature.search(line) is not None

    def instead_of(self, rule: str) -> str:
        """How a refusal under `rule` ends: the format's other rule to try, or that it has none (a tqdm bar, read by
        its stamps only, is never sent to a rule it refuses)."""
        other = next((r for r in self.rules if r != rule), None)
        if other is not None:
            return f": use --rule {other}"
        return f" (the {self.name} format has the {rule} rule only: it needs more of its lines)"

    def records_in(self, line: str) -> list[str]:
        """The records on one physical line. Processes sharing one output pipe (a launcher that starts its own
        workers) can write one record's text and its line end in two writes, so another process's record lands
        on the same line: `...Loss 5.3e-01 (1.1e+00)Epoch: [0][21/22]  Time 0.009 ...`. Each is read."""
        if self.record_start is None:
            return [line]
        starts = [m.start() for m in self.record_start.finditer(line)]
        if len(starts) < 2:
            return [line]
        cuts = [0, *starts[1:], len(line)]
        return [line[a:b] for a, b in zip(cuts, cuts[1:])]


# a run of digits matched one way only: `\d+\.?\d*` splits a run of n digits n ways, each tried where a match fails
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


def to_float(text: str) -> float:
    """A printed number, thousands separators allowed (torchtitan prints `tps: 6,213`)."""
    return float(text.replace(",", ""))


ISO_TIME = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?"


ISO_PARTS = re.compile(r"^(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?$")


@functools.lru_cache(maxsize=64)
def _midnight(date: str) -> float:
    try:
        return dt.datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError as error:
        raise DataError(f"bad date {date!r} in a time stamp: {error}") from None


def iso_time(text: str) -> float:
    """`2020-09-15 14:29:14.427490` or `2020-09-15 14:29:14,427` (logging's asctime) -> seconds.

    Logs carry no time zone; only differences are used, so every stamp is read as UTC. Dates are cached:
    a log holds few distinct days but millions of stamps.
    """
    m = ISO_PARTS.match(text.strip())
    if not m:
        raise DataError(f"bad time stamp {text!r}")
    hours, minutes, seconds = int(m[2]), int(m[3]), int(m[4])
    if hours > 23 or minutes > 59 or seconds > 60:
        raise DataError(f"bad time of day in time stamp {text!r}")
    fraction = float(f"0.{m[5]}") if m[5] else 0.0
    return _midnight(m[1]) + hours * 3600 + minutes * 60 + seconds + fraction


def stamp_in(pattern: re.Pattern[str], line: str) -> float | None:
    """The ISO time stamp `pattern` (its first group) finds at the start of `line`; None where there is none."""
    m = pattern.match(line)
    return iso_time(m[1]) if m else None


def glog_time(year: int, mmdd: str, clock: str) -> float:
    """glog's `I0826 15:13:29.256277` prefix has no year: the caller supplies one."""
    return iso_time(f"{year:04d}-{mmdd[:2]}-{mmdd[2:]} {clock}")


class StepCounter:
    """(epoch, iteration in epoch) -> one running iteration count; a step back inside an epoch restarts it.

    Epoch lengths are not printed, so the last iteration seen in an epoch stands for its length.
    """

    def __init__(self) -> None:
        self._offset = 0
        self._epoch: int | None = None
        self._last = 0

    def __call__(self, epoch: int | None, iteration: int) -> int:
        if self._epoch is not None and epoch is not None and epoch > self._epoch:
            self._offset += self._last
        elif (epoch is not None and self._epoch is not None and epoch < self._epoch) or iteration < self._last:
            self._offset = 0  # a new run: its count starts again, so the measurer sees the restart
        self._epoch, self._last = epoch, iteration
        return self._offset + iteration


def per_device(value: float, shape: RunShape) -> float:
    """A per-device printed figure -> the global one (every device of a synchronous job does the same work)."""
    return value * shape.world_size


def metrics_in(
    line: str, patterns: Mapping[str, re.Pattern[str]], value: Callable[[str], float] = to_float
) -> tuple[tuple[str, float], ...]:
    """The extra figures (`Point.metrics`) `patterns` find in `line`, each its first group, in the patterns' order."""
    return tuple((name, value(m[1])) for name, pattern in patterns.items() if (m := pattern.search(line)))


def loss(text: str) -> tuple[tuple[str, float], ...]:
    """A line's printed loss as its metric; none where it is no number (`nan`, `inf`: failures.py says so)."""
    return () if text in ("nan", "inf", "-inf") else (("loss", to_float(text)),)


def each_line(
    find: Callable[[str], re.Match[str] | None],
    point: Callable[[re.Match[str], RunShape], Point | None],
    guard: str = "",
) -> Reader:
    """The reader of a format whose every point is one line on its own: `point(m, shape)` of each line holding
    `guard` (a literal scan rules most lines out before the regex is tried) that `find` matches (None: no point)."""

    def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
        for line in lines:
            if guard in line and (m := find(line)) and (found := point(m, shape)) is not None:
                yield found

    return read
