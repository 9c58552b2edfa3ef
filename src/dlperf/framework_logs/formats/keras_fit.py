"""Keras `Model.fit` progress lines, Keras 3 and tf.keras 2, at both verbosities (every backend prints them alike):

Epoch 2/4
32/32 - 2s - 59ms/step - loss: 2.2913                                   (Keras 3 verbose=2: one line per epoch)
32/32 ━━━━━━━━━━━━━━━━━━━━ 0s 100ms/step - loss: 2.3901                  (Keras 3 verbose=1: a bar redrawn with `\\r`)
1875/1875 [==============================] - 7s 4ms/step - loss: 0.0909  (tf.keras 2 verbose=1)
1500/1500 - 4s - loss: 0.5467 - accuracy: 0.8094 - 4s/epoch - 2ms/step  (tf.keras 2.9+ verbose=2; before 2.9 the
                                                                         line ends at its metrics)

Keras' `Progbar` (keras/src/utils/progbar.py) prints the time per step as the mean over the epoch so far, after
its first step: (now - the end of step 1) / (steps - 1), rounded to whole `us`, `ms` or `s` (`1s/step` once a step
takes a second). The verbose=1 bar's figure is that running mean at each redraw, so only the epoch's `N/N` line
is read: its mean over steps 2..N, one figure per epoch. The epoch's last `N/N` line is printed at the epoch's end,
after validation where fit validates (`val_` metrics): then the bar's last redraw before it is read (verbose=1),
or the figure includes validation, as Keras' own does (verbose=2, said in the record). Whichever of the printed
step time and the epoch's elapsed `Ts` / N (whole seconds, every step) is known more precisely is used; a figure
the rounding leaves unknown to 2 % is refused (rules.PRECISION).

tf.keras 2's verbose=2 line (keras/utils/generic_utils.py `Progbar.update`, verbose == 2, tf.keras 2.9-2.15) is
another clock: `- Ns` is the time since the epoch began at the line (validation included), `T/epoch` the time from
the epoch's start to its last batch (`_time_at_epoch_end`: no validation), `t/step` that over the epoch's steps,
the first included; each rounded to its unit. The finest of them times every step of the epoch. TensorFlow 2.0
and 2.1 counted samples, not steps, where fit was given arrays (`Train on 60000 samples` before the epochs): the
epoch's steps are then its samples / the global batch.

Rule: the first epoch (compilation, start-up) is skipped; global batch / the mean step time of every later epoch.
The batch is the case's: fit's `batch_size` is the global batch of a data-parallel job. Most tutorials' epochs
are a few seconds of millisecond steps: printed so, they are refused as too coarse (rules.PRECISION).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dlperf.framework_logs.base import HookTrace, LogFormat, Point, RunShape, hook_over_steps

EPOCH_TIME = "Keras' printed epoch time"
EPOCH = re.compile(r"^\s*Epoch (\d+)/(\d+)\s*$")
LINE = re.compile(
    r"^\s*(?P<n>\d+)/(?P<total>\d+) (?:- (?P<elapsed>\d+)s - ?|━+ (?P<clock>\d+(?::\d\d){0,2})s? "
    r"|\[[=>.]*\] - (?P<bar>\d+)s )(?P<time>\d+)(?P<unit>us|ms|s)/(?P<per>step|sample)(?P<rest>.*)$"
)
# tf.keras 2's verbose=2 epoch line: elapsed, metrics, and (2.9+) the epoch's time and its mean step time; the
# metrics end at a non-space, so the line's end is looked for once per run of spaces (not from each of its spaces)
LINE_2 = re.compile(
    r"^\s*(?P<n>\d+)/(?P<total>\d+) - (?P<elapsed>\d+)s - (?P<rest>(?!\d+(?:us|ms|s)/step)(?:.*?\S)?)"
    r"(?: - (?P<epoch>\d+)(?P<eunit>us|ms|s)/epoch - (?P<time>\d+)(?P<unit>us|ms|s)/step)?\s*$"
)
SAMPLES = re.compile(r"\bTrain on (\d+) samples")
SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass
class _Epoch:
    """One epoch's lines that end it (`N/N`): the last one, and the last one before validation."""

    last: re.Match[str] | None = None
    before_validation: re.Match[str] | None = None

    def point(self, offset: int, batch: int, samples: bool = False) -> Point | None:
        """The epoch's figure: its step time, from the step time or the elapsed seconds, whichever is finer.
        `samples`: the line counts samples (TensorFlow 2.0/2.1 given arrays), `batch` of them a step."""
        validated = self.last is not None and "val_" in self.last["rest"]
        m = self.before_validation if validated and self.before_validation is not None else self.last
        if m is None:
            return None
        if m.re is LINE_2:
            return _keras2_point(m, offset, batch, samples)
        # the last line's clock is the epoch's elapsed time (verbose=2 always, verbose=1 at the end)
        return _progbar_point(m, offset, final=m is self.last, validated=validated)


