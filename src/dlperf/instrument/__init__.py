"""Zero-code instrumentation of a `--command` (docs/instrumentation.md): where its program is Python, dlperf puts
`startup/` first on its PYTHONPATH, so that `startup/sitecustomize.py` notes every update of the model (or Keras
batch) in a side file per process, which the parent merges (framework_logs/hookranks.py) and reads as the run's primary
figure (framework_logs/formats/dlperf_steps.py). This module decides, per process, whether and how: it imports no
framework."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dlperf.external.identity import command_line, interpreter

STARTUP = Path(__file__).parent / "startup"
STEPS_VARIABLE = "DLPERF_STEPS"


@dataclass(frozen=True)
class Placement:
    """One process's argument list and environment with the hook in place, or why it is not."""

    argv: list[str]
    env: dict[str, str]
    reason: str | None = None  # None: instrumented


def place(argv: list[str], env: Mapping[str, str], prefix: str, cwd: str | None = None) -> Placement:
    """`argv` and `env` (what the process is started with) with the hook first on the PYTHONPATH the program gets,
    where the program is Python; `reason` says why not otherwise."""
    if interpreter(argv, cwd, env) is None:
        return Placement(argv, dict(env), "its program is not Python (nor a script with a Python #! line)")
    line = command_line(argv)
    if line.cleared:
        return Placement(argv, dict(env), "it clears its environment (env -i)")
    own = {STEPS_VARIABLE: prefix}
    if "PYTHONPATH" not in line.assigned:
        path = line.environment(env).get("PYTHONPATH")
        own["PYTHONPATH"] = os.pathsep.join([str(STARTUP), *([path] if path else [])])
        return Placement(argv, {**env, **own})
    # the command sets its own PYTHONPATH (`env PYTHONPATH=... python`): the hook goes first in that word
    words = list(argv)
    if words[:1] == ["/bin/sh"]:
        return Placement(argv, dict(env), "its shell line sets PYTHONPATH itself")
    at = next(i for i, w in enumerate(words) if w.startswith("PYTHONPATH="))
    words[at] = f"PYTHONPATH={os.pathsep.join([str(STARTUP), line.assigned['PYTHONPATH']])}"
    return Placement(words, {**env, **own})
