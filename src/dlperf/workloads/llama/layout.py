"""A Llama run's layout on one device mesh, torch-free: planned once before any process starts, read by every rank.

Mesh dimensions, outermost first, as torchtitan orders them: pp, dp_replicate, dp_shard, cp, tp. Ranks are
row-major over them (`init_device_mesh`'s numbering): tensor-parallel groups are neighbouring ranks (one node's fast
links), pipeline stages outermost. Data parallelism is dp_replicate x dp_shard (HSDP when both are above 1); FSDP2
shards over dp_shard x cp, so context-parallel ranks hold parameter shards too and gradients average over them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlperf.errors import ConfigError
from dlperf.spec import RunSpec, flag
from dlperf.workloads.llama.config import MULTI_STAGE_SCHEDULES, LlamaConfig

DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")


@dataclass(frozen=True)
class LlamaLayout:
    pp: int
    dp_replicate: int
    dp_shard: int
    cp: int
    tp: int
    micro_batch_size: int
    global_batch_size: int
    pp_schedule: str
    stages_per_rank: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(getattr(self, dim) for dim in DIMS)

    @property
    def dp(self) -> int:
        return self.dp_replicate * self.dp_shard

    @property
    def world_size(self) -> int:
        return self.pp * self.dp * self.cp * self.tp

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per iteration on each replica: pipeline micro-batches under PP, accumulation otherwise."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def stages(self) -> int:
        return self.pp * self.stages_per_rank

    def coordinates(self, rank: int) -> dict[str, int]:
        """This rank's index along every mesh dimension."""
        found = {}
        for dim in reversed(DIMS):
            size = getattr(self, dim)
            found[dim] = rank % size
            rank //= size
        return found

    def dp_rank(self, rank: int) -> int:
        """The data-parallel replica whose rows of the global batch this rank reads."""
        at = self.coordinates(rank)
        return at["dp_replicate"] * self.dp_shard + at["dp_shard"]

    def name(self) -> str:
        """The parallel dimensions above 1 as the peers name them (`fsdp8`, `hsdp2x4_tp2`, `pp2_fsdp4`), or
        `single`."""
        parts = [f"pp{self.pp}"] if self.pp > 1 else []
        if self.dp_replicate > 1:
            parts.append(f"hsdp{self.dp_replicate}x{self.dp_shard}" if self.dp_shard > 1 else f"ddp{self.dp_replicate}")
        elif self.dp_shard > 1:
            parts.append(f"fsdp{self.dp_shard}")
        parts += [f"{dim}{getattr(self, dim)}" for dim in ("cp", "tp") if getattr(self, dim) > 1]
        return "_".join(parts) or "single"

    def as_record(self) -> dict[str, int | str | None]:
        return {
            **{dim: getattr(self, dim) for dim in DIMS},
            "dp": self.dp,
            "micro_batch_size": self.micro_batch_size,
            "global_batch_size": self.global_batch_size,
            "accumulation_steps": self.accumulation_steps,
            "pp_schedule": self.pp_schedule if self.pp > 1 else None,
            "stages_per_rank": self.stages_per_rank if self.pp > 1 else None,
        }


def _dp_shard(spec: RunSpec, config: LlamaConfig) -> int:
    """--dp-shard as given, else what the other dimensions leave of the world size."""
    others = config.dp_replicate * config.cp * config.tp * config.pp
    if config.dp_shard is not None:
        return config.dp_shard
    if spec.world_size % others:
        raise ConfigError(
            f"world size {spec.world_size} ({spec.topology}) is not divisible by dp_replicate x cp x tp x pp = "
            f"{others}: change {flag('devices_per_node')} or the layout"
        )
    return spec.world_size // others


def _stages_per_rank(config: LlamaConfig) -> int:
    multi = config.pp_schedule in MULTI_STAGE_SCHEDULES
    stages = config.stages_per_rank if config.stages_per_rank is not None else (2 if multi else 1)
    if (stages >= 2) != multi:
        raise ConfigError(_stages_refusal(config.pp_schedule, multi, stages))
    if config.pp_schedule == "zbv" and stages != 2:
        raise ConfigError(
            f"{flag('pp_schedule')} zbv runs exactly 2 stages per rank (a V): drop {flag('stages_per_rank')}"
        )
    return stages


