"""`dlperf report`: tables, summary and plots from a results folder, or several folders side by side."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from dlperf.errors import ConfigError
from dlperf.escape import terminal
from dlperf.records.load import find_records, load_records
from dlperf.records.schema import COMMBENCH_SCHEMA, MAXBATCH_SCHEMA, Record, RunRecord
from dlperf.records.sweep_runs import partial_note
from dlperf.reporting.commbench_table import read_commbench
from dlperf.reporting.export import TENSORBOARD_HINT
from dlperf.reporting.report import check_one_sweep
from dlperf.reporting.results_writes import FolderReport, write_cross_source, write_folder_report
from dlperf.reporting.sources import BY_CHOICES, build_comparison, load_sources
from dlperf.spec import setting

FORMAT_CHOICES = {
    "md": {"md"},
    "json": {"json"},
    "png": {"png"},
    "html": {"html"},
    "all": {"md", "json", "png", "html"},
}
ENGINES_DIR = "engines"
FRAMEWORKS_DIR = "frameworks"


DESCRIPTION = (
    "Read every run record under DIR and write report.md (published-style tables), summary.json "
    "(per model, group and case: average_speed, median_speed, speedup, batch_size_per_device, ...) and PNG "
    "plots of throughput and speedup against the ideal line. With several folders (native runs or "
    "`dlperf extract` output, each a source labelled by --label or its folder name) write the cross-source "
    "summary instead: one row per source at the largest topology they share, per-case tables with the ratio "
    "to the first source, their environment differences, overlay plots and report.html."
)


@dataclass(frozen=True)
class ReportOptions:
    dir: tuple[str, ...] = setting((), "results folders written by run, sweep or extract", positional="+")
    label: tuple[str, ...] = setting(
        (), "name of each folder's source, in order (default: its name)", bound="non-empty", metavar="LABEL"
    )
    by: str = setting(
        "source",
        "compare folders (source), the engines in them (engine; one folder's go to DIR/engines by default) "
        "or the frameworks and versions (framework: each --command its own; DIR/frameworks by default)",
        choices=BY_CHOICES,
    )
    format: str = setting(
        "all", "what to write (default all: md, json, png and report.html)", choices=tuple(sorted(FORMAT_CHOICES))
    )
    out: str | None = setting(
        None,
        "where to write (default: DIR itself, whose report is rebuilt; required with several folders)",
        bound="non-empty",
    )
    overwrite: bool = setting(False, "with --out: replace a report already there (default: refuse)")
    merge: bool = setting(False, "pool the records of several sweeps under DIR (default: refuse)")
    predict: tuple[str, ...] = setting(
        (),
        "add a predicted-speedup column to the scaling tables from this commbench record (one node: the "
        "intra-node link; several: the inter-node link), beside the measured speedup; repeatable",
        metavar="COMMBENCH_RECORD",
    )
    overlap: bool = setting(
        True,
        "with --predict: hide communication behind the backward pass as DDP does; --no-overlap hides none (as "
        "`dlperf predict --no-overlap`)",
    )
    tensorboard: str | None = setting(
        None,
        "also write each table's scaling (throughput, per device, speedup, efficiency, CV against devices) as "
        f"TensorBoard event files under LOGDIR (needs {TENSORBOARD_HINT})",
        metavar="LOGDIR",
    )


OPTIONS = (ReportOptions,)


def run(args: argparse.Namespace) -> int:
    several = len(args.dir) > 1 or args.label or args.by != "source"
    written = _cross_source(args) if several else _single(args)
    for path in written:
        print(terminal(path))
    return 0


def _cross_source(args: argparse.Namespace) -> list[Path]:
    """Several folders (or one folder's engines or frameworks) side by side."""
    if args.tensorboard or args.predict:
        raise ConfigError("--tensorboard and --predict apply to one folder's report: give one DIR")
    out, own = _comparison_out(args)
    comparison = build_comparison(load_sources(args.dir, args.label, args.by))
    return write_cross_source(comparison, out, FORMAT_CHOICES[args.format], replace=args.overwrite or own)


def _comparison_out(args: argparse.Namespace) -> tuple[Path, bool]:
    """Where the cross-source report goes, and whether that is inside the one folder it compares: one folder's
    engines side by side go next to its own report, in DIR/engines, rebuilt like that report."""
    if args.out:
        return Path(args.out), False
    if len(args.dir) == 1 and args.by in ("engine", "framework"):
        return Path(args.dir[0]) / (ENGINES_DIR if args.by == "engine" else FRAMEWORKS_DIR), True
    raise ConfigError("several folders (or --label) need --out DIR for the cross-source report")


def _single(args: argparse.Namespace) -> list[Path]:
    """One folder's report, in the folder itself or in --out."""
    root = Path(args.dir[0])
    records, others = _folder_records(root, args.merge)
    predict = [read_commbench(path) for path in args.predict]
    if not args.overlap and not predict:
        raise ConfigError("--no-overlap changes the --predict column: add --predict COMMBENCH_RECORD")
    out = Path(args.out) if args.out else None
    formats = FORMAT_CHOICES[args.format]
    partial = partial_note(root, len(records))
    if partial:
        print(f"dlperf: {terminal(root)}: {terminal(partial)}", file=sys.stderr)
    return write_folder_report(
        FolderReport(
            root, records, others, out, formats, predict, args.overlap, args.tensorboard, args.overwrite, partial
        )
    )


def _folder_records(root: Path, merge: bool) -> tuple[list[RunRecord], list[Record]]:
    """The folder's run records (one sweep's unless `merge`) and its commbench and maxbatch records."""
    # quiet: the run records' search below names every entry left out
    others = find_records(root, (COMMBENCH_SCHEMA, MAXBATCH_SCHEMA), on_skip=lambda *_: None)
    records = find_records(root) if others else load_records(root)  # commbench alone is a report too
    if not merge:
        check_one_sweep(records, root)
    return records, others
