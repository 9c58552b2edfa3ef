"""Several results folders side by side, the comparison's model: sources, series, cells, environments (its tables,
markdown, JSON and plots: comparison_files.py).

A *source* is one results folder (native dlperf runs or records written by `dlperf extract`), or, `--by engine`,
the records of one engine pooled over every folder. Sources are compared per *series*: one model in one variant
(precision plus switches such as `compile`), whatever batch sizes they ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.escape import file_name
from dlperf.machine.env_diff import env_nodes, node_facts
from dlperf.records.load import RecordLike, as_record, load_records
from dlperf.records.schema import ExternalRunRecord, ExtractedRecord, RunRecord
from dlperf.reporting.aggregate import CaseSummary, summarise
from dlperf.reporting.doubts import Flag
from dlperf.reporting.measured_on import frameworks
from dlperf.workloads import model_aliases

BY_CHOICES = ("source", "engine", "framework")
BATCH_TOKEN = re.compile(r"^b\d+$")
LAYOUT_PREFIXES = {"DP", "MP", "2D", "PP"}  # a GPT short name's layout kinds
LAYOUT_NUMBERS = re.compile(r"^\d+(x\d+x\d+)?$")  # its dp x tp x pp and its global batch
PUBLISHED_IMAGE_SIZE = 224


@dataclass(frozen=True, order=True)
class SeriesKey:
    """What is compared across sources: a model in one variant, e.g. resnet50 `fp32` or `amp-fp16_compile`."""

    model: str
    variant: str

    @property
    def title(self) -> str:
        return f"{self.model} {self.variant}"

    @property
    def slug(self) -> str:
        return file_name(f"{self.model}_{self.variant}")


def canonical_model(name: str) -> str:
    """Lower-case letters and digits, then the workloads' aliases (`Workload.aliases`): `ResNet-50`, `rn50` and
    `resnet50` meet."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return model_aliases().get(key, key)


def work_of(record: RunRecord) -> str:
    """The record's work where it differs from the published case (`32px`, `s128`): its `work` field, else
    (records written before it) the image size its config holds."""
    if isinstance(record.work, str):
        return record.work
    size = (record.config or {}).get("image_size")
    return f"{size}px" if isinstance(size, int) and size != PUBLISHED_IMAGE_SIZE else ""


def group_with_work(record: RunRecord) -> str:
    """The record's group plus its work tokens: the key under which runs are pooled across folders."""
    tokens = str(record.group).split("_")
    return "_".join(tokens + [t for t in work_of(record).split("_") if t and t not in tokens])


def _runner(record: RunRecord) -> str | None:
    """The token a record's group names who ran it by (RunSpec.engine_tag): its engine, an external run's label."""
    return (record.label or "external") if isinstance(record, ExternalRunRecord) else record.engine


def series_of(record: RecordLike) -> tuple[SeriesKey, int]:
    """The series a record belongs to and its batch size per device: the group and its work (other image sizes,
    sequence lengths: other series) minus its `b<batch>` token and its engine's (`jax`, an external run's label),
    so engines and frameworks meet in one series of the same work. A GPT layouts case's group names its whole
    layout and global batch (`DP_2x1x1_8_64x2_fp32`): its series is the work of one data-parallel replica instead
    (`tp1_pp1_64x2_fp32`, the per-replica batch), so its 1n1g and 1n2g runs are one series that scales."""
    record = as_record(record)
    who = _runner(record)
    tokens = [t for t in group_with_work(record).split("_") if not BATCH_TOKEN.match(t) and t != who]
    if record.table == "layouts" and record.parallel is not None:
        tp, pp = record.parallel.tp, record.parallel.pp  # a layout names both
        kept = [t for t in tokens if t not in LAYOUT_PREFIXES and not LAYOUT_NUMBERS.match(t)]
        tokens = [f"tp{tp}", f"pp{pp}", *kept]
    variant = "_".join(tokens) or str(record.precision)
    return SeriesKey(canonical_model(str(record.model)), variant), int(record.batch_size)


def pooled_group(record: RunRecord) -> str:
    """The group a record is summarised under in a comparison: its group with its work, or for a GPT layouts case
    its series and per-replica batch (one table across data-parallel sizes, so its speedup is against its 1n1g)."""
    if record.table == "layouts" and record.parallel is not None:
        key, batch = series_of(record)
        return f"b{batch}_{key.variant}"
    return group_with_work(record)


def engine_of(record: RunRecord) -> str:
    """The framework behind a record: the log format for extracted logs, an external run's label (two commands
    are never one engine), else the record's engine (torch before engines were recorded)."""
    if isinstance(record, ExtractedRecord):
        return str(record.format or "extracted")
    if isinstance(record, ExternalRunRecord):
        return str(record.label or "external")
    return str(record.engine or "torch")


