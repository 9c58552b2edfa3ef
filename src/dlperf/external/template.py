"""Another framework's own training script as a dlperf run: its command template, argument list and environment.

A template such as `python train.py --batch-size {batch_size} --nodes {nnodes}` is checked before any process
starts (an unknown placeholder is a one-line ConfigError), split with shlex into an argument list (no shell unless
asked), and expanded per process (`per="rank"`: one process per device, each with RANK and LOCAL_RANK) or per node
(`per="node"`: one process per node for scripts that start their own workers, e.g. torchrun or mpirun).
"""

from __future__ import annotations

import json
import re
import shlex
import string
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dlperf.errors import ConfigError, clip

PER_CHOICES = ("rank", "node")
# What each framework's own launcher gives its processes (`--launch-env`); torchrun's variables are always set.
LAUNCH_ENVS = ("torch", "tf", "paddle", "jax", "mpi")
NODE_PLACEHOLDERS = ("nnodes", "nproc_per_node", "node_rank", "master_addr", "master_port", "world_size", "batch_size",
                     "precision", "repeat", "amp", "python", "framework_launcher")  # fmt: skip
RANK_PLACEHOLDERS = ("rank", "local_rank")
PLACEHOLDERS = NODE_PLACEHOLDERS + RANK_PLACEHOLDERS


@dataclass(frozen=True)
class Rendezvous:
    """Where and how large the job is, plus the case's settings the template may name."""

    nnodes: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    batch_size: int
    precision: str
    repeat: int
    extra: dict[str, Any] = field(default_factory=dict)  # the case's other keys: {model}, {iters}, {image_size}...
    launch_env: str = "torch"
    node_addrs: tuple[str, ...] = ()  # every node's address, in node-rank order; () on one node: master_addr
    python: str = field(default_factory=lambda: sys.executable)  # {python}: dlperf's own interpreter, where it runs

    def addr(self, node_rank: int) -> str:
        return self.node_addrs[node_rank] if len(self.node_addrs) == self.nnodes else self.master_addr

    def framework_launcher(self, node_rank: int) -> list[str]:
        """{framework_launcher}: the launch-env framework's own per-node launcher (torchrun, Paddle's
        `paddle.distributed.launch`) with this node's place, for `--command-per node`; else {python}."""
        if self.launch_env == "paddle":
            return [self.python, "-m", "paddle.distributed.launch", "--nnodes", str(self.nnodes),
                    "--nproc_per_node", str(self.nproc_per_node), "--rank", str(node_rank),
                    "--master", f"{self.master_addr}:{self.master_port}"]  # fmt: skip
        if self.launch_env == "torch":
            return [self.python, "-m", "torch.distributed.run", "--nnodes", str(self.nnodes),
                    "--nproc-per-node", str(self.nproc_per_node), "--node-rank", str(node_rank),
                    "--master-addr", self.master_addr, "--master-port", str(self.master_port)]  # fmt: skip
        return [self.python]

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    @property
    def amp(self) -> int:
        """1 for the mixed-precision cases (amp-fp16, amp-bf16), 0 otherwise: most scripts take a switch."""
        return int(self.precision.startswith("amp"))


@dataclass(frozen=True)
class Process:
    """One process to start on one node: its argument list (or shell line) and the environment to add."""

    node_rank: int
    rank: int | None
    local_rank: int | None
    argv: list[str]
    env: dict[str, str]


MAX_FORMAT_WIDTH = 1000  # `{batch_size:>20000000000}` would build a 20 GB argument in the node agent


