"""The like-for-like reading of an instrumented `--command` run. Its record's figure is the hook's over the run's
window; a script's own printed figure may cover another stretch (transformers' whole run, Rich's bar since its
first step, nanoGPT's timed iterations), so the two differ by what they cover, not by error. Where the script's
format says what its figure covers (`LogFormat.same_stretch`), the hook's figure over that same stretch is the one
held to the script's: they must agree within the noise, or the log contradicts itself.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

from dlperf.errors import DataError
from dlperf.framework_logs.base import LogFormat, RunShape
from dlperf.framework_logs.formats.dlperf_steps import trace
from dlperf.framework_logs.textlines import LogLines, strip_prefixes


def hook_over_script_stretch(
    log: Path, steps: Path, fmt: LogFormat, shape: RunShape, kept: tuple[int, int] | None
) -> tuple[float, float | None, str] | None:
    """The hook's samples/s over the stretch `fmt`'s figure covers in `log`, the script's figure over it where that
    is not its printed one, and what it is; None where the format says no stretch or the side file lacks it."""
    if fmt.same_stretch is None:
        return None
    try:
        with closing(LogLines(steps)) as raw:
            hooked = trace(raw, shape.global_batch)
        with closing(LogLines(log)) as raw:
            lines = (strip_prefixes(r) for line in raw for r in fmt.records_in(strip_prefixes(line)))
            points = list(fmt.read(lines, shape))
    except DataError:
        return None
    return fmt.same_stretch(hooked, points, kept)
