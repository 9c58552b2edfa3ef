"""`dlperf history`: keep every run in a history (an SQLite file, or a shared PostgreSQL) and show each case across
versions."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dlperf.cli.display import print_table, say
from dlperf.errors import ConfigError, ResultsError
from dlperf.records.load import load_records
from dlperf.records.schema import RunRecord
from dlperf.reporting.history import add_records, history
from dlperf.reporting.history_db import parse_target
from dlperf.secrets import mask_url
from dlperf.spec import setting

# a string, never a Path: Path("postgresql://host/db") would fold the URL into a local folder `postgresql:`
DEFAULT_DB = os.environ.get("DLPERF_HISTORY") or str(Path.home() / ".dlperf" / "history.sqlite")


DESCRIPTION = (
    "`dlperf history add DIR [--label L]` stores every record under DIR (once each) under a label "
    "(default: the dlperf commit that measured it). `dlperf history show` prints each case's (geometric) mean "
    "throughput per label, in the order measured, with the change against the label before (the ratio of the "
    "means) and the verdict of `dlperf compare` (faster, slower, same, inconclusive) of its repeats against that "
    "label's. --db is a "
    "file (SQLite) or postgresql://USER@HOST/DB, a history a team shares: several machines add at once, each "
    "record stored once."
)


@dataclass(frozen=True)
class HistoryOptions:
    action: Literal["add", "show"] = setting(None, "add a results folder, or show the history", positional="1")
    dir: str | None = setting(None, "with add: the results folder to store", positional="?")
    label: str | None = setting(
        None, "with add: label for these records (a version, a commit, a driver ...)", bound="non-empty"
    )
    model: str | None = setting(None, "with show: only this model")
    case: str | None = setting(None, "with show: only this case, e.g. 1n8g")
    db: str = setting(
        DEFAULT_DB,
        f"history database: a file path (SQLite) or postgresql://USER@HOST/DB (default {mask_url(DEFAULT_DB)}; env "
        "DLPERF_HISTORY)",
    )


OPTIONS = (HistoryOptions,)


def run(args: argparse.Namespace) -> int:
    if args.action == "add":
        _add(args)
    else:
        _show(args)
    return 0


def _add(args: argparse.Namespace) -> None:
    """Store a folder's records, each once; name those already stored with the same content."""
    if not args.dir:
        raise ConfigError("`dlperf history add` needs a results folder: dlperf history add DIR")
    outcome = add_records(args.db, load_records(args.dir), args.label)
    shown = parse_target(args.db).shown
    say(f"{len(outcome.stored)} new records stored in {shown}")
    if outcome.duplicates:
        say(f"{len(outcome.duplicates)} records were already stored with identical content, not stored again:")
        for record in outcome.duplicates:
            say(f"  {_named(record)}")
    if outcome.refused:
        say(
            f"{len(outcome.refused)} records no history can hold, not stored (the others were; an SQLite history "
            "refuses what a PostgreSQL one cannot hold, so a history moves between them whole):"
        )
        for record, problem in outcome.refused:
            say(f"  {_named(record)}: {problem}")
        raise ResultsError(
            f"{len(outcome.refused)} records not stored in {shown}, named above with why: "
            f"{', '.join(_named(r) for r, _ in outcome.refused[:3])}{' ...' if len(outcome.refused) > 3 else ''}; "
            "fix those files and add the folder again (what is stored is kept once)"
        )


def _named(record: RunRecord) -> str:
    return record.origin.path or f"{record.model} {record.case}"


def _show(args: argparse.Namespace) -> None:
    """Each case across the stored labels, oldest first."""
    points = history(args.db, args.model, args.case)
    columns = ("model", "group", "case", "label", "first measured", "runs", "mean samples/s", "change", "verdict")
    rows = [
        (
            p.model,
            p.group,
            p.case,
            p.label,
            time.strftime("%Y-%m-%d %H:%M", time.localtime(p.first_seen)) if p.first_seen else "not recorded",
            str(p.runs),
            "failed" if p.mean is None else f"{p.mean:.2f}",
            "" if p.change is None else f"{p.change - 1:+.1%}",
            p.verdict or "",
        )
        for p in points
    ]
    print_table(f"history in {parse_target(args.db).shown}", columns, rows)
