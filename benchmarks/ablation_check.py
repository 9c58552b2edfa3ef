"""The waterfall's communication share against an independent ablation, on the quick case (issue 39).

    python benchmarks/ablation_check.py --rounds 3            # runs, then prints every figure
    python benchmarks/ablation_check.py --read OUT            # prints the figures of an earlier OUT

Each round runs, one after another (which goes first turns with the round): the quick case's 1n1g alone; its 1n2g
with `--ablate sync` (the same two ranks then time their steps without gradient synchronisation); and two
independent 1n1g runs side by side (started
together, each one CPU thread on a core of its own (taskset), as each 1n2g rank keeps to its own core; unpinned,
both would keep to the first core). With T1 the 1n1g step, T2 the 1n2g step and the side-by-side
runs' step TS (the mean of the two; in brackets the share from the slower of the two, the pace a synchronous job
keeps), the independent ablation's communication share of the scaling loss is
(T2 - TS) / (T2 - T1): sharing the machine costs TS - T1, the rest is communication. The waterfall's share is
(T2 - TA) / (T2 - T1) with TA = T2 x the same 1n2g run's ablation ratio (its unsynchronised windows' step over
the synchronised windows alternating with them). Prints each round's step times and shares,
the machine's other load during each run, and the medians over rounds.

Each round also runs, beside the 1n2g run (before it in odd rounds, after it in even ones), a minimal standalone
DDP loop with the same model and shapes (`torch.nn.parallel.DistributedDataParallel` around torchvision's
ResNet-50, SGD, one synthetic batch; 2 gloo ranks, each one thread on a core of its own) timing windows of the
same length under no_sync() and synchronised, pairs in both orders: its ratio says whether dlperf's ablation
measures what plain DDP shows on the machine at that time, its load average beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
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


STANDALONE = {"batch": 16, "image_size": 32, "num_classes": 100, "warmup": 3, "window": 5, "pairs": 4}


def standalone_rank(rank: int, port: int, result: Path) -> None:
    """One rank of the standalone DDP loop: pinned to its own core, one thread, windows under no_sync() and
    synchronised between barriers, pairs in both orders; rank 0 writes both step times (ms) to `result`."""
    import torch
    import torch.distributed as dist
    from torchvision.models import resnet50

    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[rank % len(cores)]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    c = STANDALONE
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(resnet50(num_classes=c["num_classes"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(c["batch"], 3, c["image_size"], c["image_size"])
    labels = torch.randint(0, c["num_classes"], (c["batch"],))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()

    def window() -> float:
        step()  # untimed: the first step after a change of mode
        dist.barrier()
        started = time.perf_counter()
        for _ in range(c["window"]):
            step()
        dist.barrier()
        return (time.perf_counter() - started) * 1000 / c["window"]

    for _ in range(c["warmup"]):
        step()
    times: dict[str, list[float]] = {"unsynced": [], "synced": []}
    load_start = os.getloadavg()[0]
    for pair in range(c["pairs"]):
        for unsynced in (pair % 2 == 0, pair % 2 == 1):
            with model.no_sync() if unsynced else nullcontext():
                times["unsynced" if unsynced else "synced"].append(window())
    if rank == 0:
        result.write_text(json.dumps({**times, "load_avg": [load_start, os.getloadavg()[0]]}))
    dist.destroy_process_group()


def standalone(result: Path) -> None:
    """The standalone DDP loop on 2 ranks (torch.multiprocessing), its figures in `result`."""
    import torch.multiprocessing as mp

    from dlperf.launch.local import free_port

    result.parent.mkdir(parents=True, exist_ok=True)
    mp.spawn(standalone_rank, args=(free_port(), result), nprocs=2)


def run_round(out: Path, r: int) -> None:
    """One round's runs; which of the three goes first turns with the round (the 1n1g, the 1n2g with the standalone
    loop beside it, the side-by-side pair), so that a machine whose speed drifts over minutes slows none of them
    always: the shares compare runs minutes apart."""

    def alone() -> None:
        if dlperf(["--out", str(out / "main"), "--repeat", str(r)]).wait():
            raise SystemExit("the 1n1g run failed")

    def two_ranks() -> None:
        two = ["--devices-per-node", "2", "--ablate", "sync", "--out", str(out / "main"), "--repeat", str(r)]
        loop = [sys.executable, __file__, "--standalone", str(out / "standalone" / f"round_{r}.json")]
        for command in [loop, None] if r % 2 else [None, loop]:
            if command and subprocess.run(command, stdout=subprocess.DEVNULL).returncode:
                raise SystemExit("the standalone DDP loop failed")
            if command is None and dlperf(two).wait():
                raise SystemExit(f"a run failed: {two}")

    def side_by_side() -> None:
        cores = sorted(os.sched_getaffinity(0))[:2]  # each on its own core: a one-device run keeps to the first
        names = ("side_a", "side_b")
        side = [dlperf(["--repeat", str(r), "--out", str(out / name)], core) for name, core in zip(names, cores)]
        if any(p.wait() for p in side):
            raise SystemExit("a side-by-side run failed")

    parts = [alone, two_ranks, side_by_side]
    for part in parts[r % 3 :] + parts[: r % 3]:
        part()


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def step_ms(record: dict) -> float:
    return record["global_batch_size"] / record["throughput"] * 1000


def other_cores(record: dict) -> float:
    return max((node.get("other_cores") or 0.0 for node in record.get("machine_load") or []), default=float("nan"))


def standalone_rows(out: Path) -> None:
    """Each round's ratios side by side: dlperf's ablation (unsynchronised over synchronised step) and the
    standalone loop's, with the load average during the loop."""
    print("round   dlperf ratio (pairs)            standalone ratio (pairs)        load avg")
    for path in sorted((out / "standalone").glob("round_*.json")):
        r = int(path.stem.split("_")[1])
        loop = load(path)
        two = sorted((out / "main" / "resnet50" / "1n2g").glob(f"*_{r}.json"))
        ours = load(two[0])["ablation"] if two else {}
        pairs = [
            round(1 / u * s, 2)
            for u, s in zip(ours.get("window_throughputs", []), ours.get("synced_window_throughputs", []))
        ]
        theirs = [round(u / s, 2) for u, s in zip(loop["unsynced"], loop["synced"])]
        ratio = statistics.fmean(loop["unsynced"]) / statistics.fmean(loop["synced"])
        print(
            f"{r:<7} {ours.get('ratio', float('nan')):5.2f} {str(pairs):<25} {ratio:5.2f} {str(theirs):<25}"
            f" {loop['load_avg'][0]:.1f}-{loop['load_avg'][1]:.1f}"
        )


