"""dlperf's start-up against a bare script and torchrun of the same script, side by side (issue 55).

    python benchmarks/startup.py --rounds 4           # alternating rounds, then the medians
    python benchmarks/startup.py --rounds 1 --where   # also where dlperf's time goes (a profile of each process)

Each round runs, in an order that turns with the round: `dlperf run` of a 6-step ResNet-50 at 32x32 on one CPU
thread; the same work as a bare script (`python startup.py --bare`: torch, torchvision's ResNet-50, SGD, one
synthetic batch, the same warm-up and steps); and `torchrun --nproc-per-node 1 --standalone` of that script. Each
is timed from just before its process starts to its first timed step (dlperf: its log's warm-up line, whose time
stamp is taken as the timed loop starts; the script: the stamp it prints there) and to the process's end.

`--where` splits one dlperf run by its own stamps: the parent's checks and machine facts before the launch (the
record's `started_at`), the launch to the rank's timed loop (agent, torchrun's rendezvous, the rank's imports,
engine set-up, the model), the first step and the warm-up (the log's warm-up line), the timed steps and the record
after them; and, from `-X importtime` in every process (PYTHONPROFILEIMPORTTIME), the seconds each process spent
importing and its five costliest top-level imports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH, IMAGE, CLASSES, WARMUP, ITERS = 16, 32, 100, 2, 6
DLPERF = [
    "run", "--model", "resnet50", "--device", "cpu", "--batch-size", str(BATCH), "--image-size", str(IMAGE),
    "--num-classes", str(CLASSES), "--warmup-iters", str(WARMUP), "--iters", str(ITERS), "--print-every", "3",
    "--cpu-threads", "1",
]  # fmt: skip
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def bare() -> None:
    """The same work as the dlperf run, printing a stamp at its first timed step and at its end."""
    import torch
    from torchvision.models import resnet50

    torch.set_num_threads(1)
    model = resnet50(num_classes=CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images, labels = torch.randn(BATCH, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (BATCH,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()

    for _ in range(WARMUP):
        step()
    print(f"FIRST_TIMED {time.time():.6f}", flush=True)
    for _ in range(ITERS):
        step()


def timed(command: list[str], first: callable) -> tuple[float, float]:
    """(seconds to the first timed step, seconds of the whole process) of `command`."""
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env=ENV)
    end = time.time()
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {done.stderr.strip().splitlines()[-1:]}")
    return first(done.stdout) - start, end - start


def printed_stamp(stdout: str) -> float:
    return float(re.search(r"FIRST_TIMED (\S+)", stdout)[1])


def dlperf_run(out: Path) -> tuple[float, float]:
    command = [sys.executable, "-m", "dlperf", *DLPERF, "--out", str(out), "--overwrite"]
    return timed(command, lambda _: _warmup_stamp(out)[0])


def _warmup_stamp(out: Path) -> tuple[float, float, float]:
    """The log's warm-up line: its time stamp (the timed loop's start), the warm-up's elapsed and first step."""
    log = next(out.rglob("*.log")).read_text(encoding="utf-8")
    line = re.search(r"warmup done iters \d+ first_step_s (\S+) elapsed_s (\S+) .*time (\S+)", log)
    return float(line[3]), float(line[2]), float(line[1])


def where(out: Path) -> None:
    """One dlperf run split by its own stamps, and each process's import time."""
    env = {**ENV, "PYTHONPROFILEIMPORTTIME": "1"}
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "dlperf", *DLPERF, "--out", str(out), "--overwrite"],
                          capture_output=True, text=True, env=env)  # fmt: skip
    end = time.time()
    record = json.loads(next(out.rglob("*.json")).read_text(encoding="utf-8"))
    stamp, warm_elapsed, first_step = _warmup_stamp(out)
    loop_start = stamp - warm_elapsed
    phases = {
        "parent: checks, machine facts": record["started_at"] - start,
        "launch to the rank's timed loop": loop_start - record["started_at"],
        "first step": first_step,
        "rest of the warm-up": warm_elapsed - first_step,
        "timed steps and the record after": end - stamp,
    }
    print(f"where one dlperf run's {end - start:.2f} s went:")
    for name, seconds in phases.items():
        print(f"  {name:<34} {seconds:6.2f} s")
    console = next(out.rglob("*.console.txt")).read_text(encoding="utf-8", errors="replace")
    for name, text in (("parent", done.stderr), ("agent and ranks", console)):
        _imports(name, text)


def _imports(name: str, text: str) -> None:
    """The import time a process's `-X importtime` lines add up to (top-level imports only), and the costliest."""
    top = [(int(m[2]), m[3].strip()) for m in re.finditer(r"import time:\s+(\d+) \|\s+(\d+) \| (\S.*)", text)]
    total = sum(us for us, _ in top) / 1e6
    costly = ", ".join(f"{mod} {us / 1e6:.2f}" for us, mod in sorted(top, reverse=True)[:5])
    print(f"  imports, {name}: {total:.2f} s at top level ({costly})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--where", action="store_true", help="also split one dlperf run by where its time goes")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        return bare()
    script = [__file__, "--bare"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--standalone", *script]
    with tempfile.TemporaryDirectory() as tmp:
        kinds = {
            "dlperf run": lambda: dlperf_run(Path(tmp) / "dlperf"),
            "bare script": lambda: timed([sys.executable, *script], printed_stamp),
            "torchrun + script": lambda: timed(torchrun, printed_stamp),
        }
        figures: dict[str, list[tuple[float, float]]] = {name: [] for name in kinds}
        names = list(kinds)
        for round_ in range(args.rounds):
            order = names[round_ % 3 :] + names[: round_ % 3]
            for name in order:
                figures[name].append(kinds[name]())
            load = os.getloadavg()[0]
            print(f"round {round_ + 1} (load {load:.2f}): " + "; ".join(
                f"{name} {figures[name][-1][0]:.2f} / {figures[name][-1][1]:.2f} s" for name in names))  # fmt: skip
        print("medians, seconds to the first timed step / of the whole process:")
        first = {name: statistics.median(f for f, _ in figures[name]) for name in names}
        for name in names:
            whole = statistics.median(w for _, w in figures[name])
            print(f"  {name:<18} {first[name]:6.2f} / {whole:6.2f}")
        print(f"dlperf - bare {first['dlperf run'] - first['bare script']:+.2f} s, "
              f"dlperf - torchrun {first['dlperf run'] - first['torchrun + script']:+.2f} s")  # fmt: skip
        if args.where:
            where(Path(tmp) / "where")


if __name__ == "__main__":
    main()