def framework_source(record: RunRecord) -> str:
    """`--by framework`: the record's framework and version (`tensorflow 2.20.0`), with an external run's label
    where it names the command apart from its framework; extracted logs by their format."""
    name = record.framework
    if not name:
        return engine_of(record)
    label = record.label if isinstance(record, ExternalRunRecord) else None
    first = str(name).split(" ")[0]
    return f"{name} ({label})" if label and label != first else str(name)


def _split_by_command(label: str, records: list[RunRecord]) -> list[tuple[str, list[RunRecord]]]:
    """One folder as sources: itself, or one per engine/command where it mixes them, so that two frameworks'
    runs of one case are never one median."""
    names = sorted({engine_of(r) for r in records}, key=lambda name: (name != "torch", name))
    if len(names) < 2:
        return [(label, records)]
    return [(f"{label}/{name}", [r for r in records if engine_of(r) == name]) for name in names]


@dataclass
class Source:
    """One column of the comparison: its records, and per series and batch size the summarised cases."""

    label: str
    records: list[RunRecord]
    series: dict[SeriesKey, dict[int, list[CaseSummary]]] = field(default_factory=dict)

    @classmethod
    def from_records(cls, label: str, records: Sequence[RecordLike]) -> Source:
        """Summarise under canonical model names, so `rn50` and `resnet50` runs pooled here are one table."""
        source = cls(label, [as_record(r) for r in records])
        canonical = [
            replace(r, model=canonical_model(str(r.model)), group=pooled_group(r), table="scaling")
            for r in source.records
        ]
        for (_model, _group), cases in summarise(canonical).items():
            key, batch = series_of(cases[0].records[0] if cases[0].records else cases[0].failed[0])
            source.series.setdefault(key, {})[batch] = cases
        return source

    def measured_batches(self, key: SeriesKey) -> list[int]:
        return sorted(b for b, cases in self.series.get(key, {}).items() if any(c.speeds for c in cases))

    def max_batch(self, key: SeriesKey) -> int | None:
        """The largest batch that fit, where a record says (`max_batch`), for this series."""
        found = [
            int(r.origin.data["max_batch"])
            for r in self.records
            if isinstance(r.origin.data.get("max_batch"), int) and series_of(r)[0] == key
        ]
        return max(found) if found else None

    def environment(self) -> dict[str, Any] | None:
        """The compared facts of the first record that carries an environment (extracted logs carry none)."""
        for record in self.records:
            if record.env:
                return node_facts(env_nodes(record.env)[0])
        return None

    def kind(self) -> str:
        engines = sorted({engine_of(r) for r in self.records})
        return ", ".join(engines)

    def frameworks(self) -> str | None:
        return frameworks(self.records)


def load_sources(dirs: Sequence[str | Path], labels: Sequence[str] | None = None, by: str = "source") -> list[Source]:
    """Read each folder's records; label sources by `labels`, the folder names, or (`by="engine"`) the engine."""
    _check_grouping(len(dirs), labels, by)
    per_dir = [load_records(d) for d in dirs]
    if by in ("engine", "framework"):
        if labels:
            raise ConfigError(f"--label names folders; with --by {by} the {by}s name the sources: drop --label")
        return _pooled_sources(per_dir, engine_of if by == "engine" else framework_source)
    names = _folder_labels(dirs, labels)
    split = [part for name, records in zip(names, per_dir) for part in _split_by_command(name, records)]
    return [Source.from_records(name, records) for name, records in split]


def _check_grouping(folders: int, labels: Sequence[str] | None, by: str) -> None:
    """Refuse an unknown --by, or --label counts that do not match the folders, before anything is read."""
    if by not in BY_CHOICES:
        raise ConfigError(f"unknown --by {by!r}: choose one of {', '.join(BY_CHOICES)}")
    if labels and len(labels) != folders:
        raise ConfigError(f"{len(labels)} --label for {folders} folders: give one --label per folder, in order")


def _pooled_sources(per_dir: list[list[RunRecord]], key: Callable[[RunRecord], str]) -> list[Source]:
    """Every folder's records pooled, one source per `key` (engine or framework)."""
    pooled: dict[str, list[RunRecord]] = {}
    for records in per_dir:
        for record in records:
            pooled.setdefault(key(record), []).append(record)
    # ratios are to torch, native before a command of the same framework
    order = sorted(pooled, key=lambda name: (name.split(" ")[0] != "torch", "(" in name, name))
    return [Source.from_records(label, pooled[label]) for label in order]


def _folder_labels(dirs: Sequence[str | Path], labels: Sequence[str] | None) -> list[str]:
    """One label per folder (given, else the folder's name), each its own."""
    names = list(labels) if labels else [Path(d).resolve().name for d in dirs]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"two sources are labelled {name!r}: give each folder its own --label")
    return names


@dataclass(frozen=True)
class Cell:
    """One source's figure for a case: median samples/s over repeats, speedup vs its own 1n1g, batch per device."""

    throughput: float | None
    speedup: float | None
    batch_size: int
    repeats: int
    failed: int
    flags: tuple[Flag, ...] = ()

    @property
    def labels(self) -> str:
        return ", ".join(flag.label for flag in self.flags)


