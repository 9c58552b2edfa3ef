"""`report.md`, `summary.json` and plots from run records, shaped like the published tables."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dlperf.errors import ResultsError
from dlperf.escape import file_name
from dlperf.escape import markdown as md
from dlperf.predict import Prediction
from dlperf.records.codec import dump
from dlperf.records.load import RecordLike, as_record
from dlperf.records.schema import CommbenchRecord, MaxbatchRecord, PeerReading, Record, RunRecord, batch_free_group
from dlperf.records.store import write_json_atomic, write_text_atomic
from dlperf.reporting import markdown
from dlperf.reporting.aggregate import (
    BASELINE_CASE,
    CaseSummary,
    GroupKey,
    compile_payoffs,
    cpu_threads,
    latency,
    number_text,
    summarise,
    threads_text,
)
from dlperf.reporting.commbench_table import commbench_lines, plot_commbench
from dlperf.reporting.export import memory_peak, write_csv
from dlperf.reporting.figures import save_figure
from dlperf.reporting.layouts_table import group_by_case, layouts_table
from dlperf.reporting.measured_on import frameworks, where_measured
from dlperf.reporting.predicted import CaseKey, predictions
from dlperf.reporting.published import COLUMN as PUBLISHED
from dlperf.reporting.published import published_lines, published_matches
from dlperf.reporting.sources import engine_of
from dlperf.reporting.time_spent import time_lines
from dlperf.reporting.waterfall import ScalingLoss, measured_groups, scaling_losses, waterfall_lines

FORMATS = ("md", "json", "png")

# Record `table` values whose published report is not the scaling table: their own table (and plots) instead.
OWN_TABLES = {"layouts": lambda records: layouts_table(group_by_case(records))}


def _r(value: float | None, places: int = 2) -> float | None:
    return None if value is None else round(value, places)


def case_fields(case: CaseSummary) -> dict[str, Any]:
    """summary.json's entry for a case: the published four fields first, then ours."""
    fields: dict[str, Any] = {
        "average_speed": None,
        "median_speed": None,
        "speedup": case.speedup,
        "batch_size_per_device": case.batch_size,
    }
    if case.speeds:
        stats = case.stats
        fields.update(average_speed=_r(stats["mean"]), median_speed=_r(stats["median"]))
        fields["median_speed_per_device"] = _r(per_device(stats["median"], case.world_size))
        fields.update(
            min_speed=_r(stats["min"]),
            max_speed=_r(stats["max"]),
            cv=_r(stats["cv"], 4),
            ci95=_r(stats["ci95"]),
        )
    fields.update(
        {
            "speedup_note": case.speedup_note,
            "scaling_efficiency": _r(case.efficiency, 3),
            "nodes": case.nodes,
            "devices_per_node": case.devices_per_node,
            "world_size": case.world_size,
            "precision": case.precision,
            "repeats": len(case.speeds),
            "failed_repeats": len(case.failed),
            "speeds": [round(s, 2) for s in case.speeds],
            "latency_ms": {q: _r(case.median(latency(q)), 3) for q in ("mean", "p50", "p90")},
            "peak_memory_mib": case.peak_memory(),
            "node_differences": case.node_differences(),
            "mfu": _r(case.median(lambda r: r.mfu), 4),
            "tflops_per_device": _r(case.median(lambda r: r.tflops_per_device), 3),
            "samples_per_joule": _r(case.samples_per_joule(), 4),
            "noisy_repeats": [r.repeat for r in case.records if r.noisy],
            "outlier_repeats": case.outlier_repeats(),
            "repeats_stop": dump(case.repeats_stop()),
            "flags": [flag.label for flag in case.flags()],
            "flag_notes": [flag.note for flag in case.flags()],
        }
    )
    return fields


def build_summary(
    summary: dict[GroupKey, list[CaseSummary]], losses: dict[GroupKey, list[ScalingLoss]] | None = None
) -> dict[str, Any]:
    """summary.json: every case's fields, with each multi-device case's `scaling_loss` (reporting/waterfall.py)."""
    out: dict[str, Any] = {}
    for (model, group), cases in summary.items():
        out.setdefault(model, {})[group] = {case.case: case_fields(case) for case in cases}
    for (model, group), group_losses in (scaling_losses(summary) if losses is None else losses).items():
        for loss in group_losses:
            out[model][group][loss.case]["scaling_loss"] = loss.as_summary()
    for (model, group, case), found in published_matches(summary).items():
        out[model][group][case]["published"] = found.as_summary()
    for payoff in compile_payoffs(summary):
        out[payoff.model][payoff.group][payoff.case]["compile_payoff"] = {
            "extra_first_step_s": round(payoff.extra_first_step_s, 3),
            "saved_ms_per_step": round(payoff.saved_ms_per_step, 3),
            "payoff_steps": payoff.payoff_steps,
        }
    return out


