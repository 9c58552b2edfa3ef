"""An MLPerf log's own evidence about its printed figures. Its keys do not say whether a throughput is per device or
global, so an epoch's time stamps x the data set's size are a second reading of the next printed figure, and decide:
global if it agrees, per device if x the world size agrees (retinanet v5.0 declares `local_batch_size` but prints
global figures); without evidence, a declared `local_batch_size` means per device (NVIDIA's SSD)."""

from __future__ import annotations

from typing import Any

from dlperf.framework_logs.formats.mlperf.counting import Counts
from dlperf.framework_logs.formats.mlperf.events import number

AGREE = 0.10  # two readings of one interval agree within 10 % (an epoch's time includes its data loading)


def close(a: float, b: float) -> bool:
    return b > 0 and abs(a / b - 1) <= AGREE


class Evidence:
    """The epochs' own figures (the data set over an epoch's time), held to check the next printed throughput, and
    the scale they decide for the printed figures: per device (x the world size) or global (1)."""

    def __init__(self, world: int, counts: Counts) -> None:
        self.world, self.counts = world, counts
        self.starts: dict[float, float] = {}
        self.first_start: float | None = None
        self.figure: float | None = None  # the last finished epoch's figure, for the next throughput event
        self.seconds: float | None = None  # the last finished epoch's time
        self.decided: float | None = None  # the scale, once an epoch decides it
        self.note: str | None = None

    def factor(self) -> float:
        if self.decided is not None:
            return self.decided
        return float(self.world) if self.counts.local_declared else 1.0

    def epoch_start(self, metadata: dict[str, Any], stamp: float) -> None:
        if (epoch := number(metadata.get("epoch_num"))) is not None:
            self.starts[epoch] = stamp
        if self.first_start is None:
            self.first_start = stamp
        self.figure = None

    def epoch_stop(self, metadata: dict[str, Any], stamp: float, size: float | None) -> None:
        """An epoch's own figure: the data set over its time; not for an epoch far shorter than the one before,
        which did not train the data set (a run that stopped inside it)."""
        epoch = number(metadata.get("epoch_num"))
        start = self.starts.pop(epoch, None) if epoch is not None else None
        if start is None or not size or stamp <= start:
            return
        seconds, last = stamp - start, self.seconds
        self.seconds = seconds
        if last is None or seconds >= last / 2:
            self.figure = size / seconds

    def check(self, speed: float | None) -> float | None:
        """The last finished epoch's own figure checks the next printed throughput (and decides its scale)."""
        if speed is None or self.figure is None:
            return None
        self._decide(speed, self.figure)
        check, self.figure = self.figure, None
        return check

    def _decide(self, raw: float, figure: float) -> None:
        """Per device or global, from an epoch's own figure (first decisive epoch)."""
        if self.decided is not None:
            return
        if close(raw, figure):
            self.decided = 1.0
            declared = " although it declares a local_batch_size" if self.counts.local_declared else ""
            self.note = f"printed throughput is global{declared}: an epoch's time stamps x the data set give "
            self.note += f"{figure:.6g} samples/s against {raw:.6g} printed"
        elif self.world > 1 and close(raw * self.world, figure):
            self.decided = float(self.world)
            self.note = (
                f"printed throughput is per device (x {self.world}): an epoch's time stamps x the data set give "
                f"{figure:.6g} samples/s against {raw:.6g} printed"
            )
