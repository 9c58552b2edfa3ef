"""`dlperf env`: the environment every record carries."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from dlperf.cli.display import say
from dlperf.engines import engine_names, engine_versions
from dlperf.machine.environment import collect_environment
from dlperf.spec import setting

DESCRIPTION = "Print the environment that every run record carries."


@dataclass(frozen=True)
class EnvOptions:
    json: bool = setting(False, "print JSON instead of a readable list")


OPTIONS = (EnvOptions,)


def run(args: argparse.Namespace) -> int:
    env = {**collect_environment(), **engine_versions(engine_names())}
    if args.json:
        print(json.dumps(env, indent=2, default=str))
        return 0
    for line in env_lines(env):
        say(line)
    return 0


def env_lines(env: dict[str, Any]) -> list[str]:
    """The environment as a person reads it: one fact per line, no Python dicts, no CUDA claims without a GPU."""
    env = dict(env)  # each fact is taken out; what is left (the libraries' versions) follows
    topology = env.pop("topology", None)
    gpus = env.pop("gpus", None) or []
    facts = [*_machine_facts(env), *_gpu_facts(gpus), _cuda_fact(env, gpus)]
    facts += [(key, "not installed" if value is None else str(value)) for key, value in env.items()]
    width = max(len(name) for name, _ in facts)
    lines = [f"{name.ljust(width)}  {value}" for name, value in facts]
    if topology:
        lines += ["nvidia-smi topo -m:", topology]
    return lines


def _machine_facts(env: dict[str, Any]) -> list[tuple[str, Any]]:
    """Host, CPU, memory, OS, Python and the checkout, taken out of `env`."""
    git = env.pop("git", None) or {}
    commit = git.get("commit", "") + (" (uncommitted changes)" if git.get("dirty") else "")
    return [
        ("host", env.pop("host", None)),
        ("CPU", f"{env.pop('cpu', None)}, {env.pop('cpu_cores', None)} cores ({env.pop('cpu_threads', None)} threads)"),
        ("memory", f"{env.pop('memory_gib', None)} GiB"),
        ("OS", env.pop("os", None)),
        ("Python", env.pop("python", None)),
        ("dlperf commit", commit or "not a git checkout"),
    ]


def _gpu_facts(gpus: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each GPU, and each of its MIG slices."""
    facts = []
    for gpu in gpus:
        memory = f"{gpu['memory_mib']} MiB" if gpu.get("memory_mib") is not None else "memory not readable"
        facts.append((f"GPU {gpu['index']}", f"{gpu['name']}, {memory}, driver {gpu['driver']}"))
        slices = gpu.get("mig") or []
        facts += [(f"GPU {gpu['index']} MIG", f"{mig['uuid']}, {mig['memory_mib']} MiB") for mig in slices]
    return facts


def _cuda_fact(env: dict[str, Any], gpus: list[dict[str, Any]]) -> tuple[str, str]:
    """The CUDA stack's versions (taken out of `env`), claimed only where a GPU is visible."""
    cuda = {key: env.pop(key, None) for key in ("cuda_available", "cuda", "cudnn", "nccl")}
    if gpus or cuda["cuda_available"]:
        return ("CUDA", f"{cuda['cuda']}, cuDNN {cuda['cudnn']}, NCCL {cuda['nccl']}")
    return ("GPUs", "none visible (no CUDA, cuDNN or NCCL version is claimed without one)")
