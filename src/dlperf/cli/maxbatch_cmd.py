"""`dlperf maxbatch`: the largest batch per device that trains without running out of memory, and the fastest.
The search and its record are orchestration/maxbatch.py's; this module parses the flags and shows the probes."""

from __future__ import annotations

import argparse

from dlperf.cli.declared_flags import declared_options
from dlperf.cli.display import say
from dlperf.cli.run_flags import add_run_options, explicit_run_values
from dlperf.maxbatch.search import MaxBatchResult
from dlperf.orchestration import CPU_CAP_SHARE, SearchOptions, prepare_search, run_search
from dlperf.records.parts import Probe
from dlperf.reporting import markdown as markdown_table
from dlperf.wording import count
from dlperf.workloads import all_workloads


def _batch_flags() -> str:
    """Each workload's batch flag as its declaration names it (`Workload.batch_key`)."""
    keys = [(w.name, w.batch_key) for w in all_workloads() if w.batch_key]
    return ", ".join(f"--{key.replace('_', '-')} for {name}" for name, key in keys)


DESCRIPTION = (
    "Probe a case at growing batch sizes (x2 from --start until one runs out of memory, then "
    "bisect to within --step), each probe a fresh `dlperf run` process; print every probe's throughput and "
    "peak memory, the largest batch that fits and the fastest one, and write a dlperf.maxbatch/1 record to "
    "OUT/<model>/<N>n<G>g/ for the report's bsz=max column. The batch is the model's batch per device: "
    f"{_batch_flags()}."
)


OPTIONS = (add_run_options, SearchOptions)


TABLE_HEADER = markdown_table.header(("batch", "fits", "status", "samples/s", "peak memory (MiB)", "reason"), "rllrrl")


def probe_line(p: Probe) -> str:
    """One probe's table row, printed as soon as the probe ends."""
    speed = f"{p.throughput:.2f}" if p.throughput is not None else ""
    peak = f"{p.peak_memory_mib:.0f}" if p.peak_memory_mib is not None else ""
    return markdown_table.row((p.batch, "yes" if p.fits else "no", p.status, speed, peak, p.reason or ""))


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


def run(args: argparse.Namespace) -> int:
    search = prepare_search(explicit_run_values(args), declared_options(SearchOptions, args))
    options, spec = search.options, search.spec
    if search.available_gib is not None:
        print(
            f"memory cap: {options.memory_cap:.1f} GiB of address space per process (default on a CPU: "
            f"{CPU_CAP_SHARE:.0%} of the {search.available_gib:.1f} GiB available, over "
            f"{count(spec.devices_per_node, 'rank')}; --memory-cap GIB to change)"
        )
    say(f"probing {spec.model} {spec.topology} from batch {options.start}, each probe a fresh run:")
    for line in TABLE_HEADER:
        say(line)
    result = run_search(search, on_probe=_say_probe)
    if result.error:
        say(f"search stopped: {result.error}")
    say(largest_text(result, options.max_batch, options.headroom))
    if result.best_batch:
        say(f"best throughput: batch {result.best_batch} at {result.best_throughput:.2f} samples/s")
    say(f"record: {search.record_path}")
    return 0 if result.max_batch else 1