def report(out: Path) -> None:
    rows = []
    for one in sorted((out / "main" / "resnet50" / "1n1g").glob("*.json")):
        name = one.name
        two = load(out / "main" / "resnet50" / "1n2g" / name)
        sides = [load(out / s / "resnet50" / "1n1g" / name) for s in ("side_a", "side_b")]
        t1, t2 = step_ms(load(one)), step_ms(two)
        ta = t2 * two["ablation"]["ratio"]  # as the waterfall takes it: the paired windows' ratio
        ts = statistics.fmean(step_ms(s) for s in sides)
        slower = max(step_ms(s) for s in sides)  # a synchronous job's pace: its slower rank's
        loss = t2 - t1
        rows.append((name, t1, t2, ta, ts, (t2 - ta) / loss, (t2 - ts) / loss, other_cores(two), (t2 - slower) / loss))
    print("round                          T1 ms   T2 ms   TA ms   TS ms  waterfall comm  independent (slower)  others")
    for name, t1, t2, ta, ts, ours, theirs, load_, slower_share in rows:
        print(
            f"{name:<30} {t1:7.1f} {t2:7.1f} {ta:7.1f} {ts:7.1f}  {ours:14.0%}  {theirs:12.0%} ({slower_share:4.0%})"
            f"  {load_:.2f}"
        )
    if rows:
        ours, theirs = statistics.median(r[5] for r in rows), statistics.median(r[6] for r in rows)
        print(
            f"median shares: waterfall {ours:.0%}, independent {theirs:.0%}, difference {abs(ours - theirs):.0%} points"
        )
        t1, t2, ta, ts = (statistics.median(r[i] for r in rows) for i in range(1, 5))
        print(
            f"shares of the median step times (T1 {t1:.1f}, T2 {t2:.1f}, TA {ta:.1f}, TS {ts:.1f} ms): waterfall"
            f" {(t2 - ta) / (t2 - t1):.0%}, independent {(t2 - ts) / (t2 - t1):.0%}"
        )
    standalone_rows(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("ablation-check"))
    parser.add_argument("--read", type=Path, help="print the figures of an earlier --out without running")
    parser.add_argument("--standalone", type=Path, help=argparse.SUPPRESS)  # one standalone DDP loop, to this file
    args = parser.parse_args()
    if args.standalone:
        standalone(args.standalone)
        return
    if args.read:
        report(args.read)
        return
    for r in range(1, args.rounds + 1):
        run_round(args.out, r)
    report(args.out)


if __name__ == "__main__":
    main()
