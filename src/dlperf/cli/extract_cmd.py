"""`dlperf extract`: other frameworks' training logs -> the same summary, tables and plots as `dlperf report`.

Exit status: 0 when every log gave a record (a failed run is a record, with its reason), 3 when some logs were
skipped (each named on stderr with the reason; the report holds the others), 2 for bad usage or when no log
gave a record. Nothing here imports torch: `--list-formats` reads only the format descriptions.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.escape import terminal
from dlperf.framework_logs.base import RULES
from dlperf.framework_logs.display import shown
from dlperf.framework_logs.extract import Options, extract_dir, extract_file, record_target
from dlperf.framework_logs.published_names import PLAIN_NAME, LogInfo, Skipped
from dlperf.framework_logs.registry import describe
from dlperf.records.load import as_record
from dlperf.records.schema import ExtractedRecord
from dlperf.spec import setting

SKIPPED_EXIT = 3


DESCRIPTION = (
    "Read every log under LOG_DIR laid out as <N>n<G>g/<model>_b<batch>_<precision>_<repeat>.log "
    "(any parents, e.g. bz128/), or one log FILE with its shape given (--nodes, --devices-per-node, "
    "--batch-size), measure each run's throughput the published way, check it by a second reading of the log, "
    "and write report.md, summary.json, plots and one record per run (records/) into --out. Exit status: 0 all "
    "logs read; "
    f"{SKIPPED_EXIT} some logs skipped (named on stderr with the reason); 2 bad usage or no usable log."
)
SHAPE = "one log FILE (its shape is not in its name)"


@dataclass(frozen=True)
class ExtractOptions:
    log_dir: str | None = setting(
        None, "folder of logs in the published layout, or one log file", positional="?", metavar="LOG_DIR|FILE"
    )
    nodes: int | None = setting(None, "nodes the run used", bound="positive", group=SHAPE)
    devices_per_node: int | None = setting(None, "devices (GPUs) per node", bound="positive", group=SHAPE)
    batch_size: int | None = setting(None, "batch size PER DEVICE", bound="positive", group=SHAPE)
    model: str | None = setting(None, "model name for the report (default: the file's stem)", group=SHAPE)
    precision: str = setting("unknown", "precision label for the report (default: unknown)", group=SHAPE)
    accelerator: str | None = setting(
        None,
        "the device the logs ran on, as the peak table names it (e.g. 'TPU v5p', 'NVIDIA GB200', 'H100 SXM'): each "
        "record gets MFU from the log's own printed TFLOP/s per device against that device's datasheet peak at the "
        "path's precision",
        group=SHAPE,
    )
    format: str = setting(
        "auto",
        "log format; auto recognises it from each file's content (default); a NAME from --list-formats; or a "
        "format declared in YAML (a regex with named groups, unit, per device or global, warm-up, window: "
        "docs/peer-logs.md)",
        flag=("--format", "--log-format"),
        metavar="auto|NAME|PATH.yaml",
    )
    rule: str | None = setting(
        None,
        "printed: mean of the printed throughput over the kept lines; timestamp: samples between the first "
        "and last kept line / time between their stamps (default: the format's first rule)",
        choices=RULES,
    )
    warmup: int | None = setting(
        None, "iterations to skip at the start of a run (default: the format's published rule)", bound="non-negative"
    )
    window: int | None = setting(
        None,
        "iterations to keep after the warm-up, 0 = to the end of the run (default: the format's published rule)",
        bound="non-negative",
    )
    no_plots: bool = setting(False, "write report.md and summary.json only (faster)")
    out: str | None = setting(None, "where to write (default: LOG_DIR-extract beside LOG_DIR)", bound="non-empty")
    overwrite: bool = setting(False, "replace a report or records already in --out (default: refuse)")
    list_formats: bool = setting(False, "name every format with its rules and defaults")


OPTIONS = (ExtractOptions,)


def run(args: argparse.Namespace) -> int:
    if args.list_formats:
        print(describe())
        return 0
    if not args.log_dir:
        raise ResultsError("LOG_DIR is missing: dlperf extract LOG_DIR [--out DIR] (or --list-formats)")
    root = Path(args.log_dir)
    records, skipped = _read_logs(root, args)
    for item in skipped:
        print(f"dlperf: skipped {shown(item.path)}: {terminal(item.reason)}", file=sys.stderr)
    if not records:
        raise ResultsError(f"none of the {len(skipped)} logs under {shown(root)} gave a result (reasons above)")
    _report_extracted(_out_dir(root, args), records, args)
    print(f"dlperf: extracted {len(records)} logs, skipped {len(skipped)}", file=sys.stderr)
    return SKIPPED_EXIT if skipped else 0


def _read_logs(root: Path, args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """One log FILE with its shape from the options, or every log of a folder with the shape in its path."""
    options = Options(
        format=args.format, rule=args.rule, warmup=args.warmup, window=args.window, accelerator=args.accelerator
    )
    if root.is_file():
        return extract_file(root, options, _file_info(root, args))
    if args.nodes or args.devices_per_node or args.batch_size:
        raise ResultsError(f"{shown(root)} is not a file: --nodes/--devices-per-node/--batch-size are for one log")
    return extract_dir(root, options)


def _out_dir(root: Path, args: argparse.Namespace) -> Path:
    """--out, else `<name>-extract` beside the log folder or file."""
    if args.out:
        return Path(args.out)
    name = root.resolve().stem if root.is_file() else root.resolve().name
    return root.resolve().parent / f"{name}-extract"


def _report_extracted(out: Path, records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The records and their report; then each record's warning or failure, and the report's paths."""
    # Imported here so that `--list-formats` and usage errors start without the report's writers.
    from dlperf.reporting.results_writes import write_records_and_report

    formats = {"md", "json"} if args.no_plots else {"md", "json", "png"}
    written = write_records_and_report(out, records, record_target, formats, args.overwrite)
    for record in records:
        _say_trouble(as_record(record))
    for path in written:
        print(shown(path))


def _say_trouble(record: ExtractedRecord) -> None:
    """A record's warning and a failed run's reason, on stderr."""
    if record.warning:
        print(f"dlperf: warning: {terminal(record.warning)}", file=sys.stderr)
    if record.status != "ok":
        print(f"dlperf: failed run {shown(record.file)}: {terminal(record.error)}", file=sys.stderr)


def _file_info(path: Path, args: argparse.Namespace) -> LogInfo:
    """The shape of one log's run, as given on the command line."""
    missing = [f"--{n.replace('_', '-')}" for n in ("nodes", "devices_per_node", "batch_size") if not getattr(args, n)]
    if missing:
        raise ResultsError(
            f"one log file needs its run's shape: pass {' '.join(missing)} (e.g. dlperf extract {shown(path)} "
            f"--nodes 1 --devices-per-node 8 --batch-size 32)"
        )
    model = args.model or path.stem
    for label, value in (("--model", model), ("--precision", args.precision)):
        if not PLAIN_NAME.fullmatch(value):
            raise ResultsError(f"{label} {value!r} is not a plain name (letters, digits, '.', '_', '-'): pass {label}")
    return LogInfo(path, model, args.nodes, args.devices_per_node, args.batch_size, args.precision, 1)
