"""`dlperf maxbatch`: the largest batch per device that fits in memory, each probe a fresh process."""

from dlperf.maxbatch.probe import RunProbe, classify, dlperf_run_argv
from dlperf.maxbatch.record import build_maxbatch_record
from dlperf.maxbatch.search import MaxBatchResult, Probe, ProbeOutcome, find_max_batch

__all__ = [
    "MaxBatchResult",
    "Probe",
    "ProbeOutcome",
    "RunProbe",
    "build_maxbatch_record",
    "classify",
    "dlperf_run_argv",
    "find_max_batch",
]
