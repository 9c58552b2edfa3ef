"""Peer logs -> run records that `dlperf report` understands, one file at a time, skipping the unusable."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError, DataError
from dlperf.peers.base import RULES, PeerFormat, RunShape
from dlperf.peers.layout import LogInfo, find_logs, parse_log_path
from dlperf.peers.measure import measure
from dlperf.peers.registry import detect, get_format
from dlperf.peers.textlines import log_lines
from dlperf.records.schema import SCHEMA


@dataclass(frozen=True)
class Options:
    """How to read: a format name or `auto`, a rule (None: the format's default), and line counts."""

    format: str = "auto"
    rule: str | None = None
    warmup: int | None = None  # None: the format's default
    window: int | None = None  # None: the format's default; 0: to the end of the log

    def check(self) -> None:
        """Refuse combinations that can never work, before any file is read."""
        if self.rule is not None and self.rule not in RULES:
            raise ConfigError(f"unknown rule {self.rule!r}: choose one of {', '.join(RULES)}")
        if self.format != "auto":
            fmt = get_format(self.format)
            if self.rule is not None and self.rule not in fmt.rules:
                raise ConfigError(
                    f"format {fmt.name} supports only the {' and '.join(fmt.rules)} rule: pass --rule {fmt.rules[0]}"
                )


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


def _formatted_lines(lines: Iterator[str], forced: PeerFormat | None) -> tuple[PeerFormat, Iterator[str]]:
    """The log's format (given, or the first line any format recognises) and the lines from there on."""
    if forced is not None:
        return forced, lines
    seen = False
    for line in lines:
        seen = True
        fmt = detect(line)
        if fmt is not None:
            return fmt, itertools.chain([line], lines)
    if not seen:
        raise DataError("the file is empty")
    raise DataError("no line of a known format: see `dlperf extract --list-formats`, or pass --format NAME")


def read_run(info: LogInfo, options: Options) -> dict[str, Any]:
    """One log's record; DataError says why a log gives none."""
    forced = None if options.format == "auto" else get_format(options.format)
    shape = RunShape(global_batch=info.batch_size * info.world_size, world_size=info.world_size)
    with closing(log_lines(info.path)) as lines:
        fmt, rest = _formatted_lines(lines, forced)
        rule = options.rule or fmt.rules[0]
        if rule not in fmt.rules:
            raise DataError(f"it is a {fmt.name} log, which supports only --rule {' or '.join(fmt.rules)}")
        warmup = fmt.warmup if options.warmup is None else options.warmup
        window = fmt.window if options.window is None else (options.window or None)
        measured = measure(fmt.read(rest, shape), fmt, rule, warmup, window, shape)
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "source": "extract",
        "format": fmt.name,
        "rule": rule,
        "file": str(info.path),
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
        "status": "ok",
        "error": None,
        "throughput": measured.throughput,
        "throughput_per_device": measured.throughput / info.world_size,
        "throughput_unit": fmt.unit,
        "warmup_lines": warmup,
        "kept_lines": measured.kept,
    }
    if measured.latency_ms is not None:
        record["latency_ms"] = {"mean": measured.latency_ms}
    if measured.metrics:
        record["peer_metrics"] = measured.metrics
    return record


def extract_dir(root: Path, options: Options) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """Records of every usable log under `root`, and the logs skipped with the reason."""
    if not root.is_dir():
        raise DataError(f"log folder {root} does not exist or is not a folder")
    options.check()
    logs = find_logs(root)
    if not logs:
        raise DataError(f"no *.log files under {root}: expected <N>n<G>g/<model>_b<batch>_<precision>_<repeat>.log")
    records, skipped = [], []
    for path in logs:
        try:
            records.append(read_run(parse_log_path(path), options))
        except DataError as error:
            skipped.append(Skipped(path, str(error)))
        except OSError as error:
            skipped.append(Skipped(path, f"cannot read it: {error.strerror or error}"))
    return records, skipped
