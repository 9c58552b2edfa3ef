"""The run configuration: one dataclass shared by the CLI, YAML sweeps, the launcher and the records."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, fields
from typing import Any

from dlperf.errors import ConfigError

PRECISIONS = ("fp32", "amp-fp16", "amp-bf16")
DEVICES = ("auto", "cuda", "cpu")
TOPOLOGY_RE = re.compile(r"^(\d+)n(\d+)[gd]$")


@dataclass
class RunConfig:
    """Everything that defines one benchmark run; field names are the record's `config` keys."""

    model: str = "resnet50"
    nodes: int = 1
    devices_per_node: int = 1
    batch_size: int = 128
    precision: str = "fp32"
    compile: bool = False
    channels_last: bool = False
    data: str = "synthetic"
    workers: int = 4
    image_size: int = 224
    num_classes: int = 1000
    lr: float | None = None  # None: 0.1 x global batch / 256, the linear scaling rule of the reference scripts
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_iters: int = 20
    iters: int = 100
    print_every: int = 20
    device: str = "auto"
    seed: int = 1234
    timeout: float = 3600.0
    # GPT (workloads/gpt): a report case name fills the rest; the other models ignore these.
    case: str | None = None
    num_layers: int = 16
    hidden_size: int = 1536
    num_heads: int = 16
    seq_length: int = 2048
    vocab_size: int = 50257  # GPT-2's; padded to a multiple of 128 x tp inside the model
    dp: int | None = None  # None: world size / (tp x pp)
    tp: int = 1
    pp: int = 1
    micro_batch_size: int = 2
    global_batch_size: int | None = None  # None: micro batch x dp, no accumulation
    pp_schedule: str = "1f1b"
    dp_mode: str = "ddp"
    peak_tflops: float | None = None  # per device, for MFU; None: the documented table in metrics/flops.py

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def topology(self) -> str:
        """The published case name, e.g. `1n8g`."""
        return f"{self.nodes}n{self.devices_per_node}g"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def validate(self) -> None:
        """Check the values every workload shares; the workload checks its own afterwards."""
        for name in (
            "nodes",
            "devices_per_node",
            "batch_size",
            "iters",
            "print_every",
            "image_size",
            "num_classes",
        ):
            _require_positive_int(name, getattr(self, name))
        if not isinstance(self.warmup_iters, int) or isinstance(self.warmup_iters, bool) or self.warmup_iters < 1:
            raise ConfigError(
                f"--warmup-iters must be at least 1 (the first step holds start-up and compiling), "
                f"got {self.warmup_iters!r}"
            )
        for name in ("workers", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"--{_flag(name)} must be a non-negative integer, got {value!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")
        if self.device not in DEVICES:
            raise ConfigError(f"unknown device {self.device!r}: choose one of {', '.join(DEVICES)}")
        if self.iters < self.print_every:
            raise ConfigError(
                f"--iters {self.iters} is shorter than one timing window (--print-every {self.print_every}): "
                f"raise --iters or lower --print-every"
            )
        if self.lr is not None and not self.lr > 0:
            raise ConfigError(f"--lr must be positive, got {self.lr!r}")
        if not self.timeout > 0:
            raise ConfigError(f"--timeout must be positive seconds, got {self.timeout!r}")


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _require_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"--{_flag(name)} must be a positive integer, got {value!r}")


def parse_topology(text: str) -> tuple[int, int]:
    """`2n8g` (or the GPT reports' `2n8d`) -> (2, 8)."""
    match = TOPOLOGY_RE.match(str(text).strip())
    if not match:
        raise ConfigError(f"topology {text!r} is not of the form <nodes>n<devices>g, e.g. 1n8g")
    nodes, devices = int(match.group(1)), int(match.group(2))
    if nodes <= 0 or devices <= 0:
        raise ConfigError(f"topology {text!r} needs at least one node and one device")
    return nodes, devices


CONFIG_KEYS = tuple(f.name for f in fields(RunConfig))


def config_from_mapping(values: dict[str, Any], base: RunConfig | None = None) -> RunConfig:
    """Build a RunConfig from YAML-style keys (dashes or underscores); unknown keys are refused."""
    known = {f.name: f for f in fields(RunConfig)}
    changes: dict[str, Any] = {}
    for raw_key, value in values.items():
        key = str(raw_key).replace("-", "_")
        if key not in known:
            raise ConfigError(f"unknown key {raw_key!r}: valid keys are {', '.join(CONFIG_KEYS)}")
        changes[key] = _coerce(key, known[key].type, value)
    config = (base or RunConfig()).replace(**changes)
    if config.case:  # a named GPT case fills every value not given explicitly
        from dlperf.workloads.gpt.cases import resolve_case

        config = resolve_case(config, set(changes))
    return config


def _coerce(key: str, type_name: Any, value: Any) -> Any:
    """YAML already types most values; only accept the obvious widening int -> float."""
    if type_name in ("float", "float | None") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if type_name == "bool" and not isinstance(value, bool):
        raise ConfigError(f"key {key!r} must be true or false, got {value!r}")
    return value
