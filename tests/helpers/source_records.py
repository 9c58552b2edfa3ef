"""Two results folders with hand-picked figures, shared by the cross-source report and HTML tests."""

from __future__ import annotations

from pathlib import Path

from dlperf.records.schema import SCHEMA
from dlperf.records.store import write_json_atomic


def env(torch: str) -> dict:
    return {"host": "h", "cpu": "Xeon", "os": "Linux", "python": "3.11.9", "torch": torch, "cuda": "12.4",
            "gpus": [{"name": "V100-SXM2-16GB", "driver": "550.54"}] * 2}  # fmt: skip


def record(model: str, case: str, batch: int, precision: str, repeat: int, speed: float | None, **extra) -> dict:
    nodes, devices = (int(x) for x in case.rstrip("g").split("n"))
    windows = None if speed is None else [speed * 0.98, speed * 1.01, speed * 1.01]
    return {
        "schema": SCHEMA, "model": model, "case": case, "group": f"b{batch}_{precision}", "repeat": repeat,
        "nodes": nodes, "devices_per_node": devices, "world_size": nodes * devices, "batch_size": batch,
        "precision": precision, "status": "ok" if speed is not None else "failed",
        "error": None if speed is not None else "worker rank 1 on <node-b> was killed by SIGKILL",
        "throughput": speed, "window_throughputs": windows, "config": {"print_every": 20}, **extra,
    }  # fmt: skip


# source A: fp32 b128 at 1n1g/1n4g/2n8g (a failed 1n1g repeat), amp-fp16 b256 at 1n1g/1n4g; B: fp32 b128 at
# 1n1g/1n4g, fp32 b64 at 1n1g/2n8g, amp-fp16 b192 at 1n1g/1n4g.
SPEEDS = {
    "A": {
        ("1n1g", 128, "fp32"): [100.0, 110.0, 90.0, None],  # median 100
        ("1n4g", 128, "fp32"): [380.0, 390.0, 370.0],  # median 380, speedup 3.80
        ("2n8g", 128, "fp32"): [1500.0, 1400.0, 1600.0],  # median 1500, speedup 15.00
        ("1n1g", 256, "amp-fp16"): [200.0, 210.0],  # median 205
        ("1n4g", 256, "amp-fp16"): [700.0, 720.0],  # median 710, speedup round(710 / 205, 2) = 3.46
    },
    "B": {
        ("1n1g", 128, "fp32"): [120.0],
        ("1n4g", 128, "fp32"): [400.0, 410.0, 420.0],  # median 410, speedup round(410 / 120, 2) = 3.42
        ("1n1g", 64, "fp32"): [90.0],
        ("2n8g", 64, "fp32"): [1200.0],  # batch 64 is not B's largest nor shared: never in the comparison
        ("1n1g", 192, "amp-fp16"): [250.0],
        ("1n4g", 192, "amp-fp16"): [800.0],  # speedup 3.20
    },
}


def write_source(root: Path, name: str, model: str = "resnet50", **extra) -> Path:
    """One source's records under root/name, as `dlperf run` lays them out; returns the folder."""
    folder = root / name
    torch = {"A": "2.4.0", "B": "2.5.1"}.get(name, "2.4.0")
    for (case, batch, precision), speeds in SPEEDS[name].items():
        for i, speed in enumerate(speeds, 1):
            fields = {"env": env(torch), **extra}
            if name == "A" and precision == "fp32":
                fields["max_batch"] = 160
            rec = record(model, case, batch, precision, i, speed, **fields)
            write_json_atomic(folder / model / case / f"{model}_b{batch}_{precision}_{i}.json", rec)
    return folder
