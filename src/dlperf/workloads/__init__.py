"""Workload registry (model name -> definition), and the one way a RunSpec is built from flat keys.

Adding a workload: a module or folder with a `Workload` subclass, and one line in WORKLOADS.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from dlperf.errors import ConfigError
from dlperf.spec import COMMON_KEYS, EXTERNAL, RunSpec, coerce
from dlperf.workloads.base import Workload, WorkloadPlan
from dlperf.workloads.commbench import CommbenchWorkload
from dlperf.workloads.gpt import GPTWorkload
from dlperf.workloads.resnet import ResNet50Workload

WORKLOADS: dict[str, Workload] = {w.name: w for w in (ResNet50Workload(), GPTWorkload(), CommbenchWorkload())}
RUN_FIELDS = {f.name: f for f in fields(RunSpec)}


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise ConfigError(f"unknown model {name!r}: choose one of {', '.join(sorted(WORKLOADS))}")
    return WORKLOADS[name]


def model_names() -> list[str]:
    return sorted(WORKLOADS)


def workload_keys(name: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(get_workload(name).config_type))


def spec_from_mapping(values: dict[str, Any], base: dict[str, Any] | None = None) -> RunSpec:
    """A RunSpec from YAML-style keys (dashes or underscores) over `base`; a key that is unknown, or that
    belongs to another model, is refused in one line."""
    given: dict[str, Any] = {}
    for raw_key, value in values.items():
        given[str(raw_key).replace("-", "_")] = value
    merged = {**(base or {}), **given}
    if merged.get("command") is not None:
        merged.setdefault("engine", EXTERNAL)  # a command is another framework's script: no need to say so twice
    model = merged.get("model", "resnet50")
    if not isinstance(model, str):
        raise ConfigError(f"key 'model' must be a model name, got {model!r}")
    workload = get_workload(model)
    merged = workload.expand(merged, set(given))
    own = {f.name: f for f in fields(workload.config_type)}
    common: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    for key, value in merged.items():
        if key in RUN_FIELDS and key != "workload":
            common[key] = coerce(key, RUN_FIELDS[key].type, value)
        elif key in own:
            specific[key] = coerce(key, own[key].type, value)
        else:
            other = [name for name, w in WORKLOADS.items() if key in {f.name for f in fields(w.config_type)}]
            if other:
                raise ConfigError(
                    f"key {key!r} applies to --model {' or '.join(other)}, not {model}: remove it "
                    f"(the keys of {model} are {', '.join(COMMON_KEYS + tuple(own))})"
                )
            raise ConfigError(f"unknown key {key!r}: valid keys for {model} are {', '.join(COMMON_KEYS + tuple(own))}")
    common["model"] = model
    return RunSpec(workload=workload.config_type(**specific), **common)


def decode_spec(data: dict[str, Any]) -> RunSpec:
    """The inverse of RunSpec.to_dict, for a spec that crossed a process boundary."""
    return spec_from_mapping(data)


def require_training(spec: RunSpec) -> None:
    """`dlperf run` and `sweep` time training steps; a workload with its own rank task has its own command."""
    if get_workload(spec.model).tasks:
        raise ConfigError(f"--model {spec.model} is not a training workload: measure it with `dlperf {spec.model}`")


def check_spec(spec: RunSpec) -> WorkloadPlan:
    """Every check of the values themselves, then the plan; raises ConfigError/DataError with the fix."""
    spec.validate()
    workload = get_workload(spec.model)
    workload.validate(spec)
    return workload.plan(spec)


__all__ = [
    "Workload",
    "WorkloadPlan",
    "check_spec",
    "decode_spec",
    "get_workload",
    "model_names",
    "require_training",
    "spec_from_mapping",
    "workload_keys",
]
