"""Orchestration: check a spec once, plan its runs' paths, pick the launcher, run, build and store the records;
sweeps, their resume, and the peaks file. The CLI calls these names and shows what they return or emit.

Plain imports: every exported name is visible to type checkers and "go to definition". None of these modules loads
a framework (the rank does), so importing the package costs the run machinery's Python alone, measured in
`benchmarks/startup.py`. No exported name is also a submodule's name (`sweep_to_report` lives in `sweep.py`)."""

from __future__ import annotations

from dlperf.orchestration.evidence_fields import window_figures
from dlperf.orchestration.kinds import kind_of
from dlperf.orchestration.maxbatch import CPU_CAP_SHARE, SearchOptions, prepare_search, run_search
from dlperf.orchestration.peak import measure_and_store
from dlperf.orchestration.preflight import FORCE_HELP
from dlperf.orchestration.run import RunHooks, run_one, training_spec
from dlperf.orchestration.sweep import (
    DryRunLines,
    Ended,
    Interrupted,
    Outcome,
    Planned,
    Recorded,
    Skipped,
    Started,
    SweepEvent,
    resume_command,
    sweep_to_report,
)
from dlperf.orchestration.sweep_plan import SweepOptions, SweepPlan, SweepStart, stored_sweep_fields
from dlperf.orchestration.sweep_state import ResolvedSweep, resolve_sweep

__all__ = [
    "CPU_CAP_SHARE", "FORCE_HELP", "DryRunLines", "Ended", "Interrupted", "Outcome", "Planned", "Recorded",
    "ResolvedSweep", "RunHooks", "SearchOptions", "Skipped", "Started", "SweepEvent", "SweepOptions", "SweepPlan",
    "SweepStart", "kind_of", "measure_and_store", "prepare_search", "resolve_sweep", "resume_command", "run_one",
    "run_search", "stored_sweep_fields", "sweep_to_report", "training_spec", "window_figures"
]  # fmt: skip
