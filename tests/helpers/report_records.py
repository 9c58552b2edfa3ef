"""A run record as dlperf writes it, small enough to build per test: the report, compare and plot tests share it."""

from __future__ import annotations

from dlperf.records.schema import SCHEMA


def record(case: str, repeat: int, throughput: float | None, group: str = "b128_fp32", **extra) -> dict:
    nodes, devices = (int(x) for x in case.rstrip("g").split("n"))
    base = {
        "schema": SCHEMA,
        "model": "resnet50",
        "case": case,
        "group": group,
        "repeat": repeat,
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": nodes * devices,
        "batch_size": int(group.split("_")[0][1:]),
        "precision": group.split("_")[1],
        "status": "ok" if throughput is not None else "failed",
        "error": None if throughput is not None else "worker rank 1 on host-b was killed by SIGKILL",
        "throughput": throughput,
        "latency_ms": {"mean": 10.0 * repeat, "p50": 9.0 * repeat, "p90": 12.0 * repeat},
        "peak_memory_mib": {"allocated": 1000.0 + repeat, "reserved": 1200.0},
    }
    return {**base, **extra}
