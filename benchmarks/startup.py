"""dlperf's start-up against a bare script and torchrun of the same script, side by side (issue 55).

    python benchmarks/startup.py --rounds 4           # alternating rounds, then the medians
    python benchmarks/startup.py --rounds 1 --where   # also where dlperf's time goes (a profile of each process)
    python benchmarks/startup.py --devices 2          # two gloo ranks: dlperf against torchrun of a DDP script

Each round runs, in an order that turns with the round: `dlperf run` of a 6-step ResNet-50 at 32x32 on one CPU
thread; the same work as a bare script (`python startup.py --bare`: torch, torchvision's ResNet-50, SGD, one
synthetic batch, the same warm-up and steps); and `torchrun --nproc-per-node 1 --standalone` of that script. Each
is timed from just before its process starts to its first timed step (dlperf: its log's warm-up line, whose time
stamp is taken as the timed loop starts; the script: the stamp it prints there) and to the process's end. With
`--devices 2`, `dlperf run --devices-per-node 2` against `torchrun --nproc-per-node 2` of the script, which then
trains under DDP on gloo as dlperf's ranks do (no bare script: one process cannot be two ranks).

`--where` splits one dlperf run by its own stamps: the parent's checks and machine facts before the launch (the
record's `started_at`), the launch to the rank's timed loop (agent, torchrun's rendezvous, the rank's imports,
engine set-up, the model), the first step and the warm-up (the log's warm-up line), the timed steps and the record
after them; and, from `-X importtime` in every process (PYTHONPROFILEIMPORTTIME), the seconds each process spent
importing and its five costliest top-level imports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

BATCH, IMAGE, CLASSES, WARMUP, ITERS = 16, 32, 100, 2, 6
DLPERF = [
    "run", "--model", "resnet50", "--device", "cpu", "--batch-size", str(BATCH), "--image-size", str(IMAGE),
    "--num-classes", str(CLASSES), "--warmup-iters", str(WARMUP), "--iters", str(ITERS), "--print-every", "3",
    "--cpu-threads", "1",
]  # fmt: skip
STAMP_ENV = "STARTUP_STAMP"  # where the script writes its first timed step's time stamp
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
WARMUP_LINE = re.compile(r"warmup done iters \d+ first_step_s (\S+) elapsed_s (\S+) .*time (\S+)")


def bare() -> None:
    """The same work as the dlperf run, printing a stamp at its first timed step and at its end."""
    import torch
    from torchvision.models import resnet50

    torch.set_num_threads(1)
    model = resnet50(num_classes=CLASSES)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # several ranks under torchrun: DDP on gloo, as dlperf's
        torch.distributed.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images, labels = torch.randn(BATCH, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (BATCH,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), labels).backward()
        optimizer.step()

    for _ in range(WARMUP):
        step()
    if os.environ.get("RANK", "0") == "0":
        Path(os.environ[STAMP_ENV]).write_text(f"{time.time():.6f}")
    for _ in range(ITERS):
        step()


Stamp = Callable[[], "float | None"]  # the first timed step's time stamp, None until it is there


def timed(command: list[str], stamp: Stamp) -> tuple[float, float, float]:
    """(seconds to the first timed step, seconds of the whole process, CPU seconds of all its processes to the first
    timed step) of `command`. The CPU seconds are what a quiet machine would take to the first step, where one
    process works at a time on one thread (a loaded machine stretches the wall time, not the CPU time)."""
    start = time.time()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=ENV)
        cpu = math.nan
        while proc.poll() is None:
            if math.isnan(cpu) and stamp() is not None:
                cpu = tree_cpu_s(proc.pid)
            time.sleep(0.02)
        end = time.time()
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{command[:4]} failed: {err.read().decode(errors='replace').strip().splitlines()[-1:]}")
    return stamp() - start, end - start, cpu


def tree_cpu_s(pid: int) -> float:
    """The CPU seconds of a process and its descendants so far (the ones already reaped are their parent's)."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def stamp_file(path: Path) -> Stamp:
    def stamp() -> float | None:
        return float(path.read_text()) if path.exists() and path.stat().st_size else None

    return stamp


def dlperf_command(out: Path, devices: int) -> list[str]:
    return [sys.executable, "-m", "dlperf", *DLPERF, "--devices-per-node", str(devices), "--out", str(out),
            "--overwrite"]  # fmt: skip


def dlperf_run(out: Path, devices: int) -> tuple[float, float, float]:
    shutil.rmtree(out, ignore_errors=True)  # the last round's log would say its warm-up is done already

    def stamp() -> float | None:
        found = _warmup_stamp(out)
        return found[0] if found else None

    return timed(dlperf_command(out, devices), stamp)


def _warmup_stamp(out: Path) -> tuple[float, float, float] | None:
    """The log's warm-up line: its time stamp (the timed loop's start), the warm-up's elapsed and first step."""
    log = next(out.rglob("*.log"), None)
    line = log and re.search(WARMUP_LINE, log.read_text(encoding="utf-8"))
    return (float(line[3]), float(line[2]), float(line[1])) if line else None


def where(out: Path, devices: int) -> None:
    """One dlperf run split by its own stamps, and each process's import time."""
    env = {**ENV, "PYTHONPROFILEIMPORTTIME": "1"}
    start = time.time()
    done = subprocess.run(dlperf_command(out, devices), capture_output=True, text=True, env=env)
    end = time.time()
    record = json.loads(next(out.rglob("*.json")).read_text(encoding="utf-8"))
    stamp, warm_elapsed, first_step = _warmup_stamp(out) or (math.nan,) * 3
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


Figures = dict[str, list[tuple[float, float, float]]]  # per kind, per round: first step, whole, CPU to first step


def rounds(kinds: dict[str, Callable[[], tuple[float, float, float]]], count: int) -> Figures:
    """Every kind once a round, the order turning with the round, each round's figures printed as they come."""
    figures: Figures = {name: [] for name in kinds}
    names = list(kinds)
    for round_ in range(count):
        turn = round_ % len(names)
        for name in names[turn:] + names[:turn]:
            figures[name].append(kinds[name]())
        said = "; ".join(
            f"{name} {f:.2f} / {w:.2f} s (CPU {c:.2f} s)" for name in names for f, w, c in figures[name][-1:]
        )
        print(f"round {round_ + 1} (load {os.getloadavg()[0]:.2f}): {said}", flush=True)
    return figures


def summary(figures: Figures) -> None:
    """The medians, and dlperf's difference to each other kind: the median of the rounds' own differences (each round
    ran its kinds within a minute of each other, under about the same load)."""
    print("medians, seconds to the first timed step / of the whole process (CPU seconds to the first timed step):")
    for name, runs in figures.items():
        first, whole, cpu = (statistics.median(column) for column in zip(*runs))
        print(f"  {name:<18} {first:6.2f} / {whole:6.2f} ({cpu:.2f})")
    ours = figures["dlperf run"]
    for name, runs in list(figures.items())[1:]:
        wall = statistics.median(a[0] - b[0] for a, b in zip(ours, runs))
        cpu = statistics.median(a[2] - b[2] for a, b in zip(ours, runs))
        print(f"dlperf - {name.split()[0]}, to the first timed step: {wall:+.2f} s (CPU {cpu:+.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--where", action="store_true", help="also split one dlperf run by where its time goes")
    parser.add_argument("--devices", type=int, default=1, help="ranks per run (2: against torchrun alone)")
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        return bare()
    script = [__file__, "--bare"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.devices), "--standalone",
                *script]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        stamp = Path(tmp) / "stamp"
        ENV[STAMP_ENV] = str(stamp)

        def script_run(command: list[str]) -> tuple[float, float, float]:
            stamp.unlink(missing_ok=True)
            return timed(command, stamp_file(stamp))

        kinds = {
            "dlperf run": lambda: dlperf_run(Path(tmp) / "dlperf", args.devices),
            "bare script": lambda: script_run([sys.executable, *script]),
            "torchrun + script": lambda: script_run(torchrun),
        }
        if args.devices > 1:
            del kinds["bare script"]
        figures = rounds(kinds, args.rounds)
        summary(figures)
        if args.where:
            where(Path(tmp) / "where", args.devices)


if __name__ == "__main__":
    main()
