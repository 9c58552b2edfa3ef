"""What a workload gives the harness, torch-free: its config, its checks, a plan made once, and a step builder
per engine (loaded only inside the rank that runs it)."""

from __future__ import annotations

import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from dlperf.errors import ConfigError
from dlperf.metrics.footprint import Footprint
from dlperf.spec import RunSpec, flag


@dataclass(frozen=True)
class WorkloadPlan:
    """What every later step reads instead of recomputing: batch sizes, table group, file stem, record fields.

    `batch_per_device` is samples per device per iteration (global batch / data-parallel size);
    `micro_batch` is set where a step splits its batch (GPT), else None. `table` picks the report table
    (`scaling`: the published speedup table; `layouts`: the GPT report's table). `lr` is the learning rate every
    engine's step uses (the default rule applied once).
    """

    global_batch: int
    batch_per_device: int
    group: str
    stem: str
    table: str = "scaling"
    micro_batch: int | None = None
    record_fields: dict[str, Any] = field(default_factory=dict)
    layout: Any = None  # the workload's own parallel layout, where it has one
    lr: float | None = None


def layout_plan(layout: Any, group: str, stem: str, lr: float, record_fields: dict[str, Any]) -> WorkloadPlan:
    """A language model's plan from its layout: the global batch, one data-parallel replica's share of it, its
    micro-batches, and the report's layouts table."""
    return WorkloadPlan(global_batch=layout.global_batch_size, batch_per_device=layout.global_batch_size // layout.dp,
                        group=group, stem=stem, table="layouts", micro_batch=layout.micro_batch_size,
                        record_fields=record_fields, layout=layout, lr=lr)  # fmt: skip


def variant_tag(spec: RunSpec, *switches: str, before_compile: tuple[str, ...] = (), data: str = "realdata") -> str:
    """Precision plus every switch that changes speed (the workload's own, "" where off, after compile or before
    it), so no two variants share a file name: fp32 parts on IEEE FP32 rather than TF32, compile, real data (the
    workload's word for its loader) and who runs it where not torch (another engine, a command's label)."""
    compiled = ("compile" if spec.compile_mode == "default" else f"compile-{spec.compile_mode}") if spec.compile else ""
    parts = (
        spec.precision,
        f"{spec.fp32_math}-fp32" if spec.fp32_math != "tf32" else "",
        *before_compile,
        compiled,
        *switches,
        data if spec.data != "synthetic" else "",
        spec.engine_tag if spec.engine != "torch" else "",
    )
    return "_".join(part for part in parts if part)


class PlausibleWork(NamedTuple):
    """What bounds a plausible speed in another framework's log of this workload (dlperf extract): a sample in
    words, the name fragments that say a log ran it, and its training FLOPs per sample, a low estimate (3 x forward
    at the smallest usual input) so the bound stays loose."""

    what: str
    name_parts: tuple[str, ...]
    flops_per_sample: float


@dataclass(frozen=True)
class CpuEstimate:
    """A rough figure for a run on CPUs, said before a long one starts: the training FLOPs of one sample, the work
    in words (`at 224 px`), and the flags of a quick look."""

    flop_per_sample: float
    work: str
    quick_look: str


class Workload(ABC):
    """A model plus its data and optimizer, benchmarked by the engine-agnostic timed loop."""

    name: ClassVar[str]
    title: ClassVar[str] = ""  # the heading of its flags in --help; empty: "--model NAME"
    config_type: ClassVar[type]
    # engine name -> "module:function" building this workload's step for that engine: the engines it runs on
    builders: ClassVar[dict[str, str]] = {}
    # engine name -> "module:function" run on every rank INSTEAD of the timed loop, (spec, plan, engine) -> a
    # JSON-able dict (rank 0's is kept); such a workload turns that output into its record with `task_record`
    tasks: ClassVar[dict[str, str]] = {}
    record_schema: ClassVar[str | None] = None  # None: a run record (dlperf.records.schema.SCHEMA)
    # the config field `dlperf maxbatch` varies: the batch per device (None: the workload has none to search)
    batch_key: ClassVar[str | None] = None
    report_title: ClassVar[str] = ""  # its name in the report's headings; empty: the model name
    flops_formula: ClassVar[str] = ""  # the report's short words for where its FLOPs come from; empty: none said
    # the names other frameworks' logs give it, as lower-case letters and digits: one model meets itself in reports
    aliases: ClassVar[tuple[str, ...]] = ()
    plausible: ClassVar[PlausibleWork | None] = None  # extract's speed bound for its logs; None: the generic one
    # "module:object" of its `Predictor` (predict/setting.py): `dlperf predict --model NAME`, a layout at any scale on
    # a named accelerator (None: the model is not predicted)
    predictor: ClassVar[str | None] = None

    def expand(self, values: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
        """Fill values the user did not give from a named case; none by default."""
        return values

    @abstractmethod
    def validate(self, spec: RunSpec) -> None:
        """Raise ConfigError/DataError for values this workload cannot run; called once, before any process."""

    @abstractmethod
    def plan(self, spec: RunSpec) -> WorkloadPlan:
        """The run's derived values, computed once from a valid spec."""

    def derived_metrics(self, spec: RunSpec, plan: WorkloadPlan, throughput: float) -> dict[str, Any]:
        """Extra record fields computed from the throughput (samples/s: e.g. tokens/s, the published formula's
        FLOPs); none by default."""
        return {}

    def footprint(self, spec: RunSpec, plan: WorkloadPlan) -> Footprint | None:
        """One rank's estimated memory, for the pre-flight warning; None where the workload cannot tell."""
        return None

    def cpu_estimate(self, spec: RunSpec) -> CpuEstimate | None:
        """The work of one sample for the CPU duration estimate; None (the default) where no estimate applies."""
        return None

    def task_record(self, spec: RunSpec, plan: WorkloadPlan, output: dict[str, Any], device_type: str) -> dict:
        """The record fields (its own `schema` included) made from a rank task's output; only for `tasks`."""
        raise NotImplementedError(f"model {self.name} has no rank task of its own")

    def require_engine(self, engine: str) -> None:
        """Refuse, before any process starts, an engine this workload has no step (or task) for."""
        targets = self.tasks or self.builders
        if engine not in targets:
            raise ConfigError(
                f"model {self.name} has no {engine} implementation: choose {flag('engine')} {' or '.join(targets)}"
            )

    def builder(self, engine: str) -> Callable[..., Any]:
        """This workload's step builder for `engine`, imported only now (it imports the framework)."""
        return self._load(self.builders, engine)

    def task(self, engine: str) -> Callable[..., Any]:
        """This workload's rank task for `engine`, imported only now."""
        return self._load(self.tasks, engine)

    def _load(self, targets: dict[str, str], engine: str) -> Callable[..., Any]:
        self.require_engine(engine)
        return pkgutil.resolve_name(targets[engine])
