"""What the reading commands write into a results folder, one call each: a folder's report, the cross-source
report, and extracted records with their report. Each write holds the folder's lock (a sweep writing there refuses
it in one line, nothing mixed) and replaces nothing without --overwrite; the caller (the CLI) only shows the paths
returned. Nothing here imports a framework."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.escape import terminal
from dlperf.records.lock import results_lock
from dlperf.records.schema import Record, RunRecord
from dlperf.records.store import check_writable
from dlperf.records.written import write_record
from dlperf.reporting.aggregate import summarise
from dlperf.reporting.comparison_files import write_comparison
from dlperf.reporting.export import require_tensorboard, write_tensorboard
from dlperf.reporting.report import refuse_to_replace, write_report
from dlperf.reporting.sources import Comparison, Source, build_comparison


@dataclass(frozen=True)
class FolderReport:
    """One folder's report as `dlperf report DIR` asks for it: DIR's records (its commbench and maxbatch records in
    `others`), where to write (`out`: --out, None for DIR itself), which formats, the --predict commbench records and
    --overlap, and --tensorboard's log folder."""

    root: Path
    records: list[RunRecord]
    others: list[Record]
    out: Path | None
    formats: set[str]
    predict: list[Any]
    overlap: bool = True
    tensorboard: str | None = None
    overwrite: bool = False
    partial: str | None = None  # what is still to come in DIR (a sweep under way or cut off): said at the top


def write_folder_report(request: FolderReport) -> list[Path]:
    """The folder's report, then TensorBoard scalars and the HTML page where asked for; the paths written. DIR's
    own report is derived from DIR's records: rebuilding it loses nothing. Another folder (--out) may be a running
    sweep's: its lock refuses us, and its report is replaced only with --overwrite."""
    if request.tensorboard:
        require_tensorboard()
    out = request.out or request.root
    with results_lock(out) if request.out else contextlib.nullcontext():
        if request.out and not request.overwrite and out.resolve() != request.root.resolve():
            refuse_to_replace(out, request.formats)
        check_writable(out)
        written = write_report(
            request.records,
            out,
            request.formats - {"html"},
            others=request.others,
            predict=request.predict,
            overlap=request.overlap,
            partial=request.partial,
        )
        if request.tensorboard:
            written.append(write_tensorboard(summarise(request.records), request.tensorboard))
        if "html" in request.formats:
            source = Source.from_records(request.root.resolve().name, request.records)
            written.append(_write_html(build_comparison([source]), out, request.partial))
    return written


def write_cross_source(comparison: Comparison, out: Path, formats: set[str], replace: bool) -> list[Path]:
    """The cross-source report's files, under the results lock; others' files kept unless `replace`."""
    with results_lock(out):
        if not replace:
            refuse_to_replace(out, formats)
        check_writable(out)
        written = write_comparison(comparison, out, formats)
        if "html" in formats:
            written.append(_write_html(comparison, out))
    return written


def write_records_and_report(
    out: Path,
    records: Sequence[dict[str, Any]],
    record_file: Callable[[Path, dict[str, Any]], Path],
    formats: set[str],
    overwrite: bool,
) -> list[Path]:
    """Records read from elsewhere (`dlperf extract`), each at `record_file(out / "records", record)`, and their
    report (plots where at least two cases), nothing replaced without `overwrite`; the report's paths."""
    with results_lock(out):
        targets = record_files(out / "records", records, record_file)
        if not overwrite:
            refuse_to_replace(out, formats)
            if taken := [t for t in targets if t.exists()]:
                raise ResultsError(
                    f"{terminal(taken[0])} already exists: pass --overwrite to replace it, or another --out"
                )
        check_writable(out)
        for record, target in zip(records, targets):
            write_record(target, record)
        return write_report(records, out, formats, min_plot_cases=2)


def record_files(
    records_dir: Path, records: Sequence[dict[str, Any]], record_file: Callable[[Path, dict[str, Any]], Path]
) -> list[Path]:
    """Each record's file, refused unless it lies inside `records_dir`: names come from logs, not from dlperf."""
    inside = records_dir.resolve()
    targets = [record_file(records_dir, record) for record in records]
    for target in targets:
        if not target.resolve().is_relative_to(inside):
            raise ResultsError(f"the record {terminal(target)} would be written outside {terminal(records_dir)}")
    return targets


def _write_html(comparison: Comparison, out: Path, partial: str | None = None) -> Path:
    """Imported here: plotly takes a third of a second to import, which every other command would pay."""
    from dlperf.reporting.html import write_html_report

    return write_html_report(comparison, out, partial)
