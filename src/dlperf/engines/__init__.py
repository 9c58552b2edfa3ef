"""Engine registry: engine name -> the class implementing `dlperf.engines.base.Engine`, imported on use only.

Adding an engine: a folder under engines/ with an Engine subclass, and one line in ENGINES; each workload names
its step builder for the engine in its `builders`.
"""

from __future__ import annotations

import importlib
from typing import Any

from dlperf.engines.base import Engine
from dlperf.errors import ConfigError
from dlperf.spec import EXTERNAL

ENGINES: dict[str, str] = {
    "torch": "dlperf.engines.torch.engine:TorchEngine",
    "jax": "dlperf.engines.jax.engine:JaxEngine",
}


def engine_names() -> list[str]:
    return list(ENGINES)


def engine_class(name: str) -> type[Engine]:
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")
    module, cls = ENGINES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def engine_versions(names: list[str]) -> dict[str, Any]:
    """The named engines' versions and device facts, for a record's environment."""
    facts: dict[str, Any] = {}
    for name in names:
        if name != EXTERNAL:  # another framework's own script: dlperf cannot know what it loads
            facts.update(engine_class(name).versions())
    return facts


def get_engine(name: str) -> Engine:
    """A fresh engine object; the framework is imported here, not before."""
    return engine_class(name)()