def _cell(case: CaseSummary | None, batch: int) -> Cell | None:
    if case is None:
        return None
    median = case.stats["median"] if case.speeds else None
    return Cell(median, case.speedup, batch, len(case.speeds), len(case.failed), tuple(case.flags()))


@dataclass
class SeriesComparison:
    """One series across sources: the batch each source is shown at, its cases, and the largest common case."""

    key: SeriesKey
    labels: list[str]
    batches: dict[str, int]
    cases: dict[str, dict[str, CaseSummary]]  # label -> case name -> case
    max_batches: dict[str, int | None]

    @property
    def case_order(self) -> list[str]:
        """Every case any source ran, by devices then nodes."""
        seen = {name: c for by_case in self.cases.values() for name, c in by_case.items()}
        return sorted(seen, key=lambda n: (seen[n].world_size, seen[n].nodes, n))

    @property
    def common_case(self) -> str | None:
        """The largest topology every source measured (the summary's column); None when they share none."""
        shared = [
            n
            for n in self.case_order
            if all(self.cases[lbl].get(n) and self.cases[lbl][n].speeds for lbl in self.labels)
        ]
        return shared[-1] if shared else None

    def cell(self, label: str, case: str) -> Cell | None:
        return _cell(self.cases.get(label, {}).get(case), self.batches.get(label, 0))

    def world_size(self, case: str) -> int:
        return next(c[case].world_size for c in self.cases.values() if case in c)

    def ratios(self, case: str) -> dict[str, float | None]:
        """Each source's median over the first source's, for one case (None where either is missing)."""
        first = self.cell(self.labels[0], case)
        out: dict[str, float | None] = {}
        for label in self.labels[1:]:
            cell = self.cell(label, case)
            ok = first and cell and first.throughput and cell.throughput is not None
            out[label] = round(cell.throughput / first.throughput, 3) if ok else None
        return out


def _choose_batches(sources: list[Source], key: SeriesKey) -> dict[str, int]:
    """The largest batch every source measured; where they share none, each source's own largest."""
    measured = {s.label: s.measured_batches(key) for s in sources if s.measured_batches(key)}
    common = set.intersection(*(set(b) for b in measured.values())) if measured else set()
    if common:
        return {label: max(common) for label in measured}
    return {label: batches[-1] for label, batches in measured.items()}


def compare_series(sources: list[Source]) -> list[SeriesComparison]:
    """Every series at least one source measured, in model then variant order."""
    keys = sorted({key for s in sources for key in s.series})
    return [_series(sources, key, batches) for key in keys if (batches := _choose_batches(sources, key))]


def _series(sources: list[Source], key: SeriesKey, batches: dict[str, int]) -> SeriesComparison:
    """One series, each source at its chosen batch (the sources without one left out)."""
    shown = [s for s in sources if s.label in batches]
    cases = {s.label: {c.case: c for c in s.series[key][batches[s.label]]} for s in shown}
    return SeriesComparison(key, [s.label for s in shown], batches, cases, {s.label: s.max_batch(key) for s in sources})


@dataclass(frozen=True)
class EnvRow:
    """One environment fact for every source; `differs` when two sources that know it disagree."""

    fact: str
    values: dict[str, str | None]

    @property
    def differs(self) -> bool:
        return len(self.known) > 1

    @property
    def known(self) -> set[str]:
        return {v for v in self.values.values() if v is not None}


def environment_rows(sources: list[Source]) -> list[EnvRow]:
    """What each source ran on: its engine or log format, the framework its records name (a TensorFlow script's
    `tensorflow 2.20.0`, which dlperf's own environment does not hold), then the machine's facts that at least one
    source knows (extracted logs know only their format)."""
    envs = {s.label: s.environment() for s in sources}
    rows = [
        EnvRow("engine / format", {s.label: s.kind() for s in sources}),
        EnvRow("framework", {s.label: s.frameworks() for s in sources}),
    ]
    rows += _fact_rows(envs)
    return [row for row in rows if row.known]


def _fact_rows(envs: dict[str, dict[str, Any] | None]) -> list[EnvRow]:
    facts = next((list(e) for e in envs.values() if e), [])
    return [EnvRow(fact, {label: _fact(env, fact) for label, env in envs.items()}) for fact in facts]


def _fact(env: dict[str, Any] | None, fact: str) -> str | None:
    value = env.get(fact) if env else None
    return None if value in (None, "") else str(value)


@dataclass
class Comparison:
    """Everything the cross-source report shows, computed once for markdown, JSON, plots and HTML."""

    sources: list[Source]
    series: list[SeriesComparison]
    environment: list[EnvRow]

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.sources]


def build_comparison(sources: list[Source]) -> Comparison:
    return Comparison(sources, compare_series(sources), environment_rows(sources))
