"""The waterfall's communication share against an independent ablation, on the quick case (issue 39).

    python benchmarks/ablation_check.py --rounds 3            # runs, then prints every figure
    python benchmarks/ablation_check.py --read OUT            # prints the figures of an earlier OUT

Each round runs, one after another: the quick case's 1n1g alone; its 1n2g with `--ablate sync` (the same two ranks
then time their steps without gradient synchronisation); and two independent 1n1g runs side by side (started
together, each one CPU thread on a core of its own (taskset), as each 1n2g rank keeps to its own core; unpinned,
both would keep to the first core). With T1 the 1n1g step, T2 the 1n2g step and the side-by-side
runs' step TS (the mean of the two), the independent ablation's communication share of the scaling loss is
(T2 - TS) / (T2 - T1): sharing the machine costs TS - T1, the rest is communication. The waterfall's share is
(T2 - TA) / (T2 - T1) with TA = T2 x the same 1n2g run's ablation ratio (its unsynchronised windows' step over
the synchronised windows alternating with them). Prints each round's step times and shares,
the machine's other load during each run, and the medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

QUICK = [
    "--model", "resnet50", "--device", "cpu", "--batch-size", "16", "--image-size", "32", "--num-classes", "100",
    "--precision", "fp32", "--warmup-iters", "3", "--iters", "20", "--print-every", "5", "--cpu-threads", "1",
]  # fmt: skip


def dlperf(args: list[str], core: int | None = None) -> subprocess.Popen:
    """A quick-case run; `core`: on that core alone (taskset), as the 1n2g's rank of that local rank keeps to it."""
    pinned = ["taskset", "-c", str(core)] if core is not None else []
    command = [*pinned, sys.executable, "-m", "dlperf", "run", *QUICK, *args]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


def run_round(out: Path, r: int) -> None:
    for args in (
        ["--out", str(out / "main")],
        ["--devices-per-node", "2", "--ablate", "sync", "--out", str(out / "main")],
    ):
        if dlperf([*args, "--repeat", str(r)]).wait():
            raise SystemExit(f"a run failed: {args}")
    cores = sorted(os.sched_getaffinity(0))[:2]  # each on its own core: a one-device run keeps to the first it may use
    side = [
        dlperf(["--repeat", str(r), "--out", str(out / name)], core) for name, core in zip(("side_a", "side_b"), cores)
    ]
    if any(p.wait() for p in side):
        raise SystemExit("a side-by-side run failed")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def step_ms(record: dict) -> float:
    return record["global_batch_size"] / record["throughput"] * 1000


def other_cores(record: dict) -> float:
    return max((node.get("other_cores") or 0.0 for node in record.get("machine_load") or []), default=float("nan"))


def report(out: Path) -> None:
    rows = []
    for one in sorted((out / "main" / "resnet50" / "1n1g").glob("*.json")):
        name = one.name
        two = load(out / "main" / "resnet50" / "1n2g" / name)
        sides = [load(out / s / "resnet50" / "1n1g" / name) for s in ("side_a", "side_b")]
        t1, t2 = step_ms(load(one)), step_ms(two)
        ta = t2 * two["ablation"]["ratio"]  # as the waterfall takes it: the paired windows' ratio
        ts = statistics.fmean(step_ms(s) for s in sides)
        loss = t2 - t1
        rows.append((name, t1, t2, ta, ts, (t2 - ta) / loss, (t2 - ts) / loss, other_cores(two)))
    print("round                          T1 ms   T2 ms   TA ms   TS ms  waterfall comm  independent comm  others")
    for name, t1, t2, ta, ts, ours, theirs, load_ in rows:
        print(f"{name:<30} {t1:7.1f} {t2:7.1f} {ta:7.1f} {ts:7.1f}  {ours:14.0%}  {theirs:16.0%}  {load_:.2f}")
    if rows:
        ours, theirs = statistics.median(r[5] for r in rows), statistics.median(r[6] for r in rows)
        print(
            f"median shares: waterfall {ours:.0%}, independent {theirs:.0%}, difference {abs(ours - theirs):.0%} points"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("ablation-check"))
    parser.add_argument("--read", type=Path, help="print the figures of an earlier --out without running")
    args = parser.parse_args()
    if args.read:
        report(args.read)
        return
    for r in range(1, args.rounds + 1):
        run_round(args.out, r)
    report(args.out)


if __name__ == "__main__":
    main()
