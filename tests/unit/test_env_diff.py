"""Which facts differ between the nodes of a run (the report's warning for mixed nodes)."""

from __future__ import annotations

from dlperf.machine.env_diff import env_differences


def node(name: str, **changes) -> dict:
    env = {
        "node": name,
        "host": "vm",
        "cpu": "Xeon 8480",
        "os": "Linux-6.1",
        "python": "3.11.2",
        "torch": "2.4.0",
        "torchvision": "0.19.0",
        "cuda": "12.4",
        "cudnn": 90100,
        "nccl": "2.20.5",
        "memory_gib": 503.0,
        "gpus": [{"index": i, "name": "NVIDIA H100", "memory_mib": 81559, "driver": "550.54"} for i in range(8)],
    }
    return {**env, **changes}


def test_identical_nodes_have_no_differences():
    assert env_differences([node("a"), node("b", memory_gib=251.0, host="other")]) == []
    assert env_differences([node("a")]) == []


def test_each_differing_fact_is_one_line_naming_the_nodes():
    h100, a100 = node("a"), node("b", torch="2.5.1")
    a100["gpus"] = [{**gpu, "name": "NVIDIA A100", "driver": "535.1"} for gpu in a100["gpus"][:4]]
    assert env_differences([h100, a100, node("c")]) == [
        "torch: 2.4.0 on a, c; 2.5.1 on b",
        "gpu name: NVIDIA H100 on a, c; NVIDIA A100 on b",
        "gpu driver: 550.54 on a, c; 535.1 on b",
        "gpu count: 8 on a, c; 4 on b",
    ]