def _compile_lines(summary: dict[GroupKey, list[CaseSummary]]) -> list[str]:
    payoffs = compile_payoffs(summary)
    if not payoffs:
        return []
    header = ["model", "group", "case", "extra time to first step (s)", "saved per step (ms)", "pays off after (steps)"]
    rows = [
        [
            p.model,
            p.group,
            p.case,
            f"{p.extra_first_step_s:.2f}",
            f"{p.saved_ms_per_step:.2f}",
            "never" if p.payoff_steps is None else p.payoff_steps,
        ]
        for p in payoffs
    ]
    return ["## Compiler cost", "", *markdown.table(header, rows, "lllrrr"), ""]


def memory_text(peaks: dict[str, float]) -> str:
    """The peak memory a row shows (`memory_peak`), its kind named where it is neither allocated nor rss."""
    value, kind = memory_peak(peaks)
    if value is None:
        return ""
    return f"{value:.0f}" if kind in ("allocated", "rss") else f"{value:.0f} ({kind})"


def latency_text(case: CaseSummary) -> str:
    """Median step time: p50 where the runs measured percentiles, else their mean (an external script's log)."""
    p50 = case.median(latency("p50"))
    if p50 is not None:
        return f"{p50:.1f}"
    mean = case.median(latency("mean"))
    return "" if mean is None else f"{mean:.1f} (mean)"


def per_device(value: float | None, devices: int) -> float | None:
    return None if value is None or not devices else value / devices


def group_table(
    model: str, group: str, cases: list[CaseSummary], columns: dict[str, dict[str, str]] | None = None
) -> list[str]:
    """The published scaling table of one group (`node_num | gpu_num | samples/s | speedup`, gpu_num the total
    devices as DLPerf prints it: 16 for 2n8g), then ours: per device, devices per node, efficiency, spread,
    latency, memory, `columns` (header -> case -> text; bsz=max, predicted speedup) where any case has a value,
    MFU % and samples/J where any row has them, and flags whose footnotes follow the table."""
    columns, extras = _shown_columns(cases, columns or {})
    header = _header(_unit(cases), [*columns, *(name for name, _, _ in extras)])
    rows = [_row(case, columns, extras) for case in cases]
    notes = [note for case in cases for note in case_notes(case)]
    table = markdown.table(header, rows, "r" * (len(header) - 1))
    return [*_table_title(model, group, cases), *table, "", *notes] + ([""] if notes else [])


def _shown_columns(
    cases: list[CaseSummary], columns: dict[str, dict[str, str]]
) -> tuple[dict[str, dict[str, str]], list[ExtraColumn]]:
    given = {name: cells for name, cells in columns.items() if any(c.case in cells for c in cases)}
    extras = [column for column in EXTRA_COLUMNS if any(column[1](c) is not None for c in cases)]
    return given, extras


def _header(unit: str, extra: list[str]) -> list[str]:
    """The scaling table's header in the records' unit, `extra` columns before the flags."""
    return [
        "node_num", "gpu_num", unit, "speedup", f"{unit} per device", "devices per node", "efficiency",
        f"mean {unit}", "min", "max", "CV %", "repeats", "latency (ms)", "peak memory (MiB)", *extra, "flags",
    ]  # fmt: skip


def _unit(cases: list[CaseSummary]) -> str:
    """The table's throughput unit: extracted framework logs name theirs (tokens/s, images/s, records/s); dlperf's own
    records count samples."""
    return next((r.unit for case in cases for r in case.records if isinstance(r, PeerReading) and r.unit), "samples/s")


def _table_title(model: str, group: str, cases: list[CaseSummary]) -> list[str]:
    """The table's title and where its records were measured."""
    threads = threads_text({cpu_threads(r) for case in cases for r in case.records})
    records = [r for case in cases for r in case.records + case.failed]
    framework = f"; {md(named)}" if (named := frameworks(records)) else ""
    return [
        f"### {md(model)}: batch {cases[0].batch_size} per device, {md(group.split('_', 1)[-1])}{threads}",
        "",
        f"Measured on {md(where_measured(records))}{framework}.",
        "",
    ]


