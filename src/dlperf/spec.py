"""The run spec: what every workload shares (topology, timing, precision, device, seed, data, engine), plus the
workload's own config object. Torch-free, so the parent process, reports and records never load a framework.

A spec travels between processes as one flat dict (`to_dict`): the shared fields and the workload's fields side
by side, the same keys a YAML sweep file and the command line use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any

from dlperf.errors import ConfigError

PRECISIONS = ("fp32", "amp-fp16", "amp-bf16")
# fp32 matmuls and convolutions on NVIDIA tensor cores: TF32 (JAX's and cuDNN's default) or IEEE FP32 (slower)
FP32_MATHS = ("tf32", "ieee")
DEVICES = ("auto", "cuda", "cpu")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs (on CUDA)
MAX_NODES = 65536
MAX_DEVICES_PER_NODE = 1024  # CPU ranks on the biggest hosts; GPUs are 8 to 72
TOPOLOGY_RE = re.compile(r"^(\d+)n(\d+)[gd]$")
DEFAULT_PRINT_EVERY = 20
COMMAND_PER = ("rank", "node")
LAUNCH_ENVS = ("torch", "tf", "paddle", "jax", "mpi")  # whose launcher's variables a command's processes get
ABLATIONS = ("off", "sync")  # `--ablate`: the ablation windows a run times after its timed window
INSTRUMENT = ("auto", "off")  # dlperf's start-up hook on a Python command's PYTHONPATH (dlperf.instrument)
LABEL_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,39}$")  # a label or framework name is a file-name token
AUTO = "auto"
# `dlperf maxbatch --memory-cap`: the bytes a probe's rank may use, set by the parent, applied by the engine (a
# device-memory cap on GPUs, where an address-space cap would break CUDA's start-up; RLIMIT_AS on CPUs)
MEMORY_CAP_ENV = "DLPERF_MEMORY_CAP_BYTES"


AUTO_BOUND = "positive or auto"
NON_EMPTY = "non-empty"
# a number's declared range: the test, then the words for an integer field and for a float field (always finite)
BOUNDS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    "positive": (lambda v: v > 0, "a positive integer", "a positive finite number"),
    "non-negative": (lambda v: v >= 0, "a non-negative integer", "a non-negative finite number"),
    "share": (lambda v: 0 <= v <= 1, "0 or 1", "a share in [0, 1]"),
    "positive share": (lambda v: 0 < v <= 1, "1", "a share in (0, 1]"),
    "fraction": (lambda v: 0 <= v < 1, "0", "a fraction in [0, 1)"),
    "percent": (lambda v: 0 <= v < 100, "an integer percentage in [0, 100)", "a percentage in [0, 100)"),
    "port": (lambda v: 1 <= v <= 65535, "a port number in [1, 65535]", "a port number in [1, 65535]"),
}

COMMAND_GROUP = "another framework's own script (an external run)"
TIMING_GROUP = "timing"


def setting(
    default: Any,
    help: str,
    *,
    bound: str | None = None,
    choices: tuple[str, ...] = (),
    engines: tuple[str, ...] = (),
    group: str | None = None,
    flag: str | tuple[str, ...] | None = None,
    factory: Any = None,
    positional: str | None = None,
    metavar: str | None = None,
    required: bool = False,
    stored: bool = False,
) -> Any:
    """A field that carries its command-line flag, for run specs, workload configs and every command's options:
    `help` (the CLI adds the default), `bound` (a name in BOUNDS, "positive or auto" or "non-empty") and `choices`
    (else a `Literal[...]` annotation's), both checked by `value_problem` wherever a value enters (the flag's type,
    a sweep file's key, a JSON spec), `engines` (the only engines that read it; empty: every engine), the `--help`
    group, the flag's name(s) where they are not the field's (`--ssh-option` for `ssh_options`), `positional` (an
    argument, not a flag: argparse's nargs, "1" for exactly one), `metavar`, `required`, and `stored` (a sweep's
    folder keeps it for --resume). The value's type comes from the annotation; a tuple field's flag is repeatable.
    `factory` makes a default at construction (the flag's default then says none was given)."""
    if bound is not None and bound not in (*BOUNDS, AUTO_BOUND, NON_EMPTY):
        raise ValueError(f"unknown bound {bound!r}: declare one of {', '.join(BOUNDS)}, {AUTO_BOUND} or {NON_EMPTY}")
    metadata = {
        "help": help, "bound": bound, "choices": choices, "engines": engines, "group": group, "flag": flag,
        "positional": positional, "metavar": metavar, "required": required, "stored": stored,
    }  # fmt: skip
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class RunSpec:
    """One benchmark run as asked for; `workload` is the model's own config dataclass."""

    model: str
    workload: Any
    # its flag lists the registered engines (cli/run_flags.py); None for a `command` (the external kind): no engine
    engine: str | None = "torch"
    nodes: int = setting(1, "number of nodes (hosts)", bound="positive")
    devices_per_node: int = setting(1, "processes/devices per node, each a rank", bound="positive")
    precision: str = setting(
        "fp32", f"one of {', '.join(PRECISIONS)}; amp-fp16 uses a dynamic loss scale", choices=PRECISIONS
    )
    fp32_math: str = setting(
        "tf32",
        "fp32 matmuls and convolutions on CUDA: tf32 tensor cores (as JAX and cuDNN do) or ieee FP32; both "
        "engines set it, and MFU takes the matching peak",
        choices=FP32_MATHS,
    )
    compile: bool = setting(False, "torch.compile the model (the reports' XLA on)")
    compile_mode: str = setting(
        "default",
        "torch.compile mode with --compile (default: default); reduce-overhead and max-autotune use CUDA graphs",
        choices=COMPILE_MODES,
    )
    data: str = setting(
        "synthetic",
        "`synthetic` (one fixed batch on the device), an ImageNet-style folder of JPEGs (resnet50) or a flat "
        "token file (gpt)",
        bound=NON_EMPTY,
    )
    device: str = setting("auto", "auto (CUDA when present, else CPU), cuda or cpu", choices=DEVICES)
    cpu_threads: int | str = setting(
        AUTO,
        "intra-op threads of each rank on a CPU device, or auto: this machine's cores divided by the most devices "
        "per node of the sweep (of the run, alone), so a CPU device is the same share of the machine in every "
        "topology, as a GPU is",
        bound="positive or auto",
    )
    seed: int = setting(1234, "random seed", bound="non-negative")
    warmup_iters: int | str = setting(
        20,
        "untimed iterations first, or `auto`: until 3 windows agree within 5 % (metrics/steady.py)",
        bound="positive or auto",
        group=TIMING_GROUP,
    )
    max_warmup_iters: int = setting(
        500, "bound of --warmup-iters auto; a run not stable by then is timed and flagged", bound="positive",
        group=TIMING_GROUP,
    )  # fmt: skip
    iters: int = setting(100, "timed iterations", bound="positive", group=TIMING_GROUP)
    print_every: int | None = setting(
        None, "iterations per timing window and log line (default min(20, iters))", bound="positive", group=TIMING_GROUP
    )
    timeout: float = setting(
        3600.0, "seconds before a run is stopped and recorded as failed", bound="positive", group=TIMING_GROUP
    )
    peak_tflops: float | None = setting(
        None, "device peak TFLOP/s for MFU (default: dlperf's table in metrics/flops.py)", bound="positive"
    )
    # the external kind: a command template run per rank (or per node), its log read by a peer-log reader
    command: str | None = setting(
        None,
        "run this training command instead of dlperf's loop, once per rank, with MASTER_ADDR, MASTER_PORT, "
        "WORLD_SIZE, RANK, LOCAL_RANK, NODE_RANK set; placeholders such as {python} (dlperf's interpreter), "
        "{framework_launcher}, {batch_size}, {precision}, {amp}, {world_size}, {nnodes}, {nproc_per_node}, "
        "{node_rank}, {rank}, {local_rank}, {repeat}, {model} and the case's keys are filled in; run as an "
        "argument list (shlex), no shell",
        bound=NON_EMPTY,
        group=COMMAND_GROUP,
    )
    log_format: str = setting(
        "auto",
        "peer-log reader for its output: auto (detected) or a name from `dlperf extract --list-formats`",
        bound=NON_EMPTY,
        group=COMMAND_GROUP,
    )
    command_per: str = setting(
        "rank",
        "rank (one process per device) or node (one per node, for scripts that start their own workers)",
        choices=COMMAND_PER,
        group=COMMAND_GROUP,
    )
    shell: bool = setting(False, "run --command through /bin/sh -c (values quoted)", group=COMMAND_GROUP)
    framework: str | None = setting(
        None,
        "the command's framework (tensorflow, paddle, mxnet, torch, jax...): the record's `framework`, with the "
        "version its interpreter reports",
        group=COMMAND_GROUP,
    )
    label: str | None = setting(
        None,
        "a short name telling this command apart from another of the same framework (its case, files and report "
        "source)",
        group=COMMAND_GROUP,
    )
    launch_env: str = setting(
        "torch",
        "the framework launcher whose variables each process gets besides torchrun's: tf (TF_CONFIG), paddle "
        "(PADDLE_*), jax (JAX_*), mpi (OMPI_COMM_WORLD_*, PMI_*)",
        choices=LAUNCH_ENVS,
        group=COMMAND_GROUP,
    )
    stop_after_lines: int | None = setting(
        None, "end the command (SIGTERM, then SIGKILL) once its log holds N throughput lines; the run is ok",
        bound="positive", group=COMMAND_GROUP,
    )  # fmt: skip
    stop_after_seconds: float | None = setting(
        None, "end the command after S seconds; the run is ok", bound="positive", group=COMMAND_GROUP
    )
    log_warmup: int | None = setting(
        None,
        "iterations the log reader skips as warm-up (default: the format's published rule, see `dlperf extract "
        "--list-formats`)",
        bound="non-negative",
        group=COMMAND_GROUP,
    )
    instrument: str = setting(
        "auto",
        "auto: a Python command's optimizer steps are timed by dlperf's start-up hook (the record's figure, with "
        "--warmup-iters and --iters as native runs; the script's own printed figure is the second reading); off: "
        "the script's log alone",
        choices=INSTRUMENT,
        group=COMMAND_GROUP,
    )
    straggler_pct: float = setting(
        5.0, "flag a rank this many percent slower than the median rank", bound="non-negative", group=TIMING_GROUP
    )
    ablate: str = setting(
        "off",
        "sync: after the timed window, time the same ranks' steps without gradient synchronisation (DDP's "
        "no_sync()) in windows alternating with synchronised ones: compute while the ranks share the machine; "
        "the difference is communication, exposed or slowing compute (the record's `ablation`, the report's "
        "scaling waterfall); a sweep's default for its data-parallel cases of 2+ devices",
        choices=ABLATIONS,
        group=TIMING_GROUP,
    )

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def topology(self) -> str:
        """The published case name, e.g. `1n8g`."""
        return f"{self.nodes}n{self.devices_per_node}g"

    def tf32(self, device_type: str) -> bool:
        """Whether fp32 matmuls and convolutions run on TF32 tensor cores: on CUDA with `fp32_math` tf32."""
        return self.fp32_math == "tf32" and device_type == "cuda"

    def sharing_cpu(self, devices_per_node: int, cores: int) -> RunSpec:
        """`cpu_threads` auto made a number: `cores` divided by `devices_per_node`, the most of any case run beside
        this one, so 1n1g and 1n2g compare one device's work with two of the same size (not 2 threads with 1)."""
        if self.cpu_threads != AUTO:
            return self
        return self.replace(cpu_threads=max(1, cores // devices_per_node))

    @property
    def auto_warmup(self) -> bool:
        return self.warmup_iters == AUTO

    @property
    def window(self) -> int:
        """Iterations per timing window and log line."""
        return self.print_every if self.print_every is not None else min(DEFAULT_PRINT_EVERY, self.iters)

    def to_dict(self) -> dict[str, Any]:
        """The flat form: shared fields, then the workload's (the record's `config`, the YAML keys)."""
        common = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "workload"}
        return {**common, **dataclasses.asdict(self.workload)}

    def replace(self, **changes: Any) -> RunSpec:
        return dataclasses.replace(self, **changes)

    def validate(self) -> None:
        """Check what relates the shared values (each value's own bound or choices is its field's, checked where it
        entered: `coerce`); the workload checks its own afterwards."""
        for name, most in (("nodes", MAX_NODES), ("devices_per_node", MAX_DEVICES_PER_NODE)):
            if getattr(self, name) > most:
                raise ConfigError(
                    f"{flag(name)} {getattr(self, name)} is more than any cluster has (at most {most}): "
                    "every rank is planned and started"
                )
        if self.auto_warmup and self.max_warmup_iters < 3 * self.window:
            raise ConfigError(
                f"{flag('warmup_iters')} auto needs room for 3 windows of {flag('print_every')} {self.window}: "
                f"raise {flag('max_warmup_iters')} (now {self.max_warmup_iters}) to at least {3 * self.window}"
            )
        if self.iters < self.window:
            raise ConfigError(
                f"{flag('iters')} {self.iters} is shorter than one timing window "
                f"({flag('print_every')} {self.window}): "
                f"raise {flag('iters')} or lower {flag('print_every')}"
            )
        self._validate_command()

    def _validate_command(self) -> None:
        """A command runs instead of an engine; its template is checked by the orchestrator."""
        if self.command is not None and self.engine is not None:
            raise ConfigError(
                f"{flag('command')} runs another framework's script, not {flag('engine')} {self.engine}: drop one"
            )
        if self.command is None and self.engine is None:
            raise ConfigError(
                f"no {flag('engine')}: dlperf's loop runs on torch or jax; another framework's script, give it as "
                f"{flag('command')} 'python ...'"
            )
        for name in ("framework", "label"):
            _require_label(name, getattr(self, name))
        own = ("framework", "label", "stop_after_lines", "stop_after_seconds", "log_warmup")
        if self.command is None and (self.launch_env != "torch" or any(getattr(self, k) is not None for k in own)):
            raise ConfigError(
                "--framework, --label, --launch-env and --stop-after-* go with --command (another framework's "
                "script); a native run knows its framework"
            )

    @property
    def engine_tag(self) -> str:
        """The token that names who runs the work in a group and its files: the engine, or for an external run
        its label, else its framework (so two commands never share a file or a case)."""
        if self.command is not None:
            return self.label or self.framework or "external"
        return self.engine


# how a message spells an option: "flag" (`--batch-size`, the command line) or "key" (`batch_size`, a sweep file)
_SPELLING: ContextVar[str] = ContextVar("dlperf_option_spelling", default="flag")


def flag(name: str) -> str:
    """Option `name` as the user gave it: `--batch-size` on the command line, `batch_size` in a file's checks."""
    return name if _SPELLING.get() == "key" else "--" + name.replace("_", "-")


@contextlib.contextmanager
def file_keys() -> Iterator[None]:
    """Within: messages name options by their file keys, so a sweep file's fault reads in the file's words."""
    token = _SPELLING.set("key")
    try:
        yield
    finally:
        _SPELLING.reset(token)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_label(name: str, value: Any) -> None:
    """A framework or label: null, or a short lower-case name."""
    if value is not None and not (isinstance(value, str) and LABEL_RE.match(value)):
        raise ConfigError(
            f"{flag(name)} must be a short lower-case name (letters, digits, . + -; e.g. tensorflow), "
            f"got {str(value)[:60]!r}"
        )


def value_problem(value: Any, bound: str | None, integer: bool, choices: tuple = ()) -> str | None:
    """What is wrong with a value against its field's declared choices or bound, in the words every door uses (the
    flag's argparse type, a sweep file's key, the agent's JSON spec); None where it holds. A float is always finite:
    `nan` or `inf` is no setting a run can use."""
    if value is None or (bound == AUTO_BOUND and value == AUTO):
        return None
    if choices:
        return None if value in choices else f"must be one of {', '.join(map(str, choices))}, got {_shown(value)}"
    if bound == NON_EMPTY:
        return None if not isinstance(value, str) or value.strip() else "must not be empty"
    if bound is None:
        return None
    holds, integer_words, number_words = BOUNDS["positive" if bound == AUTO_BOUND else bound]
    fits = _is_int(value) if integer else _is_number(value) and math.isfinite(value)
    if fits and holds(value):
        return None
    words = (integer_words if integer else number_words) + (" or auto" if bound == AUTO_BOUND else "")
    return f"must be {words}, got {_shown(value)}"


def _shown(value: Any) -> str:
    """A refused value as a message quotes it: its repr, cut where a file gave a line of a megabyte."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_topology(text: str) -> tuple[int, int]:
    """`2n8g` (or the GPT reports' `2n8d`) -> (2, 8)."""
    match = TOPOLOGY_RE.fullmatch(str(text).strip())
    if not match:
        raise ConfigError(f"topology {text!r} is not of the form <nodes>n<devices>g, e.g. 1n8g")
    nodes, devices = int(match.group(1)), int(match.group(2))
    if nodes <= 0 or devices <= 0:
        raise ConfigError(f"topology {text!r} needs at least one node and one device")
    return nodes, devices


COMMON_KEYS = tuple(f.name for f in fields(RunSpec) if f.name not in ("model", "workload"))
AUTO_KEYS = frozenset(f.name for f in fields(RunSpec) if f.metadata.get("bound") == AUTO_BOUND)


@functools.cache
def _hints(owner: type) -> dict[str, Any]:
    return typing.get_type_hints(owner)


def _kinds(hint: Any) -> set[Any]:
    """The types a field's value may have besides null: `int | None` -> {int}; a Literal, Any: itself."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set(typing.get_args(hint)) - {type(None)}
    return {hint}


def coerce(owner: type, key: str, value: Any) -> Any:
    """The door of every value that is not a flag (a sweep file's key, a JSON spec): YAML already types most values;
    accept only the obvious widening int -> float, refuse a wrong type for the field `key` of the dataclass `owner`
    (RunSpec, a workload's config, LaunchOptions), as its annotation declares, then its declared bound or choices."""
    hint = _hints(owner)[key]
    kinds = _kinds(hint)
    if key in AUTO_KEYS and value == AUTO:
        return value
    if key == "instrument" and isinstance(value, bool):  # YAML reads `instrument: off` as false
        return "auto" if value else "off"
    if float in kinds and _is_int(value):
        value = float(value)
    need = _needed_type(hint, kinds, value)
    if need is not None:
        raise ConfigError(f"key {key!r} must be {need}, got {value!r}")
    meta = _fields(owner)[key].metadata
    problem = value_problem(value, meta.get("bound"), int in kinds, declared_choices(meta, hint))
    if problem is not None:  # named as the user gave it: `--iters` on the command line, `iters` in a file
        raise ConfigError(f"{flag(key)} {problem}")
    return value


def declared_choices(metadata: Any, hint: Any) -> tuple:
    """A field's choices: its `setting`'s, else its `Literal[...]` annotation's (`X | None` too); () for none."""
    if metadata.get("choices"):
        return tuple(metadata["choices"])
    literal = [k for k in _kinds(hint) if typing.get_origin(k) is typing.Literal]
    return typing.get_args(literal[0]) if literal else ()


@functools.cache
def _fields(owner: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in fields(owner)}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# (the field's types hold it, the value is of it, what the message asks for), checked in order
_TYPE_CHECKS: tuple[tuple[Callable[[set[Any]], bool], Callable[[Any], bool], str], ...] = (
    (lambda kinds: int in kinds, _is_int, "an integer"),  # `int | str`: an integer or `auto`
    (lambda kinds: kinds == {str}, lambda value: isinstance(value, str), "a string"),
    (lambda kinds: float in kinds, _is_number, "a number"),
)


def _needed_type(hint: Any, kinds: set[Any], value: Any) -> str | None:
    """What a value of the wrong type should have been (`an integer`); None for a right one or null."""
    if hint is bool:
        return None if isinstance(value, bool) else "true or false"
    if value is None:
        return None
    return next((need for holds, fits, need in _TYPE_CHECKS if holds(kinds) and not fits(value)), None)