def _progbar_point(m: re.Match[str], offset: int, final: bool, validated: bool) -> Point:
    """An epoch's `LINE`: its printed mean step time, or its elapsed whole seconds / its steps where finer."""
    steps, unit = int(m["total"]), SECONDS[m["unit"]]
    seconds, resolution = int(m["time"]) * unit, unit / 2
    note = f"Keras' printed `{m['unit']}/{m['per']}`: the epoch's mean {m['per']} time after its first update"
    elapsed = _elapsed_seconds(m, final)
    if final and not validated and elapsed and 0.5 / elapsed < (resolution / seconds if seconds else 1.0):
        seconds, resolution = elapsed / steps, 0.5 / steps
        note = f"{EPOCH_TIME} (whole seconds) / the epoch's steps, where finer than its step time"
    if final and validated:
        note += "; it includes the validation after the epoch (Keras' own figure)"
    per_sample = m["per"] == "sample"  # TensorFlow 2.0/2.1 given arrays: the count and the time are of samples
    return Point(step=offset + steps, start=offset, seconds=seconds, resolution=resolution, note=note,
                 batch=1 if per_sample else None)  # fmt: skip


def _elapsed_seconds(m: re.Match[str], final: bool) -> int:
    """The epoch's elapsed whole seconds at the line (0: not printed): verbose=2's `- Ns -`, tf.keras 2's bar's,
    Keras 3's bar clock where the line is the epoch's last."""
    return int(m["elapsed"] or m["bar"] or (m["clock"] if final and m["clock"].isdigit() else 0))


def _keras2_point(m: re.Match[str], offset: int, batch: int, samples: bool) -> Point:
    """tf.keras 2 verbose=2: every step of the epoch by the finest of its clocks (the epoch's time, its mean step
    time x steps, the elapsed time with validation)."""
    steps = max(round(int(m["total"]) / batch), 1) if samples else int(m["total"])
    validated = "val_" in m["rest"]
    clocks = [(int(m["elapsed"]) / steps, 0.5 / steps, "elapsed whole seconds (validation included)" if validated
               else "elapsed whole seconds")]  # fmt: skip
    if m["epoch"] is not None:
        unit, step_unit = SECONDS[m["eunit"]], SECONDS[m["unit"]]
        clocks.append((int(m["epoch"]) * unit / steps, unit / 2 / steps, f"`{m['eunit']}/epoch` (no validation)"))
        clocks.append((int(m["time"]) * step_unit, step_unit / 2, f"`{m['unit']}/step` (the epoch's mean)"))
    seconds, resolution, what = min(clocks, key=lambda c: c[1] / c[0] if c[0] else float("inf"))
    note = f"{EPOCH_TIME}: tf.keras 2's {what} / every step of the epoch"
    if samples:
        note += "; TensorFlow 2.0/2.1 counted samples: steps = samples / the global batch"
    return Point(step=offset + steps, start=offset, seconds=seconds, resolution=resolution, note=note)