def _case_cells(case: CaseSummary) -> list[str]:
    """A case's cells up to the `columns` cells (theirs, MFU, energy and flags follow)."""
    stats = case.stats if case.speeds else {}
    cv = stats.get("cv")
    repeats = f"{len(case.speeds)}" + (f" (+{len(case.failed)} failed)" if case.failed else "")
    return [
        str(case.nodes),
        str(case.world_size),
        number_text(stats.get("median")),
        number_text(case.speedup),
        number_text(per_device(stats.get("median"), case.world_size)),
        str(case.devices_per_node),
        number_text(case.efficiency, ".1%"),
        number_text(stats.get("mean")),
        number_text(stats.get("min")),
        number_text(stats.get("max")),
        number_text(None if cv is None else cv * 100, ".1f"),
        repeats,
        latency_text(case),
        memory_text(case.peak_memory()),
    ]


def _mfu_percent(case: CaseSummary) -> float | None:
    mfu = case.median(lambda r: r.mfu)
    return None if mfu is None else mfu * 100


ExtraColumn = tuple[str, Callable[[CaseSummary], float | None], str]  # header, the case's value, its format

# the columns a table shows where any of its cases has a value
EXTRA_COLUMNS: tuple[ExtraColumn, ...] = (
    ("MFU %", _mfu_percent, ".1f"),
    ("samples/J", CaseSummary.samples_per_joule, ".3g"),
)


def _row(case: CaseSummary, columns: dict[str, dict[str, str]], extras: list[ExtraColumn]) -> list[str]:
    given = [cells.get(case.case, "") for cells in columns.values()]
    extra = [number_text(value(case), spec) for _, value, spec in extras]
    return [*_case_cells(case), *given, *extra, ", ".join(flag.label for flag in case.flags())]


def case_notes(case: CaseSummary) -> list[str]:
    """The footnotes of one row: its flags, why repeats stopped, an empty speedup, nodes that differ."""
    name = md(case.case)
    notes = [f"- {name} [{flag.label}]: {md(flag.note)}" for flag in case.flags()]
    stop = case.repeats_stop()
    if stop:
        notes.append(f"- {name}: repeats {'stopped' if stop.stop else 'not finished'}: {md(stop.reason)}")
    if case.speedup_note:
        notes.append(f"- {name}: speedup left empty: {md(case.speedup_note)}.")
    notes += [f"- {name}: WARNING, nodes differ: {md(line)}" for line in case.node_differences()]
    return notes


def _environment_lines(records: Sequence[Record]) -> list[str]:
    env = next((_run_fields(r).env for r in records if _run_fields(r).env), None)
    if not env:
        return []
    git = env.get("git") or {}
    facts = [
        f"- host: {env.get('host')}; CPU: {env.get('cpu')} ({env.get('cpu_cores')} cores); "
        f"memory: {env.get('memory_gib')} GiB; OS: {env.get('os')}",
        _gpus_line(env.get("gpus", [])),
        f"- Python {env.get('python')}, {_frameworks_text(records, env)}"
        + (f", CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, NCCL {env.get('nccl')}" if env.get("cuda") else ""),
        f"- dlperf commit: {git.get('commit', 'unknown')}" + (" (uncommitted changes)" if git.get("dirty") else ""),
    ]
    return ["## Environment", "", *(md(line) for line in facts), ""]


def _run_fields(record: Record) -> RunRecord:
    """The run record's fields of a record of any kind: a commbench record's are its `run`, a max-batch search's
    none."""
    if isinstance(record, CommbenchRecord):
        return record.run
    return RunRecord() if isinstance(record, MaxbatchRecord) else record


def _frameworks_text(records: Sequence[Record], env: dict[str, Any]) -> str:
    """What ran the records, as they name it (`torch 2.14.1`, `tensorflow 2.20.0`: an external script's framework
    is not dlperf's torch); torchvision beside a native torch run."""
    runs = [_run_fields(r) for r in records]
    names = sorted({str(r.framework) for r in runs if r.framework})
    if any(engine_of(r) == "torch" for r in runs) and env.get("torchvision"):
        names.append(f"torchvision {env['torchvision']}")
    return ", ".join(names) or "framework not recorded"


def _gpus_line(gpus: list[dict[str, Any]]) -> str:
    names = ", ".join(sorted({g["name"] for g in gpus})) or "none"
    driver = next((g.get("driver") for g in gpus), None)
    return f"- GPUs: {names}" + (f"; driver {driver}" if driver else "")


def _failures(records: Sequence[RunRecord | CommbenchRecord]) -> list[str]:
    failed = [r for r in records if r.status != "ok"]
    if not failed:
        return []
    lines = ["## Failed runs", ""]
    for record in failed:
        run = _run_fields(record)
        lines.append(
            f"- {md(run.model)} {md(record.case)} {md(run.group)} repeat {md(run.repeat)}: "
            f"{md(record.error or 'no reason recorded')}"
        )
    return lines + [""]


