"""A GPT run's dp x tp x pp layout, torch-free: planned once before any process starts, then read by every rank.

Ranks are laid out row-major over (dp, pp, tp), as `init_device_mesh` numbers them: TP groups are
neighbouring ranks (one node's fast links first), pipeline stages next, data-parallel replicas outermost.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec, flag
from dlperf.workloads.gpt.config import GPTConfig


@dataclass(frozen=True)
class Layout:
    dp: int
    tp: int
    pp: int
    micro_batch_size: int
    global_batch_size: int
    pp_schedule: str
    dp_mode: str

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per iteration on each replica: pipeline micro-batches under PP, accumulation otherwise."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    def coordinates(self, rank: int) -> tuple[int, int, int]:
        """(dp, pp, tp) index of a global rank in the mesh."""
        return rank // (self.pp * self.tp), rank // self.tp % self.pp, rank % self.tp

    def as_record(self) -> dict[str, int | str]:
        return {
            "dp": self.dp,
            "tp": self.tp,
            "pp": self.pp,
            "micro_batch_size": self.micro_batch_size,
            "global_batch_size": self.global_batch_size,
            "accumulation_steps": self.accumulation_steps,
            "pp_schedule": self.pp_schedule if self.pp > 1 else None,
            "dp_mode": self.dp_mode if self.dp > 1 else None,
        }


def layout_of(spec: RunSpec) -> Layout:
    """The layout a spec asks for; refuses, in one line, any number that does not divide."""
    config: GPTConfig = spec.workload
    dp = _dp(spec, config)
    global_batch = config.global_batch_size if config.global_batch_size is not None else config.micro_batch_size * dp
    if global_batch % (config.micro_batch_size * dp):
        raise ConfigError(
            f"{flag('global_batch_size')} {global_batch} is not divisible by micro batch x dp = "
            f"{config.micro_batch_size} x {dp} = {config.micro_batch_size * dp}"
        )
    _check_shape(config)
    return Layout(dp, config.tp, config.pp, config.micro_batch_size, global_batch, config.pp_schedule, config.dp_mode)


def _dp(spec: RunSpec, config: GPTConfig) -> int:
    """The data-parallel size: --dp, or what the world leaves over tp x pp; refused where they do not match."""
    world = spec.world_size
    if config.dp is None:
        if world % (config.tp * config.pp):
            raise ConfigError(
                f"world size {world} ({spec.topology}) is not divisible by tp x pp = {config.tp} x {config.pp}: "
                f"change {flag('devices_per_node')}, {flag('tp')} or {flag('pp')}"
            )
        return world // (config.tp * config.pp)
    if config.dp * config.tp * config.pp != world:
        raise ConfigError(
            f"world size {world} ({spec.topology}) does not equal dp x tp x pp = {config.dp} x {config.tp} x "
            f"{config.pp} = {config.dp * config.tp * config.pp}: change the topology or the layout"
        )
    return config.dp


def _check_shape(config: GPTConfig) -> None:
    """The model's dimensions against the split asked for."""
    if config.hidden_size % config.num_heads:
        raise ConfigError(
            f"{flag('hidden_size')} {config.hidden_size} is not divisible by {flag('num_heads')} {config.num_heads}"
        )
    if config.num_heads % config.tp:
        raise ConfigError(f"{flag('num_heads')} {config.num_heads} is not divisible by {flag('tp')} {config.tp}")
    if config.num_layers < config.pp:
        raise ConfigError(
            f"{flag('num_layers')} {config.num_layers} is fewer than the {flag('pp')} {config.pp} pipeline stages"
        )


def padded_vocab(vocab_size: int, tp: int) -> int:
    """Round up to a multiple of 128 x tp, as Megatron does, so each TP rank gets an aligned vocab shard."""
    multiple = 128 * tp
    return -(-vocab_size // multiple) * multiple
