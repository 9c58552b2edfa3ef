"""Framework logs -> run records that `dlperf report` understands, one file at a time, skipping the unusable."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError, DataError
from dlperf.framework_logs.base import RULES, LogFormat, RunShape
from dlperf.framework_logs.crosscheck import cross_check
from dlperf.framework_logs.devices import logged_accelerator
from dlperf.framework_logs.display import path_text, shown
from dlperf.framework_logs.failures import WORDS as FAILURE_WORDS
from dlperf.framework_logs.failures import FailureWatch
from dlperf.framework_logs.measure import CoarseLines, Measured, measure
from dlperf.framework_logs.prefilter import Prefilter
from dlperf.framework_logs.published_names import LogInfo, Skipped, find_logs, parse_log_path
from dlperf.framework_logs.registry import FORMATS, detect, get_format
from dlperf.framework_logs.textlines import (
    UNTERMINATED,
    LogLines,
    holding,
    open_regular,
    rejoin_wrapped,
    strip_prefixes,
)
from dlperf.metrics.peaks import lookup_peak, table_precision
from dlperf.records.schema import SCHEMA


@dataclass(frozen=True)
class Options:
    """How to read: a format name or `auto`, a rule (None: the format's default), and line counts."""

    format: str = "auto"
    rule: str | None = None
    warmup: int | None = None  # iterations; None: the format's default
    window: int | None = None  # iterations; None: the format's default; 0: to the end of the run
    format_flag: str = "--format"  # how the CLI command that reads names the format option (`dlperf run`: --log-format)
    accelerator: str | None = None  # the device the logs ran on (a peak-table name): MFU from their printed TFLOP/s

    def check(self) -> None:
        """Refuse combinations that can never work, before any file is read."""
        if any(count is not None and count < 0 for count in (self.warmup, self.window)):
            raise ConfigError("--warmup and --window count iterations and must be non-negative")
        if self.rule is not None and self.rule not in RULES:
            raise ConfigError(f"unknown rule {self.rule!r}: choose one of {', '.join(RULES)}")
        if self.format != "auto":
            fmt = get_format(self.format)  # an unknown name is refused here
            if self.rule is not None and self.rule not in fmt.rules:
                raise ConfigError(
                    f"format {fmt.name} supports only the {' and '.join(fmt.rules)} rule: pass --rule {fmt.rules[0]}"
                )


def _formatted_lines(
    lines: Iterator[str], forced: LogFormat | None, flag: str, raw: LogLines
) -> tuple[LogFormat, Iterator[str]]:
    """The log's format (given, or the first line any format recognises) and the lines from there on; None for the
    lines where the file must be read again as that format (a fallback format's, or one an engine's lines yield to)."""
    if forced is not None:
        return forced, lines
    fallback = None
    for line in lines:
        fmt = detect(line)
        if fmt is not None and fmt.yields_to:
            return _iterations_format(fmt, lines), None
        if fmt is not None and not fmt.fallback:
            return fmt, itertools.chain([line], lines)
        fallback = fallback or fmt
    if fallback is not None:
        return fallback, None
    if raw.empty:
        raise DataError("the file is empty")
    raise DataError(f"no line of a known format: see `dlperf extract --list-formats`, or pass {flag} NAME")


def _iterations_format(engine: LogFormat, lines: Iterator[str]) -> LogFormat:
    """The format of the lines that carry the iterations: the first format `engine` yields to that recognises a
    later line (Megatron-DeepSpeed's `iteration ... |` lines around DeepSpeed's engine lines), and on from it while
    the format found yields too (DeepSpeed's pipeline-engine line, printed just before Megatron-DeepSpeed's own:
    the iteration line still names the format), else `engine`. The file is read again as the format found, so the
    lines looked at here are not held."""
    found = engine
    for line in lines:
        if not found.yields_to:
            break
        found = next((f for f in map(get_format, found.yields_to) if f.recognises(line)), found)
    return found


def _holds_mllog(path: Path, chunk: int = 1 << 20) -> bool:
    """Whether the file holds an MLPerf event anywhere: a byte search, far cheaper than reading lines."""
    marker, tail = b":::MLLOG ", b""
    with open_regular(path) as f:
        while block := f.read(chunk):
            if marker in block or marker in tail + block[: len(marker)]:
                return True
            tail = block[-len(marker) :]
    return False


def read_run(info: LogInfo, options: Options) -> dict[str, Any]:
    """One log's record: `status` ok with the figures, or failed with the reason; DataError for no record."""
    forced = _forced_format(info, options)
    shape = RunShape(global_batch=info.batch_size * info.world_size, world_size=info.world_size, workload=info.model)
    watch = FailureWatch()
    with closing(LogLines(info.path, _needed(forced))) as raw:
        recognised = _Recognised(forced)
        lines = watch.watch(strip_prefixes(line) for run in raw.spans() for line in rejoin_wrapped(run, recognised))
        try:
            fmt, rest = _formatted_lines(lines, forced, options.format_flag, raw)
        except DataError as error:
            return _failed(info, shape, None, "printed", _failure_or(error, watch))
        recognised.fmt, raw.prefilter = fmt, _needed(fmt)
        if rest is None:  # a fallback's lines, or an engine's that yield: read the whole file again as that format
            return read_run(info, dataclasses.replace(options, format=fmt.name))
        watch.success = fmt.success
        rule, warmup, window = _reading(fmt, options)
        measured = _measure(fmt, rest, shape, (rule, warmup, window), watch)
    reason = watch.reason()
    if reason is not None:
        return _failed(info, shape, fmt, rule, reason)
    assert measured is not None  # a log gives no figure only where it says why its run failed
    if raw.unterminated:
        measured = dataclasses.replace(measured, notes=(*measured.notes, UNTERMINATED))
    record = _measured_record(info, shape, fmt, (rule, options.rule is not None), measured, window)
    if options.accelerator:
        record.update(printed_mfu(measured.metrics.get("tflops_per_device"), fmt, options.accelerator, info.precision))
    return record


def _needed(fmt: LogFormat | None) -> Prefilter | None:
    """The lines a reading needs: those holding a string of the format's, or of any format's while it is not known
    (their readers' too: lines passed over before it is known are none its reader needs), or a failure word; None
    (every line) for a format without a clue."""
    formats = FORMATS if fmt is None else (fmt,)
    if not all(f.clue for f in formats):
        return None
    return holding((*(word for f in formats for word in (*f.clue, *f.reads)), *FAILURE_WORDS))


class _Recognised:
    """Whether a line is a record of the log's format once it is known, of any format before."""

    def __init__(self, fmt: LogFormat | None) -> None:
        self.fmt = fmt

    def __call__(self, text: str) -> bool:
        stripped = strip_prefixes(text)
        return self.fmt.recognises(stripped) if self.fmt else detect(stripped) is not None


def _failure_or(error: DataError, watch: FailureWatch) -> str:
    """Why the run failed, where the log says; else `error`, raised: the log gives no record."""
    reason = watch.reason()
    if reason is None:
        raise error
    return reason


def _measure(
    fmt: LogFormat, rest: Iterator[str], shape: RunShape, reading: tuple[str, int, int | None], watch: FailureWatch
) -> Measured | None:
    """The rule's figure over the format's lines, read to the end: a failure after the last window line still fails
    the run; None where no figure came and the log says why its run failed."""
    rule, warmup, window = reading
    records = (strip_prefixes(record) for line in rest for record in fmt.records_in(line))
    try:
        measured = measure(fmt.read(records, shape), fmt, rule, warmup, window, shape, on_point=watch.progress)
    except DataError as error:
        for _ in records:  # the failure that explains a missing figure may come later in the log
            pass
        _failure_or(error, watch)
        return None
    for _ in records:
        pass
    return measured


def printed_mfu(tflops: float | None, fmt: LogFormat, accelerator: str, precision: str) -> dict[str, Any]:
    """MFU of the log's own TFLOP/s per device (the mean of the window's printed figures, by the framework's own FLOPs
    count, `LogFormat.flops_count`) against the named device's datasheet peak at the run's precision; the record
    names the peak, and says why where there is none."""
    lookup = lookup_peak(accelerator, table_precision(precision))
    fields: dict[str, Any] = {**lookup.as_record(), "mfu_peak_precision": table_precision(precision)}
    if tflops is None:
        return {**fields, "mfu": None, "mfu_note": f"the {fmt.name} log prints no TFLOP/s per device"}
    fields.update(tflops_per_device=tflops, flops_source=f"the log's printed TFLOP/s per device: {fmt.flops_count}")
    if lookup.tflops is None:
        return {**fields, "mfu": None, "mfu_note": lookup.reason}
    return {**fields, "mfu": tflops / lookup.tflops, "mfu_note": None}


def _forced_format(info: LogInfo, options: Options) -> LogFormat | None:
    """The format asked for, or MLPerf's for a file holding MLLOG events (whatever it prints first); else None."""
    if options.format != "auto":
        return get_format(options.format)
    return get_format("mlperf") if _holds_mllog(info.path) else None


def _reading(fmt: LogFormat, options: Options) -> tuple[str, int, int | None]:
    """The rule, warm-up and window to read this format's log with: the options', else the format's own."""
    rule = options.rule or fmt.rules[0]
    if rule not in fmt.rules:
        raise DataError(f"it is a {fmt.name} log, which supports only --rule {' or '.join(fmt.rules)}")
    warmup = fmt.warmup if options.warmup is None else options.warmup
    window = fmt.window if options.window is None else (options.window or None)
    return rule, warmup, window


def _measured_record(
    info: LogInfo,
    shape: RunShape,
    fmt: LogFormat,
    reading: tuple[str, bool],
    measured: Measured,
    window: int | None,
) -> dict[str, Any]:
    """An ok record: the figures the rule measured, with the second reading beside them (`reading`: the rule, and
    whether the user asked for it, which then stands where the readings disagree: crosscheck.cross_check)."""
    rule, asked = reading
    unit = measured.unit or fmt.unit
    check = cross_check(measured, rule, unit, shape, fmt=fmt, asked=asked)
    taken = check.pop("taken", None)
    if taken is not None:  # the printed figure times a part of each iteration: the stamps' reading is the figure
        rule = "timestamp"
        measured = dataclasses.replace(measured, throughput=taken, notes=(*measured.notes, check["note"]))
    record = _base(info, shape, fmt, rule)
    record["unit"] = unit
    record.update(
        status="ok",
        error=None,
        throughput=measured.throughput,
        throughput_per_device=measured.throughput / info.world_size,
        warmup_iterations=measured.warmup,
        window_iterations=window,
        kept_lines=measured.kept,
        kept_steps=[measured.first_step, measured.last_step],
        window_note=measured.window_note,
        rejected_lines=measured.rejected_lines,
        rejected_reason=measured.rejected_reason,
        cross_check=check,
        reading_notes=list(measured.notes),
    )
    if measured.contradictions:
        record["contradictions"] = list(measured.contradictions)
    if measured.own is not None and fmt.own_reading:
        record["own_reading"] = {
            "figure": measured.own,
            "ratio": measured.throughput / measured.own,
            "reading": fmt.own_reading,
        }
    if measured.latency_ms is not None:
        record["latency_ms"] = {"mean": measured.latency_ms}
    if measured.memory_mib is not None:
        record["peak_memory_mib"] = {fmt.memory_kind: measured.memory_mib}
    if measured.metrics:
        record["peer_metrics"] = measured.metrics
    if measured.runs > 1:
        record["warning"] = (
            f"{shown(info.path)}: {measured.runs} runs in one file (the iteration counter restarts): "
            f"measured the last one that gives a figure"
        )
    return record


def _base(info: LogInfo, shape: RunShape, fmt: LogFormat | None, rule: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "extracted",
        "source": "extract",
        "format": fmt.name if fmt else None,
        "rule": rule,
        "file": path_text(info.path),
        "model": info.model,
        "case": info.case,
        "group": info.group,
        "repeat": info.repeat,
        "nodes": info.nodes,
        "devices_per_node": info.devices_per_node,
        "world_size": info.world_size,
        "batch_size": info.batch_size,
        "global_batch_size": shape.global_batch,
        "precision": info.precision,
        "unit": fmt.unit if fmt else None,
        "printed_figure": fmt.printed if fmt else None,
        "framework": fmt.framework if fmt else None,
        "accelerator": logged_accelerator(info.path, info.world_size, info.devices_per_node),
    }


def _failed(info: LogInfo, shape: RunShape, fmt: LogFormat | None, rule: str, reason: str) -> dict[str, Any]:
    record = _base(info, shape, fmt, rule)
    record.update(status="failed", error=reason, throughput=None, throughput_per_device=None)
    return record


def extract_dir(root: Path, options: Options) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """Records of every usable log under `root`, and the logs skipped with the reason."""
    if not root.is_dir():
        raise DataError(f"log folder {shown(root)} does not exist or is not a folder")
    options.check()
    logs, skipped = find_logs(root)
    if not logs and not skipped:
        raise DataError(
            f"no *.log files under {shown(root)}: expected <N>n<G>g/<model>_b<batch>_<precision>_<repeat>.log"
        )
    records = []
    for path in logs:
        try:
            records.append(read_run(parse_log_path(path), options))
        except DataError as error:
            skipped.append(Skipped(path, _why(error)))
        except OSError as error:
            skipped.append(Skipped(path, f"cannot read it: {error.strerror or error}"))
    return records, sorted(skipped, key=lambda s: s.path)


def extract_file(path: Path, options: Options, info: LogInfo) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """One log read without the folder layout: its run's shape is given (`--nodes`, `--devices-per-node`,
    `--batch-size`), not read from its path."""
    options.check()
    if not path.is_file():
        raise DataError(f"log {shown(path)} does not exist or is not a regular file")
    try:
        return [read_run(info, options)], []
    except DataError as error:
        return [], [Skipped(path, _why(error))]
    except OSError as error:
        return [], [Skipped(path, f"cannot read it: {error.strerror or error}")]


def _why(error: DataError) -> str:
    """Why a log gave no record; for lines too coarse, what else times the script."""
    if isinstance(error, CoarseLines):
        return f"{error}, or under `dlperf run --command`, whose start-up hook times every step"
    return str(error)


def record_target(records_dir: Path, record: dict[str, Any]) -> Path:
    """Where a record is written: records/<model>/<case>/<the log's stem>.json. parse_log_path accepted only plain
    names for every part of the stem, so none of them can leave `records_dir` (the caller checks that too)."""
    return records_dir / record["model"] / record["case"] / f"{Path(record['file']).stem}.json"