def extra_columns(
    summary: dict[GroupKey, list[CaseSummary]], others: Sequence[Record], predicted: dict[CaseKey, Prediction]
) -> dict[GroupKey, dict[str, dict[str, str]]]:
    """Per group: `bsz=max` from maxbatch records of the same model, case and variant (the group without its
    batch), `predicted speedup` from `report --predict` commbench records, and the share of the best published
    figure (reporting/published.py)."""
    fits = {(r.model, r.case, r.variant): r.max_batch for r in others if isinstance(r, MaxbatchRecord) and r.max_batch}
    published = published_matches(summary)
    out: dict[GroupKey, dict[str, dict[str, str]]] = {}
    for (model, group), cases in summary.items():
        variant = batch_free_group(group)
        out[(model, group)] = {
            "bsz=max": {c.case: str(fits[(model, c.case, variant)]) for c in cases if (model, c.case, variant) in fits},
            "predicted speedup": _by_case(model, group, cases, predicted, lambda got: f"{got.speedup:.2f}"),
            PUBLISHED: _by_case(model, group, cases, published, lambda match: f"{match.percent:.1f}"),
        }
    return out


def _by_case(
    model: str, group: str, cases: list[CaseSummary], found: dict[tuple[str, str, str], Any], text: Callable[[Any], str]
) -> dict[str, str]:
    return {c.case: text(found[key]) for c in cases if (key := (model, group, c.case)) in found}


def tables_markdown(
    summary: dict[GroupKey, list[CaseSummary]],
    records: Sequence[RunRecord],
    columns: dict[GroupKey, dict[str, dict[str, str]]] | None = None,
    losses: dict[GroupKey, list[ScalingLoss]] | None = None,
) -> list[str]:
    """Every table of the records with its flags and footnotes, then where the scaling went (`losses`, else
    measured from `summary` without predictions): report.md's body, and report.html's per source."""
    lines: list[str] = []
    current_model = None
    for (model, group), cases in summary.items():
        if cases[0].table in OWN_TABLES:
            continue
        if model != current_model:
            lines += [f"## {md(model)}", ""]
            current_model = model
        lines += group_table(model, group, cases, (columns or {}).get((model, group)))
    for table in OWN_TABLES.values():
        lines += table(records)
    return lines + waterfall_lines(scaling_losses(summary) if losses is None else losses)


def build_markdown(
    summary: dict[GroupKey, list[CaseSummary]],
    records: Sequence[RunRecord],
    others: Sequence[Record],
    predicted: dict[CaseKey, Prediction],
    losses: dict[GroupKey, list[ScalingLoss]],
    partial: str | None = None,
) -> str:
    """`others`: this folder's commbench and maxbatch records; `predicted`: `--predict`'s cases; `partial`: what is
    still to come in the folder (records/sweep_runs.partial_note), said at the top."""
    columns = extra_columns(summary, others, predicted)
    lines = [
        "# dlperf report",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from {len(records)} run records. "
        f"samples/s is the median over repeats of global throughput; speedup = median / median of "
        f"{BASELINE_CASE} in the same table, rounded to 2 places; efficiency = speedup / devices.",
        "",
    ]
    if partial:
        lines += [f"**Partial**: {md(partial)}.", ""]
    lines += tables_markdown(summary, records, columns, losses)
    lines += published_lines(published_matches(summary))
    benches = [r for r in others if isinstance(r, CommbenchRecord)]
    lines += commbench_lines(benches)
    failures = _failures([*records, *benches])
    timing = time_lines(records)
    return "\n".join(lines + _compile_lines(summary) + timing + failures + _environment_lines([*records, *others]))


def check_one_sweep(records: Sequence[RunRecord], root: str | Path) -> None:
    """Refuse to pool the records of different sweeps (or of a sweep and single runs) into one table: their
    repeats would be counted together. `--merge` says the pooling is meant."""
    sweeps = Counter(record.sweep_id or "single runs (no sweep id)" for record in records)
    if len(sweeps) > 1:
        listed = ", ".join(f"{name} ({count} records)" for name, count in sorted(sweeps.items()))
        raise ResultsError(
            f"{root} holds the records of {len(sweeps)} sweeps: {listed}; report each sweep's own folder, "
            f"or pass --merge to pool them in one table"
        )