def _stages_refusal(schedule: str, multi: bool, stages: int) -> str:
    runs, fix = ("2 or more stages", f"use {flag('stages_per_rank')} 2 or more") if multi else ("one stage", "drop it")
    return f"{flag('pp_schedule')} {schedule} runs {runs} per rank, not {flag('stages_per_rank')} {stages}: {fix}"


def layout_of(spec: RunSpec) -> LlamaLayout:
    """The layout a spec asks for; refuses, in one line, any number that does not divide."""
    config: LlamaConfig = spec.workload
    layout = mesh_layout(spec)
    _check_heads(config)
    check_shape(config, layout)
    return layout


def mesh_layout(spec: RunSpec) -> LlamaLayout:
    """The mesh and batches a spec asks for, refused where they do not divide (the model's own shape aside: the
    MoE workload checks its heads its own way)."""
    config: LlamaConfig = spec.workload
    dp_shard = _dp_shard(spec, config)
    dp = config.dp_replicate * dp_shard
    global_batch = config.global_batch_size if config.global_batch_size is not None else config.micro_batch_size * dp
    layout = LlamaLayout(config.pp, config.dp_replicate, dp_shard, config.cp, config.tp, config.micro_batch_size,
                         global_batch, config.pp_schedule, _stages_per_rank(config))  # fmt: skip
    if layout.world_size != spec.world_size:
        raise ConfigError(
            f"world size {spec.world_size} ({spec.topology}) does not equal pp x dp_replicate x dp_shard x cp x tp "
            f"= {' x '.join(map(str, layout.shape))} = {layout.world_size}: change the topology or the layout"
        )
    if global_batch % (config.micro_batch_size * dp):
        raise ConfigError(
            f"{flag('global_batch_size')} {global_batch} is not divisible by micro batch x data-parallel size = "
            f"{config.micro_batch_size} x {dp} = {config.micro_batch_size * dp}"
        )
    return layout


def _check_heads(config: LlamaConfig) -> None:
    """An even head size, and whole query-head groups per key/value head."""
    if config.hidden_size % config.num_heads or (config.hidden_size // config.num_heads) % 2:
        raise ConfigError(
            f"{flag('hidden_size')} {config.hidden_size} / {flag('num_heads')} {config.num_heads} must be an even "
            "head size (rotary embeddings turn pairs)"
        )
    if config.num_heads % config.num_kv_heads:
        raise ConfigError(
            f"{flag('num_heads')} {config.num_heads} is not divisible by {flag('num_kv_heads')} {config.num_kv_heads}"
        )


def check_shape(config: LlamaConfig, layout: LlamaLayout) -> None:
    """The model's dimensions against the split asked for."""
    for name in ("num_kv_heads", "ffn_hidden_size", "vocab_size"):
        if getattr(config, name) % layout.tp:
            raise ConfigError(f"{flag(name)} {getattr(config, name)} is not divisible by {flag('tp')} {layout.tp}")
    chunks = layout.tp * (2 * layout.cp if layout.cp > 1 else 1)
    if config.seq_length % chunks:
        raise ConfigError(
            f"{flag('seq_length')} {config.seq_length} is not divisible by {chunks} (sequence parallelism splits it "
            "over tp, context parallelism in 2 x cp balanced chunks)"
        )
    if config.num_layers < layout.stages:
        raise ConfigError(
            f"{flag('num_layers')} {config.num_layers} is fewer than the {layout.stages} pipeline stages "
            f"({flag('pp')} {layout.pp} x {layout.stages_per_rank} per rank)"
        )
    if layout.pp > 1 and layout.accumulation_steps < layout.pp and layout.stages_per_rank > 1:
        raise ConfigError(
            f"{flag('pp_schedule')} {layout.pp_schedule} needs at least {flag('pp')} {layout.pp} micro-batches per "
            f"iteration, got {layout.accumulation_steps}: raise {flag('global_batch_size')}"
        )
