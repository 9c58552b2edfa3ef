"""`dlperf maxbatch`: the largest batch per device that trains without running out of memory, and the fastest."""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.cli.declared_flags import add_declared
from dlperf.cli.display import say
from dlperf.cli.run_flags import add_run_options, explicit_run_values
from dlperf.errors import ConfigError
from dlperf.maxbatch import RunProbe, build_maxbatch_record, dlperf_run_argv, find_max_batch
from dlperf.maxbatch.search import MaxBatchResult, Probe
from dlperf.records.schema import batch_free_group
from dlperf.records.store import check_writable, write_record
from dlperf.spec import setting
from dlperf.wording import count
from dlperf.workloads import check_spec, spec_from_mapping

BATCH_KEY = {"resnet50": "batch_size", "gpt": "micro_batch_size"}  # what a probe varies, per model


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "maxbatch",
        parents=[common],
        help="find the largest batch per device that fits in memory",
        description="Probe a case at growing batch sizes (x2 from --start until one runs out of memory, then "
        "bisect to within --step), each probe a fresh `dlperf run` process; print every probe's throughput and "
        "peak memory, the largest batch that fits and the fastest one, and write a dlperf.maxbatch/1 record to "
        "OUT/<model>/<N>n<G>g/ for the report's bsz=max column. The batch is --batch-size for resnet50 and "
        "--micro-batch-size for gpt.",
    )
    add_run_options(parser)
    add_declared(parser, SearchOptions)
    parser.set_defaults(func=run)


CPU_CAP_SHARE = 0.8  # of the memory available now: the search must not push the machine into swap or the OOM killer


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


def case_argv(values: dict[str, Any]) -> list[str]:
    """The case's values back as `dlperf run` flags."""
    argv: list[str] = []
    for key, value in values.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def make_probe(case_args: list[str], batch_flag: str, workdir: Path, args: argparse.Namespace):
    """Each probe a fresh `dlperf run` (a test swaps this for a fake with a known boundary)."""
    cap = round(args.memory_cap * 2**30) if args.memory_cap else None
    return RunProbe(dlperf_run_argv(case_args, batch_flag), workdir, cap, args.probe_timeout)


TABLE_HEADER = ("| batch | fits | status | samples/s | peak memory (MiB) | reason |", "|---:|---|---|---:|---:|---|")


def probe_line(p: Probe) -> str:
    """One probe's table row, printed as soon as the probe ends."""
    speed = f"{p.throughput:.2f}" if p.throughput is not None else ""
    peak = f"{p.peak_memory_mib:.0f}" if p.peak_memory_mib is not None else ""
    return f"| {p.batch} | {'yes' if p.fits else 'no'} | {p.status} | {speed} | {peak} | {p.reason or ''} |"


def largest_text(result: MaxBatchResult, ceiling: int, headroom: float) -> str:
    """The answer; a search that stopped at --max-batch found a lower bound, not the largest batch that fits."""
    if not result.max_batch:
        return f"largest batch that fits: none (headroom {headroom:g} %)"
    if result.max_batch >= ceiling and all(p.fits for p in result.probes if p.status != "error"):
        return (
            f"every batch tried fits, up to the ceiling --max-batch {ceiling} (headroom {headroom:g} %): the largest "
            "that fits is not known; raise --max-batch to find it"
        )
    return f"largest batch that fits: {result.max_batch} (headroom {headroom:g} %)"


def _say_probe(probe: Probe) -> None:
    say(probe_line(probe))


@dataclass(frozen=True)
class SearchOptions:
    start: int = setting(16, "first batch tried (default 16)", bound="positive", group="search")
    max_batch: int = setting(65536, "largest batch tried (default 65536)", bound="positive", group="search")
    step: int = setting(1, "stop bisecting this close (default 1: exact)", bound="positive", group="search")
    headroom: float = setting(0.0, "a GPU run must leave PCT % of memory free", metavar="PCT", group="search")
    memory_cap: float | None = setting(
        None,
        "memory cap per rank of each probe: a device-memory fraction on a GPU, RLIMIT_AS on a CPU",
        bound="positive",
        metavar="GIB",
        group="search",
    )
    probe_timeout: float = setting(1800.0, "seconds per probe", bound="positive", group="search")
    out: str = setting("results", "results folder (default ./results)", bound="non-empty")


def run(args: argparse.Namespace) -> int:
    values = explicit_run_values(args)
    model = values.get("model", "resnet50")
    key = BATCH_KEY.get(model)
    if key is None:
        raise ConfigError(f"dlperf maxbatch searches the batch of {' or '.join(BATCH_KEY)}, not {model}")
    if key in values:
        raise ConfigError(f"--{key.replace('_', '-')} is what maxbatch varies: use --start and --max-batch instead")
    spec = spec_from_mapping({**values, key: args.start})
    plan = check_spec(spec)  # the case's flags are checked once, before any probe
    check_writable(args.out)
    if args.memory_cap is None and _on_cpu(spec.device):
        args.memory_cap, available = default_cpu_cap_gib(spec.devices_per_node)
        print(
            f"memory cap: {args.memory_cap:.1f} GiB of address space per process (default on a CPU: "
            f"{CPU_CAP_SHARE:.0%} of the {available:.1f} GiB available, over {count(spec.devices_per_node, 'rank')}; "
            "--memory-cap GIB to change)"
        )
    with tempfile.TemporaryDirectory(prefix="dlperf-maxbatch-") as workdir:
        probe = make_probe(case_argv(values), "--" + key.replace("_", "-"), Path(workdir), args)
        say(f"probing {spec.model} {spec.topology} from batch {args.start}, each probe a fresh run:")
        for line in TABLE_HEADER:
            say(line)
        result = find_max_batch(probe, args.start, args.max_batch, args.headroom, args.step, on_probe=_say_probe)
    record = build_maxbatch_record(
        result,
        model=spec.model,
        case=spec.topology,
        group=plan.group,
        precision=spec.precision,
        batch_flag="--" + key.replace("_", "-"),
        config=values,
        memory_cap_gib=args.memory_cap,
    )
    path = Path(args.out) / spec.model / spec.topology / f"maxbatch_{batch_free_group(plan.group)}.json"
    write_record(path, record)
    if result.error:
        say(f"search stopped: {result.error}")
    say(largest_text(result, args.max_batch, args.headroom))
    if result.best_batch:
        say(f"best throughput: batch {result.best_batch} at {result.best_throughput:.2f} samples/s")
    say(f"record: {path}")
    return 0 if result.max_batch else 1
