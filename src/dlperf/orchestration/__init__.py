"""Orchestration: check a spec once, plan its runs' paths, pick the launcher, run, build and store the records;
sweeps, their resume, and the peaks file. The CLI calls these names and shows what they return or emit.

The names load on first use (PEP 562), so `dlperf peak` or `dlperf predict` does not pay for the run machinery
they never call. No exported name is also a submodule's name (`sweep_to_report` lives in `sweep.py`)."""

from __future__ import annotations

import importlib
from typing import Any

# exported name -> the module (under dlperf.orchestration) that defines it
_HOMES = {
    **dict.fromkeys(("run_one", "training_spec", "RunHooks"), "run"),
    **dict.fromkeys(
        (
            "sweep_to_report",
            "Outcome",
            "SweepEvent",
            "Commands",
            "Planned",
            "Started",
            "Skipped",
            "Recorded",
            "Interrupted",
            "Ended",
            "resume_command",
        ),
        "sweep",
    ),
    **dict.fromkeys(("SweepOptions", "SweepPlan", "SweepStart", "stored_sweep_fields"), "sweep_plan"),
    **dict.fromkeys(("resolve_sweep", "ResolvedSweep"), "sweep_state"),
    **dict.fromkeys(("CPU_CAP_SHARE", "SearchOptions", "prepare_search", "run_search"), "maxbatch"),
    "measure_and_store": "peak",
    "window_figures": "evidence_fields",
    "FORCE_HELP": "preflight",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
