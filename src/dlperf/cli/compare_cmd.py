"""`dlperf compare`: a new results folder against a base one, with a verdict per case that knows the noise."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from dlperf.cli.display import print_table, say
from dlperf.errors import ConfigError, ResultsError
from dlperf.reporting.compare import CaseComparison, compare
from dlperf.reporting.history import label_records
from dlperf.reporting.verdict import DEFAULT_THRESHOLD, check_threshold
from dlperf.spec import setting

DESCRIPTION = (
    "Per case of BASE and NEW (folders from run, sweep or extract): the ratio NEW/BASE from every "
    "timed window of every repeat (a two-level model, repeats and the windows inside them), its 95 % interval "
    "and p-value, and a verdict (faster, slower, same, inconclusive) at --threshold; 3 repeats a side suffice. "
    "Exit status 1 only for a significant slowdown beyond the threshold, or a case that fails in NEW where it "
    "ran in BASE, so CI can gate on it. With --db, BASE and NEW are labels of a history (`dlperf history add "
    "--label`), a shared PostgreSQL one included: every machine's records under each label."
)


@dataclass(frozen=True)
class CompareOptions:
    base: str = setting(None, "results folder (or, with --db, label) to compare against", positional="1")
    new: str = setting(None, "results folder (or, with --db, label) under test", positional="1")
    threshold: float = setting(
        DEFAULT_THRESHOLD, "change that matters, as a fraction in [0, 1) (default 0.05 = 5 %)", bound="fraction"
    )
    json: bool = setting(False, "print every figure of every case as JSON")
    db: str | None = setting(None, "a history (file path or postgresql://...): BASE and NEW are its labels")


OPTIONS = (CompareOptions,)


def _mean(mean: float | None, present: bool) -> str:
    """A side's figure the ratio is about (CaseComparison.base_mean), "failed" where no repeat gave one."""
    if not present:
        return "-"
    return f"{mean:.2f}" if mean is not None else "failed"


def _row(r: CaseComparison) -> list[str]:
    v = r.verdict
    return [
        r.model,
        r.group,
        r.case,
        _mean(r.base_mean, r.status != "only-new"),
        _mean(r.new_mean, r.status != "only-base"),
        "" if v is None or v.ratio is None else f"{v.ratio:.3f}",
        "" if v is None or v.ci_low is None else f"[{v.ci_low:.3f}, {v.ci_high:.3f}]",
        "" if v is None or v.p_value is None else f"{v.p_value:.3g}",
        f"{len(r.base_speeds)}/{len(r.new_speeds)}",
        "" if v is None else f"{v.windows_base}/{v.windows_new}",
        r.label.upper() if r.regressed else r.label,
    ]


def run(args: argparse.Namespace) -> int:
    try:
        threshold = check_threshold(args.threshold)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    rows = _compared(args, threshold)
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        _show(rows, f"{args.new} vs {args.base} (threshold {threshold:.0%})", threshold)
    return 1 if any(r.regressed for r in rows) else 0


def _compared(args: argparse.Namespace, threshold: float) -> list[CaseComparison]:
    """Each case of base against new (folders, or labels in the history database); refused where they share none."""
    if args.db:
        rows = compare(label_records(args.db, args.base), label_records(args.db, args.new), threshold)
    else:
        rows = compare(args.base, args.new, threshold)
    if rows and not any(r.status == "both" for r in rows):
        raise ResultsError(
            f"{args.base} and {args.new} share no case (model, group and topology): nothing was compared; "
            "check the folders, or that both ran the same sweep"
        )
    return rows


def _show(rows: list[CaseComparison], title: str, threshold: float) -> None:
    """The table, the count of slower and inconclusive cases, and why each is inconclusive or doubtful."""
    columns = ("model", "group", "case", "base mean", "new mean", "new/base", "95 % interval", "p")
    columns += ("repeats", "windows")
    print_table(title, (*columns, "verdict"), [_row(r) for r in rows])
    regressed = sum(r.regressed for r in rows)
    inconclusive = sum(r.label == "inconclusive" for r in rows)
    say(
        f"{regressed} of {len(rows)} cases slower by more than {threshold:.0%} (significant) or failing; "
        f"{inconclusive} inconclusive (more repeats or a quieter machine would tell)"
    )
    for r in rows:
        if r.label == "inconclusive":
            say(f"  {r.model} {r.group} {r.case}: {r.verdict.reason}")
        elif r.load_note:
            say(f"  {r.model} {r.group} {r.case} ({r.label}): {r.load_note}")
