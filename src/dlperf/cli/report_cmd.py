"""`dlperf report`: tables, summary and plots from a results folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from dlperf.records.load import load_records
from dlperf.records.store import check_writable
from dlperf.reporting.report import check_one_sweep, refuse_to_replace, write_report

FORMAT_CHOICES = {"md": {"md"}, "json": {"json"}, "png": {"png"}, "all": {"md", "json", "png"}}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "report",
        parents=[common],
        help="summarise a results folder into report.md, summary.json and plots",
        description="Read every run record under DIR and write report.md (published-style tables), summary.json "
        "(per model, group and case: average_speed, median_speed, speedup, batch_size_per_device, ...) and PNG "
        "plots of throughput and speedup against the ideal line.",
    )
    parser.add_argument("dir", help="results folder written by `dlperf run` or `dlperf sweep`")
    parser.add_argument("--format", choices=sorted(FORMAT_CHOICES), default="all", help="what to write (default all)")
    parser.add_argument("--out", help="where to write (default: DIR itself, whose report is rebuilt)")
    parser.add_argument(
        "--overwrite", action="store_true", help="with --out: replace a report already there (default: refuse)"
    )
    parser.add_argument(
        "--merge", action="store_true", help="pool the records of several sweeps under DIR (default: refuse)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    records = load_records(root)
    if not args.merge:
        check_one_sweep(records, root)
    out = Path(args.out) if args.out else root
    formats = FORMAT_CHOICES[args.format]
    # DIR's own report is derived from DIR's records: rebuilding it loses nothing; another folder's may be
    if args.out and not args.overwrite and out.resolve() != root.resolve():
        refuse_to_replace(out, formats)
    check_writable(out)
    for path in write_report(records, out, formats):
        print(path)
    return 0
