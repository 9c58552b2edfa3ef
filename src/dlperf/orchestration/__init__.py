"""Orchestration: check a spec once, plan its runs' paths, pick the launcher, run, build and store the records;
sweeps, their resume, and the peaks file. The CLI calls these names and shows what they return or emit.

The names load on first use (PEP 562), so `dlperf peak` or `dlperf predict` does not pay for the run machinery
they never call. `sweep` is both the function and its module: the package keeps the function, whichever is
imported first (`from dlperf.orchestration.sweep import ...` still reads the module)."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# exported name -> the module (under dlperf.orchestration) that defines it
_HOMES = {
    **dict.fromkeys(("run_one", "training_spec", "RunHooks"), "run"),
    **dict.fromkeys(
        (
            "sweep",
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


class _Api(types.ModuleType):
    """The package, whose exported names win over a submodule of the same name (`sweep`), which the import
    system would otherwise set on the package when the submodule is first imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not (name in _HOMES and isinstance(value, types.ModuleType)):
            super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Api
