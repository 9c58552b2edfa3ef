"""Each report row beside the best published figure for the same work on the same accelerator (dlperf.references):
the tables' `% of best published` column, summary.json's `published` and the section naming every figure used."""

from __future__ import annotations

from dlperf.escape import markdown as md
from dlperf.references import Published, best_match
from dlperf.reporting.aggregate import CaseSummary, GroupKey
from dlperf.wording import count

CaseKey = tuple[str, str, str]  # (model, group, case)
COLUMN = "% of best published"


def published_matches(summary: dict[GroupKey, list[CaseSummary]]) -> dict[CaseKey, Published]:
    """Every measured case whose records match a published figure exactly (model, accelerator, precision)."""
    out = {}
    for (model, group), cases in summary.items():
        for case in cases:
            if not case.speeds:
                continue
            found = best_match(model, case.records, case.stats["median"] / case.world_size)
            if found:
                out[(model, group, case.case)] = found
    return out


def published_lines(matches: dict[CaseKey, Published]) -> list[str]:
    """report.md's section naming each published figure a row was set beside, with its source."""
    if not matches:
        return []
    lines = [
        "## Published figures",
        "",
        f"`{COLUMN}`: the row's median samples/s per device over the best published figure for the same model on the "
        "same accelerator at the same precision (`dlperf references`); rows without an exact match have none.",
        "",
    ]
    seen = set()
    for (model, _group, _case), found in matches.items():
        f = found.figure
        key = (f["model"], f["accelerator"], f["precision"], f["value"])
        if key in seen:
            continue
        seen.add(key)
        lines.append(
            f"- {md(model)} on {md(f['accelerator'])} at {md(f['precision'])}: {f['value']:g} {md(f['metric'])} "
            f"({md(f['framework'])}, batch {f['batch_per_device']} per device, {count(f['devices'], 'device')}): "
            f"{md(f['source'])}, {md(f.get('url') or '')}"
        )
    return lines + [""]
