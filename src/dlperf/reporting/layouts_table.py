"""The GPT report's table, for records whose `table` is `layouts` (GPT's and Llama's):
`group | case | latency (ms) | memory (MiB) | throughput (samples/s)`, plus ours.

Each figure is the median over a case's successful repeats (memory: the largest peak of any rank and repeat);
flags and their footnotes come from the one set of doubt rules (reporting/doubts.py);
rows follow the report's groups (DP, MP, 2D, PP), other layouts after them, then devices, then the name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dlperf.records.load import RecordLike, as_record
from dlperf.records.schema import RunRecord
from dlperf.reporting.aggregate import latency, median_of, number_text
from dlperf.reporting.doubts import case_flags

GROUP_ORDER = ("DP", "MP", "2D", "PP")
TITLES = {"gpt": "GPT", "llama": "Llama"}
FORMULAS = {"gpt": "72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) where not counted", "llama": "(6N + 12·L·H·Q·T) per token"}


def group_by_case(records: Sequence[RecordLike]) -> dict[str, list[RunRecord]]:
    """Layout-table records keyed by their group (the case name plus precision and switches), failed ones too."""
    by_case: dict[str, list[RunRecord]] = defaultdict(list)
    for record in map(as_record, records):
        if record.table == "layouts":
            by_case[record.group].append(record)
    return dict(by_case)


def _peak_mib(records: list[RunRecord]) -> float | None:
    peaks = [
        peak.get("allocated", peak.get("rss", peak.get("reserved")))
        for r in records
        if isinstance(peak := r.peak_memory_mib, dict) and peak
    ]
    return max((p for p in peaks if p is not None), default=None)


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _report_group(records: list[RunRecord]) -> str:
    return next((r.report_group for r in records if r.report_group), "")


def _row_key(case: str, records: list[RunRecord]) -> tuple[int, int, str]:
    group = _report_group(records) or case.split("_")[0]
    group = "PP" if group.endswith("_PP") else group  # DP_PP, MP_PP and 2D_PP cases form the PP section
    rank = GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)
    return rank, max(int(r.world_size or 0) for r in records), case


def layouts_table(records_by_case: dict[str, list[RunRecord]]) -> list[str]:
    """Markdown lines of the layouts table (GPT, Llama); empty when there are no such records."""
    if not records_by_case:
        return []
    models = sorted({r.model or "gpt" for records in records_by_case.values() for r in records})
    formulas = "; ".join(f"{TITLES.get(m, m)}: {FORMULAS[m]}" for m in models if m in FORMULAS)
    lines = [
        f"## {', '.join(TITLES.get(m, m) for m in models)}",
        "",
        "Latency is ms per iteration (one global batch); memory the peak of any device; throughput global "
        f"samples/s; TFLOP/s per device from the model's FLOPs ({formulas}); MFU against the device's "
        "dense peak for the precision (src/dlperf/metrics/flops.py).",
        "",
        "| group | case | nodes | devices per node | devices | latency (ms) | memory (MiB) | throughput (samples/s) "
        "| tokens/s | TFLOP/s per device "
        "| MFU | repeats | flags |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    notes = []
    for case, records in sorted(records_by_case.items(), key=lambda item: _row_key(*item)):
        ok = [r for r in records if r.status == "ok"]
        group = _row_key(case, records)[0]
        # GPT's report groups by name; other layouts (Llama's FSDP+TP, ...) by their record's own group
        group_name = GROUP_ORDER[group] if group < len(GROUP_ORDER) else _report_group(records)
        mfu = median_of(r.mfu for r in ok)
        repeats = f"{len(ok)}" + (f" (+{len(records) - len(ok)} failed)" if len(ok) < len(records) else "")
        first = records[0]
        flags = case_flags(ok)
        lines.append(
            f"| {group_name} | {case} | {_text(first.nodes)} | {_text(first.devices_per_node)} "
            f"| {_text(first.world_size)} | {number_text(median_of(map(latency('mean'), ok)), '.2f')} "
            f"| {number_text(_peak_mib(ok), '.0f')} | {number_text(median_of(r.throughput for r in ok), '.2f')} "
            f"| {number_text(median_of(r.tokens_per_s for r in ok), '.0f')} "
            f"| {number_text(median_of(r.tflops_per_device for r in ok), '.2f')} "
            f"| {number_text(None if mfu is None else mfu * 100, '.1f')}{'%' if mfu is not None else ''} | {repeats} "
            f"| {', '.join(flag.label for flag in flags)} |"
        )
        notes += [f"- {case} [{flag.label}]: {flag.note}" for flag in flags]
        note = next((r.mfu_note for r in ok if r.mfu_note), None)
        if note:
            notes.append(f"- {case}: MFU left empty: {note}.")
    return lines + [""] + (notes + [""] if notes else [])
