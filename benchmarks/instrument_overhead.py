"""What dlperf's instrumentation hook costs a script: the same PyTorch loop with and without the start-up hook,
each in its own fresh process (the hook is installed at interpreter start), rounds alternating.

    python benchmarks/instrument_overhead.py                       # CPU: a tiny MLP, the hook's worst case
    python benchmarks/instrument_overhead.py --width 1024 --batch-size 256
    python benchmarks/instrument_overhead.py --device cuda --width 4096 --batch-size 1024

The loop times itself (time.perf_counter around `--steps` optimizer steps after `--warmup` untimed ones, a device
sync at each end) and prints its mean step time; with the hook, every step also goes through torch's global
optimizer post-hook, which appends one line to the side file (written every half second). Prints each round's
step times, the medians, and the hook's cost per step in microseconds and as a share of the step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlperf.instrument import STARTUP, STEPS_VARIABLE

LOOP = """
import sys, time, torch
width, batch, warmup, steps = (int(a) for a in sys.argv[1:5])
device = sys.argv[5]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(batch, width, device=device), torch.randint(0, 10, (batch,), device=device)
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
def step():
    optimizer.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
for _ in range(warmup):
    step()
sync()
start = time.perf_counter()
for _ in range(steps):
    step()
sync()
print((time.perf_counter() - start) / steps)
"""


def one_round(args: argparse.Namespace, hooked: bool, folder: Path) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", STEPS_VARIABLE)}
    env["OMP_NUM_THREADS"] = str(args.threads)
    if hooked:
        env.update({"PYTHONPATH": str(STARTUP), STEPS_VARIABLE: str(folder / "bench.steps")})
    argv = [sys.executable, "-c", LOOP, str(args.width), str(args.batch_size), str(args.warmup), str(args.steps),
            args.device]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


class _Batch:
    shape = (16, 64)


class _Optimizer:
    """What the hook reads of an optimizer: its param groups (two, as the usual decay / no-decay split)."""

    param_groups = ({"params": [object(), object()]}, {"params": [object()]})


def hook_cost_us(calls: int = 200_000) -> float:
    """What one update costs inside the hook: torch's global post-hook dispatch aside, a batch counted (the
    DataLoader's `(x, y)`), the update's groups noted (closing the one before: a stamp, a line appended, a write
    every half second), timed over many calls into a scratch side file."""
    import importlib.util

    with tempfile.TemporaryDirectory() as folder:
        os.environ[STEPS_VARIABLE] = str(Path(folder, "micro.steps"))
        try:
            spec = importlib.util.spec_from_file_location("dlperf_hook_bench", STARTUP / "sitecustomize.py")
            hook = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(hook)
        finally:
            del os.environ[STEPS_VARIABLE]
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "_AfterImport"]
        steps, batch, optimizer = hook.STEPS, (_Batch(), _Batch()), _Optimizer()
        start = time.perf_counter()
        for _ in range(calls):
            steps.count(batch)
            keys = [(id(optimizer), id(group["params"][0])) for group in optimizer.param_groups if group["params"]]
            steps.stepped_groups(keys)
        steps.exit()
        return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of both (one: less noise)")
    args = parser.parse_args()
    print(f"the hook's own work per step, in process: {hook_cost_us():.2f} us")
    times: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.rounds):
            for hooked in (False, True) if i % 2 == 0 else (True, False):
                times[hooked].append(one_round(args, hooked, Path(folder)))
                Path(folder, "bench.steps.rank0").unlink(missing_ok=True)
            print(
                f"round {i + 1}: bare {times[False][-1] * 1e6:.1f} us/step, hooked {times[True][-1] * 1e6:.1f} us/step"
            )
    bare, hooked = statistics.median(times[False]), statistics.median(times[True])
    print(f"median: bare {bare * 1e6:.1f} us/step, hooked {hooked * 1e6:.1f} us/step")
    print(f"hook cost: {(hooked - bare) * 1e6:+.1f} us per step ({(hooked / bare - 1) * 100:+.2f} % of the step)")


if __name__ == "__main__":
    main()
