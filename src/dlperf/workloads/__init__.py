"""Workload registry: model name -> Workload."""

from __future__ import annotations

from dlperf.errors import ConfigError
from dlperf.workloads.base import DistContext, TrainStep, Workload


def _registry() -> dict[str, Workload]:
    from dlperf.workloads.gpt.workload import GPTWorkload
    from dlperf.workloads.resnet import ResNet50Workload

    workloads: list[Workload] = [ResNet50Workload(), GPTWorkload()]
    return {w.name: w for w in workloads}


def get_workload(name: str) -> Workload:
    registry = _registry()
    if name not in registry:
        raise ConfigError(f"unknown model {name!r}: choose one of {', '.join(sorted(registry))}")
    return registry[name]


def model_names() -> list[str]:
    return sorted(_registry())


__all__ = ["DistContext", "TrainStep", "Workload", "get_workload", "model_names"]
