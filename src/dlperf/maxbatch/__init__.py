"""`dlperf maxbatch`: the largest batch per device that fits in memory, each probe a fresh process."""

from dlperf.maxbatch.probe import RunProbe, classify, dlperf_run_argv
from dlperf.maxbatch.search import MaxBatchResult, ProbeOutcome, find_max_batch

__all__ = ["MaxBatchResult", "ProbeOutcome", "RunProbe", "classify", "dlperf_run_argv", "find_max_batch"]
