"""`dlperf compare`: a new results folder against a base one, flagging regressions."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from dlperf.cli.display import console
from dlperf.reporting.compare import compare


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "compare",
        parents=[common],
        help="compare two results folders case by case and flag regressions",
        description="Median throughput of every case in BASE and NEW (folders from run, sweep or extract), "
        "their ratio NEW/BASE, and the cases that got slower than --threshold. Exit status 1 when a case "
        "regressed, so CI can gate on it.",
    )
    parser.add_argument("base", help="results folder to compare against (e.g. the last release)")
    parser.add_argument("new", help="results folder under test")
    parser.add_argument(
        "--threshold", type=float, default=0.05, help="slowdown that counts as a regression (default 0.05 = 5 %%)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.set_defaults(func=run)


def _speed(value: float | None, present: bool) -> str:
    if not present:
        return "-"
    return "failed" if value is None else f"{value:.2f}"


def run(args: argparse.Namespace) -> int:
    rows = compare(args.base, args.new)
    regressed = [r for r in rows if r.regressed(args.threshold)]
    if args.json:
        print(json.dumps([{**vars(r), "ratio": r.ratio, "regressed": r in regressed} for r in rows], indent=2))
    else:
        table = Table(title=f"{args.new} vs {args.base}")
        for column in ("model", "group", "case", "base samples/s", "new samples/s", "new/base", ""):
            table.add_column(column, justify="right" if "/" in column else "left")
        for r in rows:
            ratio = "" if r.ratio is None else f"{r.ratio:.3f}"
            table.add_row(
                r.model,
                r.group,
                r.case,
                _speed(r.base, r.status != "only-new"),
                _speed(r.new, r.status != "only-base"),
                ratio,
                "REGRESSION" if r in regressed else "",
            )
        console.print(table)
        console.print(f"{len(regressed)} of {len(rows)} cases regressed by more than {args.threshold:.0%}")
    return 1 if regressed else 0