def read(lines: Iterable[str], shape: RunShape) -> Iterator[Point]:
    fit = _FitLines(shape.global_batch)
    for line in lines:
        if (point := fit.feed(line)) is not None:
            yield point
    if (point := fit.close_epoch()) is not None:
        yield point


def _match(line: str) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    """(an `Epoch k/N` header, a progress line): at most one of them."""
    if "Epoch" in line and (header := EPOCH.match(line)) is not None:
        return header, None
    m = LINE.match(line) if "/step" in line or "/sample" in line else None
    if m is None and "s - " in line:
        m = LINE_2.match(line)
    return None, m


class _FitLines:
    """The epochs of one log as its lines come: an epoch's figure is known when the next one begins."""

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.offset = 0  # the steps of the epochs before this one
        self.epoch = _Epoch()
        self.previous = 0  # the step count of the epoch's last progress line
        self.total = ""  # the epoch's printed total steps
        self.samples = False  # TensorFlow 2.0/2.1 counts samples (`Train on N samples`)

    def feed(self, line: str) -> Point | None:
        """The figure of the epoch the line closes, if it closes one."""
        header, m = _match(line)
        if m is None:
            if header is None:
                self.samples = self.samples or SAMPLES.match(line) is not None
                return None
            return self.close_epoch()
        n = int(m["n"])
        if n < self.previous and m["total"] != self.total:  # another bar (model.evaluate, predict) after the
            return None  # epoch's, no `Epoch k/N` before it: not training
        closed = self.close_epoch() if n < self.previous else None  # a new epoch: the one before is complete
        self.previous, self.total = n, m["total"]
        if n == int(m["total"]):
            self.epoch.last = m
            if "val_" not in m["rest"]:
                self.epoch.before_validation = m
        return closed

    def close_epoch(self) -> Point | None:
        """The current epoch's figure (None: it has none); the next epoch begins."""
        point = self.epoch.point(self.offset, self.batch, self.samples)
        if point is not None:
            self.offset = point.step or self.offset
        self.epoch, self.previous = _Epoch(), 0
        return point


def _timed_steps(point: Point) -> tuple[int, int]:
    """The hook's steps an epoch's figure covers: its steps after the first (Progbar's mean), or all of them where
    its whole-second time was read."""
    every = bool(point.note and point.note.startswith(EPOCH_TIME))
    return (point.start or 0) + (0 if every else 1), point.step or 0


def same_stretch(
    trace: HookTrace, points: list[Point], kept: tuple[int, int] | None
) -> tuple[float, float, str] | None:
    """The hook's time of the steps each kept epoch's figure covers."""
    found = hook_over_steps(trace, points, kept, _timed_steps)
    if found is None or kept is None:
        return None
    return found[0], found[1], f"the {found[2]} kept epochs' steps after their first, to step {kept[1]}"


FORMATS = (
    LogFormat(
        name="keras",
        description="Keras Model.fit progress (Keras 3 `32/32 - 2s - 59ms/step` or its bar's `32/32 ━━━ 0s "
        "100ms/step`; tf.keras 2's `1875/1875 [====] - 7s 4ms/step` and `1500/1500 - 4s - loss: ... - 4s/epoch - "
        "2ms/step`): each epoch's printed step time",
        signature=re.compile(
            r"^\s*\d+/\d+ (?:- \d+s - ?|━+ \d+(?::\d\d){0,2}s? |\[[=>.]*\] - \d+s )\d+(?:us|ms|s)/(?:step|sample)"
            r"|^\s*\d+/\d+ - \d+s - loss: "
        ),
        clue=("s/step", "s/sample", "s - loss: "),
        reads=("Epoch", "s - ", "Train on "),
        read=read,
        warmup=1,
        printed_from="seconds",
        practice="Keras' Progbar: each epoch's mean step time after its first step; the first epoch (compiling) "
        "skipped; global batch / the mean of the later epochs'",
        same_stretch=same_stretch,
    ),
)
