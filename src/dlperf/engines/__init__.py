"""Engine registry: engine name -> its parent's side (a host.py module, `dlperf.engines.base.EngineHost`) and its
rank's side (the class implementing `dlperf.engines.base.Engine`), each imported on use only.

Adding an engine: a folder under engines/ with host.py and an Engine subclass, and one line in ENGINES; each
workload names its step builder for the engine in its `builders`.
"""

from __future__ import annotations

import pkgutil
from typing import Any, cast

from dlperf.engines.base import Engine, EngineHost
from dlperf.errors import ConfigError

ENGINES: dict[str, tuple[str, str]] = {
    "torch": ("dlperf.engines.torch.host", "dlperf.engines.torch.engine:TorchEngine"),
    "jax": ("dlperf.engines.jax.host", "dlperf.engines.jax.engine:JaxEngine"),
}


def engine_names() -> list[str]:
    return list(ENGINES)


def _entry(name: str) -> tuple[str, str]:
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")
    return ENGINES[name]


def engine_host(name: str) -> EngineHost:
    """The parent's side of engine `name`: importing it loads no framework."""
    return cast(EngineHost, pkgutil.resolve_name(_entry(name)[0]))


def engine_versions(names: list[str]) -> dict[str, Any]:
    """The named engines' versions and device facts, for a record's environment."""
    facts: dict[str, Any] = {}
    for name in names:
        facts.update(engine_host(name).versions())
    return facts


def get_engine(name: str) -> Engine:
    """A fresh engine object for a rank; the framework is imported here, not before."""
    return pkgutil.resolve_name(_entry(name)[1])()
