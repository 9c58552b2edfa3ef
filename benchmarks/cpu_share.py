"""The main job's 1n2g efficiency on a CPU under whatever load the machine has: a CPU device as the same share of
the machine in every topology (`--cpu-threads 1` on 2 cores, dlperf's sweep default) against torchrun's habit
(every process shares the cores among its node's processes: 2 threads for 1n1g, 1 each for 1n2g).

    python benchmarks/cpu_share.py                  # 3 rounds of the quick sweep's case, ResNet-50 at 32 px
    python benchmarks/cpu_share.py --rounds 5 --iters 40

Each round runs 1n1g and 1n2g with both shares, in turns (A B A B), so a load that drifts slows both alike.
Prints every run's throughput and the machine's other load (cores others kept busy), then per share the median
efficiency (1n2g / (2 x 1n1g)). An equal share should stay near the communication's cost at any load; torchrun's
habit compares 2 threads with 1 and swings with the load (48 % idle, 300 to 577 % loaded, issue 28).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(out: Path, devices: int, threads: int, args: argparse.Namespace) -> tuple[float, float]:
    """One `dlperf run`: its throughput and how many cores others kept busy meanwhile."""
    command = [
        sys.executable, "-m", "dlperf", "run", "--model", "resnet50", "--device", "cpu", "--image-size", "32",
        "--num-classes", "100", "--batch-size", "16", "--warmup-iters", "3", "--iters", str(args.iters),
        "--print-every", "5", "--devices-per-node", str(devices), "--cpu-threads", str(threads),
        "--out", str(out), "--overwrite",
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    (path,) = (out / "resnet50" / f"1n{devices}g").glob("*.json")
    record = json.loads(path.read_text())
    load = max((node["other_cores"] for node in record.get("machine_load") or []), default=float("nan"))
    return record["throughput"], load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    shares = {"equal share": {1: max(1, cores // 2), 2: max(1, cores // 2)}, "torchrun's": {1: cores, 2: cores // 2}}
    speeds: dict[str, dict[int, list[float]]] = {name: {1: [], 2: []} for name in shares}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.rounds + 1):
            for name, threads in shares.items():
                for devices in (1, 2):
                    speed, load = run(Path(tmp) / name.split()[0], devices, threads[devices], args)
                    speeds[name][devices].append(speed)
                    print(
                        f"round {round_} {name:12s} 1n{devices}g {threads[devices]} thread(s)/rank: "
                        f"{speed:7.2f} samples/s, others kept {load:.2f} of {cores} cores busy",
                        flush=True,
                    )
    for name, by_devices in speeds.items():
        one, two = statistics.median(by_devices[1]), statistics.median(by_devices[2])
        print(f"{name:12s}: 1n1g {one:.2f}, 1n2g {two:.2f} samples/s (medians): efficiency {two / (2 * one):.1%}")


if __name__ == "__main__":
    main()