def placeholders_in(template: str) -> list[str]:
    """The placeholder names a template uses, in order; malformed braces, a nested placeholder in a format spec,
    or a width or precision over MAX_FORMAT_WIDTH are a ConfigError."""
    try:
        fields = [(name, spec) for _text, name, spec, _conv in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ConfigError(
            f"--command {clip(repr(template), 200)} has unbalanced braces ({error}): write a literal brace as "
            "{{ or }}"
        ) from None
    for name, spec in fields:
        _check_spec(name, spec or "")
    return [name for name, _ in fields]


def _check_spec(name: str, spec: str) -> None:
    """A placeholder's format spec: no nested placeholder, no width or precision over MAX_FORMAT_WIDTH."""
    if "{" in spec:
        raise ConfigError(f"--command placeholder {{{name}:{spec}}} nests a placeholder in its format: remove it")
    if any(int(number) > MAX_FORMAT_WIDTH for number in re.findall(r"\d+", spec)):
        raise ConfigError(
            f"--command placeholder {{{clip(name, 40)}:{clip(spec, 40)}}} asks for a width or precision over "
            f"{MAX_FORMAT_WIDTH}: use a smaller one"
        )


def check_template(template: str, per: str = "rank", extra: Iterable[str] = ()) -> None:
    """Refuse, before launch, an empty command, an unknown `per`, unknown placeholders, or per-rank ones per node.

    `extra` names the case's own keys a template may use besides the rendezvous ones (e.g. `model`, `iters`)."""
    if per not in PER_CHOICES:
        raise ConfigError(f"unknown --command-per {per!r}: choose one of {', '.join(PER_CHOICES)}")
    if not template.strip():
        raise ConfigError("--command is empty: give the training command to run, e.g. 'python train.py'")
    _split(template)
    known = (PLACEHOLDERS if per == "rank" else NODE_PLACEHOLDERS) + tuple(k for k in extra if k not in PLACEHOLDERS)
    for name in placeholders_in(template):
        if name not in known:
            hint = " (one process per node has no rank: use --command-per rank)" if name in RANK_PLACEHOLDERS else ""
            raise ConfigError(
                f"unknown placeholder {{{name}}} in --command{hint}; known: " + ", ".join(f"{{{k}}}" for k in known)
            )


def case_values(case: dict[str, Any], batch_size: int, global_batch_size: int, repeat: int) -> dict[str, Any]:
    """The values a template may name besides the rendezvous: the case's keys that have one (a RunSpec's flat
    form), its batch per device and global batch, and the repeat number; the command's own keys are left out."""
    own = ("command", "log_format", "command_per", "shell", "launch_env", "stop_after_lines", "stop_after_seconds",
           "log_warmup", "instrument")  # fmt: skip
    values = {k: v for k, v in case.items() if v is not None and k not in own}
    return {**values, "global_batch_size": global_batch_size, "batch_size": batch_size, "repeat": repeat}


def rendezvous_for(
    nnodes: int,
    nproc_per_node: int,
    master_addr: str,
    master_port: int,
    values: dict[str, Any],
    launch_env: str = "torch",
    node_addrs: tuple[str, ...] = (),
) -> Rendezvous:
    """The rendezvous of one run from its place (nodes, devices, endpoint, node addresses) and its case values
    (`case_values`)."""
    extra = {k: v for k, v in values.items() if k not in PLACEHOLDERS}
    return Rendezvous(
        nnodes, nproc_per_node, master_addr, master_port, values["batch_size"], values["precision"], values["repeat"],
        extra, launch_env, tuple(node_addrs),
    )  # fmt: skip


def _values(rdzv: Rendezvous, node_rank: int, rank: int | None, local_rank: int | None) -> dict[str, object]:
    values: dict[str, object] = dict(rdzv.extra)
    values.update(
        {name: getattr(rdzv, name) for name in NODE_PLACEHOLDERS if name not in ("node_rank", "framework_launcher")}
    )
    values["node_rank"] = node_rank
    values["framework_launcher"] = shlex.join(rdzv.framework_launcher(node_rank))
    if rank is not None:
        values.update(rank=rank, local_rank=local_rank)
    return values


def template_argv(
    template: str,
    rdzv: Rendezvous,
    node_rank: int,
    rank: int | None = None,
    local_rank: int | None = None,
    shell: bool = False,
) -> list[str]:
    """The `--command` template filled in as one process's argument list: split first, then expand each word, so a
    value never splits a word (a word that is exactly `{framework_launcher}` becomes the launcher's own words); with
    `shell`, the line for `/bin/sh -c`, each value quoted (the launcher's words each quoted)."""
    check_template(template, "rank" if rank is not None else "node", rdzv.extra)
    values = _values(rdzv, node_rank, rank, local_rank)
    try:
        if shell:
            quoted = {k: shlex.quote(str(v)) for k, v in values.items()}
            quoted["framework_launcher"] = str(values["framework_launcher"])  # already shlex.join-ed
            return ["/bin/sh", "-c", template.format(**quoted)]
        argv: list[str] = []
        for word in _split(template):
            launcher = word == "{framework_launcher}"
            argv.extend(rdzv.framework_launcher(node_rank) if launcher else [word.format(**values)])
        return argv
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
        raise ConfigError(f"--command {clip(repr(template), 200)} cannot be filled in: {error}") from None


def _split(template: str) -> list[str]:
    """The template's words as the shell would split them; an unclosed quote is found here, before launch."""
    try:
        return shlex.split(template)
    except ValueError as error:
        raise ConfigError(
            f"--command {clip(repr(template), 200)} does not split into arguments ({error}): close its quotes"
        ) from None


def rendezvous_env(rdzv: Rendezvous, node_rank: int, local_rank: int | None = None) -> dict[str, str]:
    """The variables torch.distributed's `env://` (and most launchers) read; WORLD_SIZE, RANK and LOCAL_RANK per
    rank only: a process that starts its node's workers is no rank, and a library that reads WORLD_SIZE > 1 as
    "launched for distributed" (accelerate on a CPU) would wait in it for ranks that never come."""
    env = {
        "MASTER_ADDR": rdzv.master_addr,
        "MASTER_PORT": str(rdzv.master_port),
        "NODE_RANK": str(node_rank),
        "LOCAL_WORLD_SIZE": str(rdzv.nproc_per_node),
    }
    if local_rank is not None:
        env["WORLD_SIZE"] = str(rdzv.world_size)
        env["RANK"] = str(node_rank * rdzv.nproc_per_node + local_rank)
        env["LOCAL_RANK"] = str(local_rank)
    return env


def framework_env(rdzv: Rendezvous, node_rank: int, local_rank: int | None = None) -> dict[str, str]:
    """The variables the `--launch-env` framework's own launcher would give this process, besides torchrun's.

    A process is a rank (`per="rank"`) or a node (`local_rank` None); its peers listen on the master port plus
    their local rank, at their node's address. Sources: TensorFlow's TFConfigClusterResolver (TF_CONFIG: the
    worker list and this task's index, what MultiWorkerMirroredStrategy reads); Paddle's ParallelEnv
    (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, PADDLE_CURRENT_ENDPOINT,
    FLAGS_selected_gpus); jax.distributed.initialize reads JAX_COORDINATOR_ADDRESS and JAX_LOCAL_DEVICE_IDS
    itself, the count and id (JAX_NUM_PROCESSES, JAX_PROCESS_ID) the script passes; Open MPI's OMPI_COMM_WORLD_*
    and PMI's PMI_RANK/PMI_SIZE, what Horovod-style scripts read."""
    kind = rdzv.launch_env
    if kind not in LAUNCH_ENVS:
        raise ConfigError(f"unknown --launch-env {kind!r}: choose one of {', '.join(LAUNCH_ENVS)}")
    return _FRAMEWORK_ENVS[kind](_Place(rdzv, node_rank, local_rank))


@dataclass(frozen=True)
class _Place:
    """One process's place among the launch's processes, as a framework's own launcher numbers them."""

    rdzv: Rendezvous
    node_rank: int
    local_rank: int | None  # None: the process is its node's one

    @property
    def per_node(self) -> int:
        return 1 if self.local_rank is None else self.rdzv.nproc_per_node

    @property
    def count(self) -> int:
        return self.rdzv.nnodes * self.per_node

    @property
    def index(self) -> int:
        return self.node_rank * self.per_node + (self.local_rank or 0)

    @property
    def local(self) -> str:
        return str(self.local_rank or 0)

    @property
    def endpoints(self) -> list[str]:
        """Every process's address: its node's, on the master port plus its local rank."""
        rdzv = self.rdzv
        return [f"{rdzv.addr(n)}:{rdzv.master_port + lr}" for n in range(rdzv.nnodes) for lr in range(self.per_node)]


def _tf_env(place: _Place) -> dict[str, str]:
    config = {"cluster": {"worker": place.endpoints}, "task": {"type": "worker", "index": place.index}}
    return {"TF_CONFIG": json.dumps(config)}


def _paddle_env(place: _Place) -> dict[str, str]:
    endpoints = place.endpoints
    return {
        "PADDLE_TRAINER_ID": str(place.index),
        "PADDLE_TRAINERS_NUM": str(place.count),
        "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints),
        "PADDLE_CURRENT_ENDPOINT": endpoints[place.index],
        "PADDLE_LOCAL_RANK": place.local,
        "FLAGS_selected_gpus": place.local,
    }


def _jax_env(place: _Place) -> dict[str, str]:
    env = {
        "JAX_COORDINATOR_ADDRESS": f"{place.rdzv.master_addr}:{place.rdzv.master_port}",
        "JAX_NUM_PROCESSES": str(place.count),
        "JAX_PROCESS_ID": str(place.index),
    }
    return env if place.local_rank is None else {**env, "JAX_LOCAL_DEVICE_IDS": place.local}


def _mpi_env(place: _Place) -> dict[str, str]:
    return {
        "OMPI_COMM_WORLD_RANK": str(place.index),
        "OMPI_COMM_WORLD_SIZE": str(place.count),
        "OMPI_COMM_WORLD_LOCAL_RANK": place.local,
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(place.per_node),
        "OMPI_COMM_WORLD_NODE_RANK": str(place.node_rank),
        "PMI_RANK": str(place.index),
        "PMI_SIZE": str(place.count),
    }


# --launch-env -> the variables its launcher gives a process (torch: torchrun's, given to every process anyway)
_FRAMEWORK_ENVS: dict[str, Callable[[_Place], dict[str, str]]] = {
    "torch": lambda place: {},
    "tf": _tf_env,
    "paddle": _paddle_env,
    "jax": _jax_env,
    "mpi": _mpi_env,
}


def process_env(rdzv: Rendezvous, node_rank: int, local_rank: int | None = None) -> dict[str, str]:
    """torchrun's variables plus the launch-env framework's."""
    return {**rendezvous_env(rdzv, node_rank, local_rank), **framework_env(rdzv, node_rank, local_rank)}


def node_processes(
    template: str, rdzv: Rendezvous, node_rank: int, per: str = "rank", shell: bool = False
) -> list[Process]:
    """Every process one node starts: nproc_per_node ranks (`per="rank"`) or the one command (`per="node"`)."""
    check_template(template, per, rdzv.extra)
    if not 0 <= node_rank < rdzv.nnodes:
        raise ConfigError(f"node rank {node_rank} is outside 0..{rdzv.nnodes - 1}")
    if per == "node":
        argv = template_argv(template, rdzv, node_rank, shell=shell)
        return [Process(node_rank, None, None, argv, process_env(rdzv, node_rank))]
    processes = []
    for local_rank in range(rdzv.nproc_per_node):
        rank = node_rank * rdzv.nproc_per_node + local_rank
        argv = template_argv(template, rdzv, node_rank, rank, local_rank, shell=shell)
        processes.append(Process(node_rank, rank, local_rank, argv, process_env(rdzv, node_rank, local_rank)))
    return processes
