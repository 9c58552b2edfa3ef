"""`dlperf maxbatch`'s search: the case checked once, each probe a fresh `dlperf run` at one batch, and the
`dlperf.maxbatch/1` record written. What a probe varies is the workload's `batch_key`; the CLI parses and shows."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dlperf.errors import ConfigError
from dlperf.launch.sbatch import value_flags
from dlperf.maxbatch import RunProbe, dlperf_run_argv, find_max_batch
from dlperf.maxbatch.search import MaxBatchResult, ProbeOutcome
from dlperf.orchestration.kinds import kind_of
from dlperf.records.parts import Probe
from dlperf.records.schema import MaxbatchRecord, batch_free_group
from dlperf.records.store import check_writable
from dlperf.records.written import write_record
from dlperf.spec import RunSpec, flag, setting
from dlperf.workloads import WorkloadPlan, check_spec, searched_batch, spec_from_mapping

CPU_CAP_SHARE = 0.8  # of the memory available now: the search must not push the machine into swap or the OOM killer


@dataclass(frozen=True)
class SearchOptions:
    start: int = setting(16, "first batch tried (default 16)", bound="positive", group="search")
    max_batch: int = setting(65536, "largest batch tried (default 65536)", bound="positive", group="search")
    step: int = setting(1, "stop bisecting this close (default 1: exact)", bound="positive", group="search")
    headroom: float = setting(
        0.0, "a GPU run must leave PCT % of memory free", bound="percent", metavar="PCT", group="search"
    )
    memory_cap: float | None = setting(
        None,
        "memory cap per rank of each probe: a device-memory fraction on a GPU, RLIMIT_AS on a CPU",
        bound="positive",
        metavar="GIB",
        group="search",
    )
    probe_timeout: float = setting(1800.0, "seconds per probe", bound="positive", group="search")
    out: str = setting("results", "results folder (default ./results)", bound="non-empty")


@dataclass(frozen=True)
class MaxBatchSearch:
    """A checked search: the case (its own flags in `values`), the flag a probe varies, and the options with the
    memory cap decided; `available_gib` is set where that cap is the CPU default taken from the memory available."""

    spec: RunSpec
    plan: WorkloadPlan
    values: dict[str, Any]
    batch_flag: str
    options: SearchOptions
    available_gib: float | None = None

    @property
    def record_path(self) -> Path:
        group = batch_free_group(self.plan.group)
        return Path(self.options.out) / self.spec.model / self.spec.topology / f"maxbatch_{group}.json"


def _on_cpu(device: str) -> bool:
    """A CPU run: asked for, or `auto` on a machine without an NVIDIA device node."""
    return device == "cpu" or (device == "auto" and not any(Path("/dev").glob("nvidia[0-9]*")))


def available_gib() -> float:
    """Memory available to new processes now (Linux MemAvailable; elsewhere free physical pages)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / 2**30
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30


def default_cpu_cap_gib(ranks: int) -> tuple[float, float]:
    """(cap per process, GiB available): a share of the available memory split over the ranks, so a probe that
    grows past it fails as an out-of-memory probe instead of taking the machine down."""
    available = available_gib()
    return max(0.5, CPU_CAP_SHARE * available / ranks), available


def make_probe(
    case_args: list[str], batch_flag: str, workdir: Path, options: SearchOptions
) -> Callable[[int], ProbeOutcome]:
    """Each probe a fresh `dlperf run` (a test swaps this for a fake with a known boundary)."""
    cap = round(options.memory_cap * 2**30) if options.memory_cap else None
    return RunProbe(dlperf_run_argv(case_args, batch_flag), workdir, cap, options.probe_timeout)


def prepare_search(values: dict[str, Any], options: SearchOptions) -> MaxBatchSearch:
    """The case's flags checked once, before any probe, at the first batch; the output folder writable; on a CPU
    without --memory-cap, the default cap."""
    key = searched_batch(values.get("model", "resnet50"))
    if key in values:
        raise ConfigError(f"{flag(key)} is what maxbatch varies: use --start and --max-batch instead")
    spec = spec_from_mapping({**values, key: options.start})
    plan = check_spec(spec)
    kind_of(spec).check(spec, plan)
    check_writable(options.out)
    available = None
    if options.memory_cap is None and _on_cpu(spec.device):
        cap, available = default_cpu_cap_gib(spec.devices_per_node)
        options = replace(options, memory_cap=cap)
    return MaxBatchSearch(spec, plan, values, "--" + key.replace("_", "-"), options, available)


def run_search(search: MaxBatchSearch, on_probe: Callable[[Probe], None]) -> MaxBatchResult:
    """Probe from --start (each probe a fresh run in a scratch folder, `on_probe` told as each ends), then write
    the record to `search.record_path`."""
    options = search.options
    with tempfile.TemporaryDirectory(prefix="dlperf-maxbatch-") as workdir:
        probe = make_probe(value_flags(search.values), search.batch_flag, Path(workdir), options)
        result = find_max_batch(
            probe, options.start, options.max_batch, options.headroom, options.step, on_probe=on_probe
        )
    record = MaxbatchRecord(
        status="ok" if result.max_batch else "failed",
        error=result.error,
        model=search.spec.model,
        case=search.spec.topology,
        variant=batch_free_group(search.plan.group),  # what the report matches the case's runs on
        precision=search.spec.precision,
        batch_flag=search.batch_flag,
        config=search.values,
        headroom_pct=result.headroom_pct,
        memory_cap_gib=options.memory_cap,
        max_batch=result.max_batch,
        best_batch=result.best_batch,
        best_throughput=result.best_throughput,
        probes=list(result.probes),
        finished_at=time.time(),
    )
    write_record(search.record_path, record)
    return result
