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
from dlperf.reporting import markdown as markdown_table
from dlperf.reporting.aggregate import latency, median_of, number_text
from dlperf.reporting.doubts import Flag, case_flags
from dlperf.reporting.export import memory_peak
from dlperf.workloads import known_workload

GROUP_ORDER = ("DP", "MP", "2D", "PP")
COLUMNS = (
    "group", "case", "nodes", "devices per node", "devices", "latency (ms)", "memory (MiB)",
    "throughput (samples/s)", "tokens/s", "TFLOP/s per device", "MFU",
)  # fmt: skip
ROUTING = "expert imbalance (routing)"  # a section with MoE runs: the measured max/mean picks per expert


def title(model: str) -> str:
    """The workload's report title (`Llama`), or the record's model name where no workload declares one."""
    workload = known_workload(model)
    return (workload.report_title if workload else "") or model


def formula(model: str) -> str:
    """The workload's words for its FLOPs, empty where it declares none."""
    workload = known_workload(model)
    return workload.flops_formula if workload else ""


def group_by_case(records: Sequence[RecordLike]) -> dict[str, list[RunRecord]]:
    """Layout-table records keyed by their group (the case name plus precision and switches), failed ones too."""
    by_case: dict[str, list[RunRecord]] = defaultdict(list)
    for record in map(as_record, records):
        if record.table == "layouts":
            by_case[record.group].append(record)
    return dict(by_case)


def _peak_mib(records: list[RunRecord]) -> float | None:
    peaks = [memory_peak(r.peak_memory_mib or {})[0] for r in records]
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


def _mfu_text(ok: list[RunRecord]) -> str:
    mfu = median_of(r.mfu for r in ok)
    return "" if mfu is None else f"{number_text(mfu * 100, '.1f')}%"


def _cells(case: str, records: list[RunRecord], flags: list[Flag], routed: bool) -> list[str]:
    """One case's row: who ran it, then the medians over its successful repeats (the experts' imbalance too in a
    section with MoE runs), then its repeats and flags."""
    ok = [r for r in records if r.status == "ok"]
    group = _row_key(case, records)[0]
    # GPT's report groups by name; other layouts (Llama's FSDP+TP, ...) by their record's own group
    group_name = GROUP_ORDER[group] if group < len(GROUP_ORDER) else _report_group(records)
    failed = len(records) - len(ok)
    first = records[0]
    return [
        group_name,
        case,
        _text(first.nodes),
        _text(first.devices_per_node),
        _text(first.world_size),
        number_text(median_of(map(latency("mean"), ok)), ".2f"),
        number_text(_peak_mib(ok), ".0f"),
        number_text(median_of(r.throughput for r in ok), ".2f"),
        number_text(median_of(r.tokens_per_s for r in ok), ".0f"),
        number_text(median_of(r.tflops_per_device for r in ok), ".2f"),
        _mfu_text(ok),
        *([_routing_text(ok)] if routed else []),
        f"{len(ok)}" + (f" (+{failed} failed)" if failed else ""),
        ", ".join(flag.label for flag in flags),
    ]


def _routing_text(ok: list[RunRecord]) -> str:
    """The median measured imbalance of a MoE case's repeats beside its routing (`1.00 (balanced)`), the figure
    a force-balanced table hides; empty for a dense model."""
    imbalance = median_of(r.moe.imbalance for r in ok if r.moe)
    routing = next((r.moe.routing for r in ok if r.moe and r.moe.routing), None)
    text = number_text(imbalance, ".2f")
    return f"{text} ({routing})" if text and routing else text


def _notes(case: str, records: list[RunRecord], flags: list[Flag]) -> list[str]:
    """The case's footnotes: each flag's, then why its MFU is empty where a record says."""
    notes = [f"- {case} [{flag.label}]: {flag.note}" for flag in flags]
    note = next((r.mfu_note for r in records if r.status == "ok" and r.mfu_note), None)
    return notes + ([f"- {case}: MFU left empty: {note}."] if note else [])


def _heading(models: list[str], routed: bool) -> list[str]:
    """The section's title (the workloads' report titles), what its columns mean (their FLOPs formulas) and its
    header, with the experts' measured imbalance where the section has MoE runs."""
    columns = (*COLUMNS, *([ROUTING] if routed else []), "repeats", "flags")
    formulas = "; ".join(f"{title(m)}: {formula(m)}" for m in models if formula(m))
    return [
        f"## {', '.join(title(m) for m in models)}",
        "",
        "Latency is ms per iteration (one global batch); memory the peak of any device; throughput global "
        f"samples/s; TFLOP/s per device from the model's FLOPs ({formulas}); MFU against the device's "
        "dense peak for the precision (src/dlperf/metrics/flops.py)"
        + (
            "; expert imbalance the busiest expert's picks over the mean, measured over the timed window"
            if routed
            else ""
        )
        + ".",
        "",
        *markdown_table.header(columns, "ll" + "r" * (len(columns) - 3) + "l"),
    ]


def layouts_table(records_by_case: dict[str, list[RunRecord]]) -> list[str]:
    """Markdown lines of the layouts table (GPT, Llama); empty when there are no such records."""
    if not records_by_case:
        return []
    every = [r for records in records_by_case.values() for r in records]
    routed = any(r.moe for r in every)
    lines = _heading(sorted({r.model or "gpt" for r in every}), routed)
    notes = []
    for case, records in sorted(records_by_case.items(), key=lambda item: _row_key(*item)):
        flags = case_flags([r for r in records if r.status == "ok"])
        lines.append(markdown_table.row(_cells(case, records, flags, routed)))
        notes += _notes(case, records, flags)
    return lines + [""] + (notes + [""] if notes else [])
