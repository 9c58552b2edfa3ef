"""Workload registry (model name -> definition), and the one way a RunSpec is built from flat keys.

Adding a workload: a folder under workloads/ with a `Workload` subclass (its config dataclass, checks, plan, a
step builder per engine in `builders`, and its declarations: the batch maxbatch varies, report title and formula,
aliases, plausible speed, CPU estimate, predictor), and one line in WORKLOADS. Its flags come from its config's
fields; every other part of dlperf reads the rest through the functions below (docs/architecture.md, "Add a
workload").
"""

from __future__ import annotations

import difflib
import pkgutil
import sys
from dataclasses import fields
from functools import cache
from typing import Any

from dlperf.errors import ConfigError
from dlperf.spec import COMMON_KEYS, RunSpec, coerce, flag
from dlperf.workloads.base import CpuEstimate, PlausibleWork, Workload, WorkloadPlan

# model name -> "module:Workload subclass"; the definitions are torch-free, imported on first use
WORKLOADS: dict[str, str] = {
    "resnet50": "dlperf.workloads.resnet:ResNet50Workload",
    "gpt": "dlperf.workloads.gpt:GPTWorkload",
    "llama": "dlperf.workloads.llama:LlamaWorkload",
    "moe": "dlperf.workloads.moe:MoEWorkload",
    "commbench": "dlperf.workloads.commbench:CommbenchWorkload",
}
RUN_FIELDS = {f.name: f for f in fields(RunSpec)}
OLD_EXTERNAL = "external"  # `engine: external`, a deprecated alias of giving `command` alone (docs/external-scripts.md)


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise ConfigError(f"unknown model {name!r}: choose one of {', '.join(sorted(WORKLOADS))}")
    return _load(WORKLOADS[name])


@cache
def _load(target: str) -> Workload:
    return pkgutil.resolve_name(target)()


def all_workloads() -> list[Workload]:
    return [get_workload(name) for name in WORKLOADS]


def known_workload(name: str) -> Workload | None:
    """The registered workload of a record's model name, or None (a model from another framework's log)."""
    return get_workload(name) if name in WORKLOADS else None


def searched_batch(name: str) -> str:
    """The config field `dlperf maxbatch` varies for this model; ConfigError for a model with none."""
    key = get_workload(name).batch_key
    if key is None:
        searchable = [w.name for w in all_workloads() if w.batch_key]
        raise ConfigError(f"dlperf maxbatch searches the batch of {' or '.join(searchable)}, not {name}")
    return key


@cache
def model_aliases() -> dict[str, str]:
    """Other frameworks' names of the registered models (`rn50`), each to its model name."""
    return {alias: w.name for w in all_workloads() for alias in w.aliases}


def plausible_work() -> tuple[PlausibleWork, ...]:
    """The registered workloads' speed bounds for extract, in registry order (`for what, parts, flops in ...`)."""
    return tuple(w.plausible for w in all_workloads() if w.plausible is not None)


def predictors() -> dict[str, Any]:
    """The models `dlperf predict --model` predicts at scale, each to its `Predictor` (`Workload.predictor`)."""
    return {w.name: pkgutil.resolve_name(w.predictor) for w in all_workloads() if w.predictor}


def model_names() -> list[str]:
    return sorted(WORKLOADS)


def workload_keys(name: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(get_workload(name).config_type))


def spec_from_mapping(values: dict[str, Any], base: dict[str, Any] | None = None) -> RunSpec:
    """A RunSpec from YAML-style keys (dashes or underscores) over `base`; a key that is unknown, or that
    belongs to another model, is refused in one line."""
    given = {str(raw_key).replace("-", "_"): value for raw_key, value in values.items()}
    merged = {**(base or {}), **given}
    if merged.get("engine") == OLD_EXTERNAL:
        _drop_old_external(merged)
    if merged.get("command") is not None:
        merged.setdefault("engine", None)  # a command is the external kind: dlperf loads no engine for it
    model = merged.get("model", "resnet50")
    if not isinstance(model, str):
        raise ConfigError(f"key 'model' must be a model name, got {model!r}")
    workload = get_workload(model)
    merged = workload.expand(merged, set(given))
    own = workload_keys(model)
    common: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    for key, value in merged.items():
        if key in RUN_FIELDS and key != "workload":
            common[key] = coerce(RunSpec, key, value)
        elif key in own:
            specific[key] = coerce(workload.config_type, key, value)
        else:
            raise ConfigError(_unknown_key(key, model, own))
    common["model"] = model
    return RunSpec(workload=workload.config_type(**specific), **common)


def _drop_old_external(merged: dict[str, Any]) -> None:
    """`engine: external`, how a `--command` run was asked for before the run's kind said it: a deprecated alias."""
    if merged.get("command") is None:
        raise ConfigError(
            f"{flag('engine')} external is no engine: for another framework's script, give it as {flag('command')}"
        )
    _say_deprecated(flag("engine"))
    merged["engine"] = None


@cache
def _say_deprecated(engine: str) -> None:
    print(
        f"dlperf: {engine} external is deprecated: {flag('command')} alone runs another framework's script",
        file=sys.stderr,
    )


def _unknown_key(key: str, model: str, own: tuple[str, ...]) -> str:
    """Why `key` is refused for `model`: another model's key, or a near miss of one of its own."""
    keys = COMMON_KEYS + own
    other = [w.name for w in all_workloads() if key in {f.name for f in fields(w.config_type)}]
    if other:
        return (
            f"key {key!r} applies to {flag('model')} {' or '.join(other)}, not {model}: remove it "
            f"(the keys of {model} are {', '.join(keys)})"
        )
    near = difflib.get_close_matches(str(key), keys, n=1, cutoff=0.6)
    guess = f"did you mean {near[0]!r}? " if near else ""
    return f"unknown key {key!r}: {guess}(valid keys for {model}: {', '.join(keys)})"


def decode_spec(data: dict[str, Any]) -> RunSpec:
    """The inverse of RunSpec.to_dict, for a spec that crossed a process boundary."""
    return spec_from_mapping(data)


def check_spec(spec: RunSpec) -> WorkloadPlan:
    """Every check of the values themselves, then the plan; raises ConfigError/DataError with the fix. The engine
    is the run kind's to check (`check_engine`: a `--command` runs none of dlperf's)."""
    spec.validate()
    workload = get_workload(spec.model)
    workload.validate(spec)
    return workload.plan(spec)


def check_engine(spec: RunSpec) -> None:
    """The spec's engine runs its workload, with the settings that engine reads."""
    get_workload(spec.model).require_engine(spec.engine)
    check_engine_settings(spec)


def check_engine_settings(spec: RunSpec) -> None:
    """A setting only some engines read (its field's `engines`), changed from its default for another engine,
    is refused in one line: it would not change what is measured."""
    for f in fields(spec.workload):
        engines = f.metadata.get("engines")
        value = getattr(spec.workload, f.name)
        if engines and spec.engine not in engines and value != f.default:
            raise ConfigError(
                f"{flag(f.name)} {value} is read by {flag('engine')} {' or '.join(engines)} only: drop it with "
                f"{flag('engine')} {spec.engine}, or use {flag('engine')} {engines[0]}"
            )


__all__ = [
    "CpuEstimate", "PlausibleWork", "Workload", "WorkloadPlan", "all_workloads", "check_engine", "check_spec",
    "decode_spec", "get_workload", "known_workload", "model_aliases", "model_names", "plausible_work",
    "predictors", "searched_batch", "spec_from_mapping", "workload_keys"
]  # fmt: skip