def existing_report_files(out: str | Path, formats: set[str]) -> list[Path]:
    """The report files already in `out` that writing `formats` there would replace."""
    folder = Path(out)
    names = (
        ("json", "summary.json"), ("json", "runs.csv"), ("json", "cases.csv"), ("md", "report.md"),
        ("html", "report.html"),
    )  # fmt: skip
    paths = [folder / name for fmt, name in names if fmt in formats]
    if "png" in formats and (folder / "plots").is_dir():
        paths += sorted((folder / "plots").glob("*.png"))
    return [p for p in paths if p.exists()]


def refuse_to_replace(out: str | Path, formats: set[str]) -> None:
    """The README's promise: nothing is replaced without --overwrite."""
    existing = existing_report_files(out, formats)
    if existing:
        more = f" (and {len(existing) - 1} more report files)" if len(existing) > 1 else ""
        raise ResultsError(f"{existing[0]} already exists{more}: pass --overwrite to replace it, or another --out")


def write_report(
    records: Sequence[RecordLike],
    out_dir: str | Path,
    formats: set[str] | None = None,
    min_plot_cases: int = 1,
    others: Sequence[RecordLike] = (),
    predict: Sequence[RecordLike] = (),
    overlap: bool = True,
    partial: str | None = None,
) -> list[Path]:
    """Write the requested formats (md, json, png) into `out_dir`; returns the files written. `others` are the
    folder's commbench and maxbatch records, `predict` commbench records for a predicted-speedup column, `partial`
    what is still to come in the folder (said at the top).

    One plot per table, for tables with at least `min_plot_cases` measured cases (`dlperf extract` passes 2:
    a folder of framework logs is mostly one-case tables, whose plot adds nothing to the row and costs a second each).
    """
    if not records and not others:
        raise ResultsError(f"no run records to report in {out_dir}")
    records, others, predict = ([as_record(r) for r in given] for given in (records, others, predict))
    formats = set(FORMATS) if formats is None else formats
    out = Path(out_dir)
    summary = summarise(records)
    predicted = predictions(summary, predict, overlap)
    losses = scaling_losses(summary, {key: got.exposed_s * 1000 for key, got in predicted.items()})
    written: list[Path] = []
    if "json" in formats:
        write_json_atomic(out / "summary.json", build_summary(summary, losses))
        written.append(out / "summary.json")
        written += write_csv(records, summary, out)
    if "md" in formats:
        write_text_atomic(out / "report.md", build_markdown(summary, records, others, predicted, losses, partial))
        written.append(out / "report.md")
    if "png" in formats:
        written += _plot_tables(summary, out / "plots", min_plot_cases)
        written += _plot_waterfalls(losses, out / "plots")
        written += _plot_commbench(others, out / "plots")
    return written


def _plot_tables(summary: dict[GroupKey, list[CaseSummary]], folder: Path, min_plot_cases: int) -> list[Path]:
    """A scaling plot per table with `min_plot_cases` measured cases, then one per layouts section."""
    from dlperf.reporting.plots import layout_section, layouts_figure, scaling_figure, scaling_title  # matplotlib

    layouts: dict[tuple[str, str], list[CaseSummary]] = {}
    paths: list[Path | None] = []
    for (model, group), cases in summary.items():
        if cases[0].table == "layouts":
            for case in cases:
                layouts.setdefault((model, layout_section(case)), []).append(case)
        elif sum(1 for c in cases if c.speeds) >= min_plot_cases:
            title = scaling_title(model, group, cases)
            paths.append(save_figure(scaling_figure(cases, title), folder / f"{file_name(f'{model}_{group}')}.png"))
    for (model, section), cases in sorted(layouts.items()):
        path = folder / f"{file_name(f'{model}_{section}')}_layouts.png"
        paths.append(save_figure(layouts_figure(model, section, cases), path))
    return [path for path in paths if path]


def _plot_waterfalls(losses: dict[GroupKey, list[ScalingLoss]], folder: Path) -> list[Path]:
    """A waterfall plot per group with a case split into measured parts (reporting/waterfall_plot.py)."""
    from dlperf.reporting.waterfall_plot import waterfall_figure  # matplotlib

    return [
        save_figure(waterfall_figure(model, group, found), folder / f"{file_name(f'{model}_{group}')}_waterfall.png")
        for (model, group), found in measured_groups(losses).items()
    ]


def _plot_commbench(others: Sequence[Record], folder: Path) -> list[Path]:
    """A bandwidth plot per measured commbench record (repeat 1 where a record from before repeats has none)."""
    return [
        plot_commbench(r, folder / (file_name(f"commbench_{r.case}_{r.dtype}_{r.run.repeat or 1}") + ".png"))
        for r in others
        if isinstance(r, CommbenchRecord) and r.status == "ok"
    ]
