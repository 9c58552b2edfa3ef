"""Collective bandwidth from `dlperf.commbench/1` records: per-size table, alpha-beta fits, bus bandwidth plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from dlperf.errors import ConfigError
from dlperf.escape import plot
from dlperf.records.codec import DecodeError
from dlperf.records.load import RecordLike, as_record
from dlperf.records.parts import CollectiveFit
from dlperf.records.schema import CommbenchRecord
from dlperf.records.validate import record_problem
from dlperf.reporting import markdown
from dlperf.reporting.figures import save_figure
from dlperf.user_files import read_user_text
from dlperf.wording import count


def read_commbench(path: str | Path) -> CommbenchRecord:
    """A commbench record the user named (`predict`, `report --predict`): anything else is their error to fix."""
    try:
        data = json.loads(read_user_text(path, "commbench record"))
    except (ValueError, RecursionError) as error:
        raise ConfigError(f"cannot read commbench record {path}: {error}") from None
    try:
        record = as_record(data, path) if isinstance(data, dict) else None
    except DecodeError as error:  # a part's type: an edited record is named, never a crash
        raise ConfigError(
            f"commbench record {path} is not usable: {error}; measure again with dlperf commbench"
        ) from None
    if not isinstance(record, CommbenchRecord):
        raise ConfigError(f"{path} is not a commbench record: give the JSON `dlperf commbench` wrote")
    problem = record_problem(data)  # its declared fields' types: an edited record is named, never a crash
    if problem:
        raise ConfigError(f"commbench record {path} is not usable: {problem}; measure again with dlperf commbench")
    if record.status != "ok":
        raise ConfigError(f"{path} is a failed commbench run ({record.error}): measure again")
    return record


def _size(size_bytes: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:g} {unit}"
    return f"{size_bytes:g} B"


def title(record: CommbenchRecord) -> str:
    return (
        f"{record.case} ({count(record.world_size, 'rank')}), {record.backend} on {record.run.device_type}, "
        f"{record.dtype}, {record.warmup} warm-up + {record.repeats} timed calls"
    )


def _alpha(fit: CollectiveFit) -> str:
    """The fitted latency in us; a least-squares latency below zero is shown as what it is: none measurable."""
    if fit.alpha_clamped or fit.alpha_s < 0:
        return "0 (fit below 0: clamped, line refitted through 0)"
    return f"{fit.alpha_s * 1e6:.1f}"


def commbench_lines(records: Sequence[RecordLike]) -> list[str]:
    """Markdown: each successful commbench record's measurements and fits; nothing when there are none."""
    ok = [r for r in map(as_record, records) if isinstance(r, CommbenchRecord) and r.status == "ok"]
    if not ok:
        return []
    lines = [
        "## Collective bandwidth (dlperf commbench)",
        "",
        "Sizes are whole buffers (nccl-tests' convention); bus bandwidth = algorithm bandwidth x 2(n-1)/n for "
        "all-reduce, (n-1)/n for all-gather and reduce-scatter, 1 point-to-point. The fit is time = alpha + "
        "beta x bytes by least squares.",
        "",
    ]
    for record in ok:
        lines += [f"### {title(record)}", "", *_results_table(record), "", *_fits_table(record)]
        lines += ["", record.note, ""] if record.note else [""]
    return lines


def _results_table(record: CommbenchRecord) -> list[str]:
    """Each measured collective and size: its time and bandwidths."""
    header = ["collective", "size", "time (us)", "algbw (GB/s)", "busbw (GB/s)"]
    rows = [
        [r.op, _size(r.size_bytes), f"{r.seconds * 1e6:.1f}", _gbps(r.algbw_gbps), _gbps(r.busbw_gbps)]
        for r in record.results or []
    ]
    return markdown.table(header, rows, "lrrrr")


def _fits_table(record: CommbenchRecord) -> list[str]:
    """Each collective's fit time = alpha + beta x bytes."""
    header = ["collective", "alpha (us)", "beta (ns/byte)", "large-message busbw (GB/s)", "r2", "worst error"]
    rows = [
        [
            op,
            _alpha(f),
            f"{f.beta_s_per_byte * 1e9:.4f}",
            _gbps(f.busbw_gbps),
            f"{f.r2:.4f}",
            f"{f.max_rel_error:.1%}",
        ]
        for op, f in (record.fits or {}).items()
    ]
    return markdown.table(header, rows, "lrrrrr")


def _gbps(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def plot_commbench(record: CommbenchRecord, path: Path) -> Path:
    """Bus bandwidth against message size, one line per collective (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(7, 4.2))
    results = record.results or []
    for op in dict.fromkeys(r.op for r in results):
        rows = [r for r in results if r.op == op and r.busbw_gbps is not None]
        if not rows:
            continue
        axis.plot([r.size_bytes for r in rows], [r.busbw_gbps for r in rows], "o-", label=op)
    axis.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)")
    axis.set_title(plot(title(record)), fontsize=9)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    fig.tight_layout()
    return save_figure(fig, path)
