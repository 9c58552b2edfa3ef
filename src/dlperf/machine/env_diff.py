"""Which facts differ between the nodes of one run: a scaling figure from mixed nodes needs a warning."""

from __future__ import annotations

from typing import Any

# Facts that change a node's speed; host names, memory sizes and git state are expected to differ or not matter.
COMPARED = ("cpu", "os", "python", "torch", "torchvision", "jax", "jaxlib", "flax", "cuda", "cudnn", "nccl")
GPU_FACTS = ("name", "driver")


def env_nodes(env: dict[str, Any]) -> list[dict[str, Any]]:
    """Each node's environment: a multi-node run's `nodes`, else the one node's own."""
    nodes = env.get("nodes")
    return nodes if isinstance(nodes, list) and nodes else [env]


def node_facts(env: dict[str, Any]) -> dict[str, Any]:
    """The compared facts of one node's environment, GPUs as the sorted set of their models and drivers."""
    facts = {key: env.get(key) for key in COMPARED}
    for key in GPU_FACTS:
        facts[f"gpu {key}"] = ", ".join(sorted({str(gpu.get(key)) for gpu in env.get("gpus") or []})) or None
    facts["gpu count"] = len(env.get("gpus") or [])
    return facts


def env_differences(envs: list[dict[str, Any]]) -> list[str]:
    """One line per fact whose value is not the same on every node, e.g. `torch: 2.4.0 on a; 2.5.1 on b, c`."""
    if len(envs) < 2:
        return []
    names = [str(env.get("node") or env.get("host") or f"node {i}") for i, env in enumerate(envs)]
    facts = [node_facts(env) for env in envs]
    lines = []
    for key in facts[0]:
        holders: dict[str, list[str]] = {}
        for name, node in zip(names, facts):
            holders.setdefault(str(node[key]), []).append(name)
        if len(holders) > 1:
            lines.append(f"{key}: " + "; ".join(f"{value} on {', '.join(nodes)}" for value, nodes in holders.items()))
    return lines
