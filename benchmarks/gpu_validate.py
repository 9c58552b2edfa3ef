"""Every GPU path of dlperf on one GPU, in phases that each fit a 10-minute command (no network needed).

    # no install needed: the steps run this checkout's src/ (docs/benchmarks.md: the offline install)
    python benchmarks/gpu_validate.py essentials --out gpu_validation      # first, in any lease: at most 8 min
    python benchmarks/gpu_validate.py basics --out gpu_validation
    python benchmarks/gpu_validate.py llama --out gpu_validation           # float8: torchao installed
    python benchmarks/gpu_validate.py gpt --only jax_gpt_bf16 --out gpu_validation   # one step again
    python benchmarks/gpu_validate.py all --dry-run     # the commands and time budgets, on any machine

Phases (budgets are each step's timeout; a phase's sum stays under 9 minutes, `essentials` under 8, so that a
15-minute lease holds the machine's start-up, the essentials and a rerun of what failed):
- `essentials`: the CUDA tests but the compile-mode ones (tests/e2e/test_cuda.py), ResNet-50 bf16 eager at batch
  256, the 1.3B GPT bf16 eager, Llama 3.2 1B bf16 eager, dlperf's loop against a bare loop on the GPU
  (harness_overhead.py) and the start-up hook's cost on a GPU step (instrument_overhead.py);
- `basics`: the run path imports without the packages only dlperf's full install brings (plotly, import-linter),
  NVML against torch's view (CUDA_VISIBLE_DEVICES, UUIDs, our PID in NVML's process list), `dlperf env`,
  `dlperf peak` (its file feeds `mfu_measured` of every later step), host syncs per amp-fp16 step, and the CUDA
  tests;
- `resnet`: ResNet-50 at batch 256 (channels-last): amp-fp16, amp-bf16 and fp32 (TF32) eager, real data from a
  generated JPEG folder through torchvision and through DALI, and the JAX engine;
- `gpt`: the 1.3B GPT and Llama 3.2 1B at bf16, eager, on torch and JAX (selective remat);
- `compiled`, `llama`, `llama3b`: ResNet-50 amp-fp16 and the GPT compiled (default mode); Llama 3.2 1B (sequence
  8192) compiled, also with torchao's float8 (compute capability 8.9+); Llama 3.2 3B (sequence 4096, selective
  checkpointing) compiled; ResNet-50 with CUDA graphs (reduce-overhead). Each limit is about twice an H100's first
  compile (inductor compiles every graph once; CUDA graphs are captured on top);
- `compile`, `autotune_gpt`, `autotune_resnet`: tests/e2e/test_cuda.py's every-compile-mode tests; max-autotune
  benchmarks Triton templates for every matmul and convolution shape, minutes on a first compile, so each
  workload's two autotuning modes have a command of their own.
`--only STEP[,STEP]` keeps those steps of the phase (a rerun after a fix); `all` is every phase but `essentials`.

Each step's command, exit status, first error line and figures go to OUT/<phase>/<step>.log and OUT/results.json
(merged across phases); the phase ends with one fixed table of every step and target, and exits 1 if a step failed.
Targets (one H100): ResNet-50 synthetic >= 4,700 img/s eager and > 6,500 compiled; real data >= 90 % of synthetic;
GPT 1.3B bf16 MFU >= 55 %; JAX within 10 % of torch; Llama 1B bf16 MFU (6N + 12LHQT) > 30 % (torchtitan publishes
33-39 % for the 8B on 8 H100s, none for 1B or 3B); dlperf / bare loop >= 0.99; the hook under 1 % of a step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable
DLPERF_RUN = [PY, "-m", "dlperf", "run", "--device", "cuda", "--overwrite"]
RESNET_BASE = ["--model", "resnet50", "--batch-size", "256", "--warmup-iters", "20", "--iters", "60",
               "--print-every", "20"]  # fmt: skip
RESNET = [*RESNET_BASE, "--channels-last"]  # a PyTorch setting (JAX lays images out NHWC already)
GPT_1_3B = ["--model", "gpt", "--num-layers", "24", "--hidden-size", "2048", "--num-heads", "16", "--seq-length",
            "2048", "--micro-batch-size", "8", "--precision", "amp-bf16", "--warmup-iters", "5", "--iters", "20",
            "--print-every", "10"]  # fmt: skip
LLAMA = ["--model", "llama", "--precision", "amp-bf16", "--activation-checkpoint", "selective", "--warmup-iters", "5",
         "--iters", "20", "--print-every", "10"]  # fmt: skip
LLAMA_1B = [*LLAMA, "--size", "1b", "--micro-batch-size", "2"]
LLAMA_3B = [*LLAMA, "--size", "3b", "--seq-length", "4096", "--compile"]
PHASE_LIMIT_S = 540  # one phase is one command of at most 10 minutes: its steps' budgets sum to 9 at most
ESSENTIALS_LIMIT_S = 480  # the first thing a 15-minute GPU lease runs, start-up and a rerun of a failed step beside
JPEG_IMAGES = 4096
# this checkout's dlperf first, installed or not (a GPU machine without a package index may have no install of it)
SOURCE = os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
WORKERS = max(1, (os.cpu_count() or 2) - 2)  # decoding processes for torchvision: all cores but the run's own


@dataclass(frozen=True)
class Step:
    """One command of a phase; `record` names the dlperf run whose record gives its figures."""

    name: str
    argv: list[str]
    budget_s: int
    record: bool = False


@dataclass
class Outcome:
    name: str
    ok: bool
    seconds: float
    error: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)


def _run(name: str, args: list[str], out: Path, budget: int) -> Step:
    timeout = str(budget - 5)  # the run stops itself first, and its record says so
    return Step(name, [*DLPERF_RUN, *args, "--out", str(out / "runs" / name), "--timeout", timeout], budget, True)


def _self(name: str, args: list[str], budget: int) -> Step:
    return Step(name, [PY, str(Path(__file__).resolve()), *args], budget)


def _bench(name: str, script: str, args: list[str], budget: int) -> Step:
    """One of benchmarks/'s side-by-side scripts; its last figure line is read back by `bench_figures`."""
    return Step(name, [PY, str(HERE / script), *args], budget)


def _cuda_tests(name: str, selection: str, budget: int) -> Step:
    """tests/e2e/test_cuda.py's tests that `selection` (pytest's -k) picks, in one process: the GPU machine has
    no pytest-xdist (no package index there), and the CUDA tests should not share the one GPU anyway."""
    test_file = str(ROOT / "tests" / "e2e" / "test_cuda.py")
    serial = ["-o", "addopts=", "-p", "no:xdist", "-p", "no:cacheprovider"]
    return Step(name, [PY, "-m", "pytest", "-q", "-rA", test_file, "-k", selection, *serial], budget)


def phases(out: Path) -> dict[str, list[Step]]:
    """Every phase's steps. A step name means one command wherever it appears (results.json keys on it), so
    `essentials` repeats some steps of the other phases, and `all` runs each step once."""
    jpegs = out / "jpegs"
    # the essentials' steps, also in the phases they belong to: each `dlperf run` spends 15-20 s on a GPU machine
    # before its first step (three processes import torch, `nvidia-smi topo -m`, CUDA's start-up)
    cuda_tests = _cuda_tests("cuda_tests", "not every_compile_mode", 175)
    resnet_bf16 = _run("resnet_bf16_eager", [*RESNET, "--precision", "amp-bf16"], out, 50)
    gpt_eager = _run("gpt_bf16_eager", GPT_1_3B, out, 65)
    llama_eager = _run("llama_1b_bf16_eager", LLAMA_1B, out, 65)
    return {
        "essentials": [
            cuda_tests,
            resnet_bf16,
            gpt_eager,
            llama_eager,
            _bench(
                "harness_cuda",
                "harness_overhead.py",
                [
                    "--device",
                    "cuda",
                    "--image-size",
                    "224",
                    "--batch-size",
                    "128",
                    "--precision",
                    "amp-bf16",
                    "--rounds",
                    "2",
                ],
                50,
            ),  # fmt: skip
            _bench(
                "hook_cuda",
                "instrument_overhead.py",
                [
                    "--device",
                    "cuda",
                    "--width",
                    "4096",
                    "--batch-size",
                    "1024",
                    "--warmup",
                    "100",
                    "--steps",
                    "500",
                    "--rounds",
                    "2",
                ],
                60,
            ),  # fmt: skip
        ],
        "basics": [
            _self("imports", ["--check-imports"], 30),
            _self("nvml", ["--check-nvml"], 30),
            Step("env", [PY, "-m", "dlperf", "env", "--json"], 20),
            Step(
                "peak",
                [
                    PY,
                    "-m",
                    "dlperf",
                    "peak",
                    "--dtypes",
                    "tf32,bf16,fp16,fp8",
                    "--iters",
                    "10",
                    "--out",
                    str(out / "peaks.json"),
                    "--json",
                ],
                90,
            ),  # fmt: skip
            _self("syncs_resnet_fp16", ["--count-syncs", "resnet50"], 45),
            _self("syncs_gpt_fp16", ["--count-syncs", "gpt"], 45),
            cuda_tests,
        ],
        "resnet": [
            _self("jpegs", ["--make-jpegs", str(jpegs)], 30),
            _run("resnet_fp16_eager", [*RESNET, "--precision", "amp-fp16"], out, 60),
            resnet_bf16,
            _run("resnet_fp32_eager", [*RESNET, "--precision", "fp32"], out, 60),
            _run(
                "resnet_fp16_torchvision",
                [*RESNET, "--precision", "amp-fp16", "--data", str(jpegs), "--workers", str(WORKERS)],
                out,
                45,
            ),  # fmt: skip
            _run(
                "resnet_fp16_dali",
                [*RESNET, "--precision", "amp-fp16", "--data", str(jpegs), "--data-loader", "dali", "--workers", "4"],
                out,
                45,
            ),  # fmt: skip
            _run("jax_resnet_bf16", [*RESNET_BASE, "--engine", "jax", "--precision", "amp-bf16"], out, 120),
        ],
        "gpt": [
            gpt_eager,
            _run("jax_gpt_bf16", [*GPT_1_3B, "--engine", "jax"], out, 150),
            llama_eager,
            _run("jax_llama_1b_bf16", [*LLAMA_1B, "--engine", "jax"], out, 150),
        ],
        # first compiles on an H100: inductor compiles each graph once (ResNet-50's forward and backward, a Llama
        # block), then CUDA graphs or autotuning come on top; each limit is about twice the expected time
        "compiled": [
            _run("resnet_fp16_compile", [*RESNET, "--precision", "amp-fp16", "--compile"], out, 240),
            _run("gpt_bf16_compile", [*GPT_1_3B, "--compile"], out, 270),
        ],
        "llama": [
            _run("llama_1b_bf16_compile", [*LLAMA_1B, "--compile"], out, 270),
            _run("llama_1b_float8_compile", [*LLAMA_1B, "--compile", "--float8"], out, 270),
        ],
        "llama3b": [
            _run("llama_3b_bf16_compile", LLAMA_3B, out, 270),
            _run(
                "resnet_fp16_reduce_overhead",
                [*RESNET, "--precision", "amp-fp16", "--compile", "--compile-mode", "reduce-overhead"],
                out,
                270,
            ),  # fmt: skip
        ],
        # tests/e2e/test_cuda.py's compile modes, both workloads, in three leases' worth of commands: max-autotune
        # benchmarks Triton templates for every matmul and convolution shape, several minutes on a first compile
        "compile": [_cuda_tests("compile_mode_tests", "every_compile_mode and not autotune", 540)],
        "autotune_gpt": [_cuda_tests("autotune_gpt_tests", "every_compile_mode and autotune and gpt", 540)],
        "autotune_resnet": [_cuda_tests("autotune_resnet_tests", "every_compile_mode and autotune and resnet", 540)],
    }


# -- figures and targets ------------------------------------------------------------------------------------------
def record_figures(folder: Path) -> dict[str, Any]:
    records = [json.loads(p.read_text()) for p in sorted(folder.rglob("*.json")) if p.name != "summary.json"]
    records = [r for r in records if "throughput" in r]
    if not records:
        return {}
    r = records[0]
    energy = r.get("energy") or {}
    return {
        "samples_per_s": r.get("throughput"),
        "tokens_per_s": r.get("tokens_per_s"),
        "mfu": r.get("mfu"),
        "mfu_measured": r.get("mfu_measured"),
        "joules_per_sample": energy.get("joules_per_sample"),
        "energy_note": energy.get("reason"),
        "reserved_mib": (r.get("peak_memory_mib") or {}).get("reserved"),
        "tf32": r.get("tf32"),
        "noisy": r.get("noisy"),
        "compile_s": r.get("compile_s"),
    }


def _figure(results: dict[str, dict], step: str, key: str = "samples_per_s") -> float | None:
    return ((results.get(step) or {}).get("figures") or {}).get(key)


def _ratio(results: dict[str, dict], top: str, bottom: str) -> float | None:
    a, b = _figure(results, top), _figure(results, bottom)
    return a / b if a and b else None


Target = tuple[str, Callable[[dict[str, dict]], float | None], Callable[[float], bool], str]
TARGETS: list[Target] = [
    ("ResNet-50 amp-fp16 eager img/s", lambda r: _figure(r, "resnet_fp16_eager"), lambda v: v >= 4700, ">= 4,700"),
    (
        "ResNet-50 amp-fp16 compiled img/s (best mode)",
        lambda r: max(
            filter(None, [_figure(r, "resnet_fp16_compile"), _figure(r, "resnet_fp16_reduce_overhead")]), default=None
        ),
        lambda v: v > 6500,
        "> 6,500",
    ),  # fmt: skip
    (
        "torchvision real / synthetic",
        lambda r: _ratio(r, "resnet_fp16_torchvision", "resnet_fp16_eager"),
        lambda v: v >= 0.9,
        ">= 0.90",
    ),  # fmt: skip
    (
        "DALI real / synthetic",
        lambda r: _ratio(r, "resnet_fp16_dali", "resnet_fp16_eager"),
        lambda v: v >= 0.9,
        ">= 0.90",
    ),  # fmt: skip
    (
        "GPT 1.3B bf16 MFU (best of eager, compiled)",
        lambda r: max(
            filter(None, [_figure(r, "gpt_bf16_eager", "mfu"), _figure(r, "gpt_bf16_compile", "mfu")]), default=None
        ),
        lambda v: v >= 0.55,
        ">= 0.55",
    ),  # fmt: skip
    (
        "Llama 3.2 1B bf16 compiled MFU (6N + 12LHQT)",
        lambda r: _figure(r, "llama_1b_bf16_compile", "mfu"),
        lambda v: v > 0.30,
        "> 0.30",
    ),  # fmt: skip
    (
        "JAX / torch ResNet-50 bf16",
        lambda r: _ratio(r, "jax_resnet_bf16", "resnet_bf16_eager"),
        lambda v: abs(v - 1) <= 0.1,
        "0.90 - 1.10",
    ),  # fmt: skip
    (
        "JAX / torch GPT 1.3B bf16",
        lambda r: _ratio(r, "jax_gpt_bf16", "gpt_bf16_eager"),
        lambda v: abs(v - 1) <= 0.1,
        "0.90 - 1.10",
    ),  # fmt: skip
    (
        "host syncs per amp-fp16 step (ResNet, GPT)",
        lambda r: max(
            filter(
                lambda v: v is not None,
                [_figure(r, "syncs_resnet_fp16", "syncs_per_step"), _figure(r, "syncs_gpt_fp16", "syncs_per_step")],
            ),
            default=None,
        ),
        lambda v: v == 0,
        "0",
    ),  # fmt: skip
    (
        "harness / bare loop, ResNet-50 bf16 on the GPU",
        lambda r: _figure(r, "harness_cuda", "ratio"),
        lambda v: v >= 0.99,
        ">= 0.99",
    ),  # fmt: skip
    ("the hook's cost, % of a GPU step", lambda r: _figure(r, "hook_cuda", "cost_percent"), lambda v: v < 1, "< 1"),
]


def summary(results: dict[str, dict], all_steps: list[tuple[str, Step]]) -> str:
    """One fixed table: every step of every phase (not run yet: says so), then every target."""
    lines = [f"{'phase':15} {'step':30} {'result':8} {'s':>6}  figures / first error"]
    for phase, step in all_steps:
        got = results.get(step.name)
        if got is None:
            lines.append(f"{phase:15} {step.name:30} {'not run':8} {'':>6}")
            continue
        figures = got.get("figures") or {}
        text = ", ".join(f"{k}={_short(v)}" for k, v in figures.items() if v is not None)
        detail = text if got["ok"] else f"{got.get('error')}"
        lines.append(f"{phase:15} {step.name:30} {'pass' if got['ok'] else 'FAIL':8} {got['seconds']:6.0f}  {detail}")
    lines += ["", f"{'target':48} {'measured':>10} {'goal':>12}  verdict"]
    for title, measure, check, goal in TARGETS:
        value = measure(results)
        verdict = "open" if value is None else ("met" if check(value) else "MISSED")
        lines.append(f"{title:48} {'' if value is None else _short(value):>10} {goal:>12}  {verdict}")
    return "\n".join(lines)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# -- running ------------------------------------------------------------------------------------------------------
def first_error(text: str) -> str:
    keys = ("Error", "error:", "FAILED", "Traceback", "failed")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in lines:
        if any(k in line for k in keys) and not line.startswith("Traceback"):
            return line[:300]
    return lines[-1][:300] if lines else "no output"


BENCH_FIGURES = {
    "ratio": re.compile(r"^median: dlperf .* ratio ([0-9.]+)", re.M),  # harness_overhead.py
    "cost_us": re.compile(r"^hook cost: ([-+0-9.]+) us per step", re.M),  # instrument_overhead.py
    "cost_percent": re.compile(r"^hook cost: .*\(([-+0-9.]+) % of the step\)", re.M),
}


def bench_figures(stdout: str) -> dict[str, float]:
    """The figures benchmarks/'s scripts print on their last lines."""
    return {key: float(m.group(1)) for key, pattern in BENCH_FIGURES.items() if (m := pattern.search(stdout))}


def run_step(step: Step, log: Path, env: dict[str, str]) -> Outcome:
    started = time.perf_counter()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(step.argv, capture_output=True, text=True, timeout=step.budget_s, env=env, cwd=ROOT)
        code, stdout, text = done.returncode, done.stdout, done.stdout + "\n" + done.stderr
    except subprocess.TimeoutExpired as expired:
        code, stdout = None, ""
        streams = (expired.stdout, expired.stderr)
        parts = [p.decode(errors="replace") if isinstance(p, bytes) else (p or "") for p in streams]
        text = "\n".join([*parts, f"over its budget of {step.budget_s} s"])
    seconds = time.perf_counter() - started
    log.write_text(f"$ {shlex.join(step.argv)}\nexit {code}, {seconds:.1f} s\n\n{text}", encoding="utf-8")
    figures: dict[str, Any] = {}
    if step.record:
        figures = record_figures(Path(step.argv[step.argv.index("--out") + 1]))
    elif code == 0 and stdout.strip() and stdout.strip().splitlines()[-1].startswith("{"):
        figures = json.loads(stdout.strip().splitlines()[-1])  # this script's checks print their figures last
    elif code == 0:
        figures = bench_figures(stdout)
    ok = code == 0
    error = None if ok else (f"over its budget of {step.budget_s} s" if code is None else first_error(text))
    return Outcome(step.name, ok, seconds, error, figures)


def run_phase(name: str, steps: list[Step], out: Path) -> int:
    """Run `steps` of phase `name`, merging their outcomes into OUT/results.json; 1 where one failed."""
    table = phases(out)
    env = {**os.environ, "DLPERF_PEAKS": str(out / "peaks.json"), "PYTHONUNBUFFERED": "1", "PYTHONPATH": SOURCE}
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    failed = 0
    for step in steps:
        print(f"[{name}] {step.name} (budget {step.budget_s} s) ...", flush=True)
        outcome = run_step(step, out / name / f"{step.name}.log", env)
        results[step.name] = outcome.__dict__
        failed += not outcome.ok
        print(f"  {'pass' if outcome.ok else 'FAIL'} in {outcome.seconds:.0f} s" +
              ("" if outcome.ok else f": {outcome.error}"), flush=True)  # fmt: skip
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=2))
    seen: set[str] = set()
    every = [(phase, step) for phase, steps_ in table.items() for step in steps_
             if not (step.name in seen or seen.add(step.name))]  # fmt: skip
    print("\n" + summary(results, every))
    return 1 if failed else 0


def limit_s(name: str) -> int:
    return ESSENTIALS_LIMIT_S if name == "essentials" else PHASE_LIMIT_S


def dry_run(chosen: list[tuple[str, list[Step]]]) -> None:
    """Each phase's commands and its budget (the sum of its steps' limits) against the phase's limit."""
    for name, steps in chosen:
        budget = sum(step.budget_s for step in steps)
        print(f"phase {name}: {len(steps)} steps, budget {budget} s ({budget / 60:.1f} min) of at most "
              f"{limit_s(name)} s ({limit_s(name) / 60:.0f} min)")  # fmt: skip
        for step in steps:
            print(f"  [{step.budget_s:4d} s] {step.name}: {shlex.join(step.argv)}")


# -- the checks this script runs itself (each prints its figures as a JSON line last) -----------------------------
def check_imports() -> None:
    """The run path over a framework image: every module a run, sweep or report (md) loads, with no plotly."""
    import importlib
    import importlib.util

    modules = ["dlperf.cli.main", "dlperf.harness.worker", "dlperf.orchestration.sweep_plan", "dlperf.reporting.report",
               "dlperf.engines.torch.engine", "dlperf.workloads.resnet.torch_step", "dlperf.workloads.gpt.torch_step",
               "dlperf.metrics.energy", "dlperf.metrics.noise"]  # fmt: skip
    for module in modules:
        importlib.import_module(module)
    leaked = [m for m in ("plotly", "importlinter") if m in sys.modules]
    if leaked:
        raise SystemExit(f"the run path imported {', '.join(leaked)}, which the GPU image lacks")
    optional = {m: importlib.util.find_spec(m) is not None for m in ("plotly", "jax", "nvidia.dali", "pynvml")}
    print(json.dumps({"run_path_ok": True, **{f"has_{k.replace('.', '_')}": v for k, v in optional.items()}}))


def check_nvml() -> None:
    """NVML's device for each torch device (by UUID), and whether our PID is in NVML's process list (containers)."""
    import pynvml
    import torch

    from dlperf.engines.torch.engine import TorchEngine
    from dlperf.machine.gpus import nvml_handles, others_on_gpus, visible_gpu_ids

    torch.ones(1, device="cuda")  # a context, so that NVML lists this process
    engine = TorchEngine()
    engine.device = torch.device("cuda", 0)
    ids = visible_gpu_ids(torch.cuda.device_count(), engine.device_uuids())
    pynvml.nvmlInit()
    try:
        handles = nvml_handles(pynvml, ids)
        names = [pynvml.nvmlDeviceGetName(h) for h in handles]
        names = [n.decode() if isinstance(n, bytes) else n for n in names]
        if names[0] != torch.cuda.get_device_name(0):
            raise SystemExit(f"NVML's device {names[0]!r} is not torch's {torch.cuda.get_device_name(0)!r}")
        listed = [{"device": 0, "pid": p.pid} for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handles[0])]
        others, note = others_on_gpus(listed, {os.getpid()})
        energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(handles[0])
    finally:
        pynvml.nvmlShutdown()
    print(json.dumps({"device": names[0], "ids": [str(i) for i in ids], "cuda_visible_devices":
                      os.environ.get("CUDA_VISIBLE_DEVICES"), "own_pid_listed": note is None,
                      "other_processes": others, "pid_note": note, "energy_counter_mj": energy}))  # fmt: skip


def count_syncs(model: str) -> None:
    """Host syncs per amp-fp16 step of the model at a small real shape (0 is the goal)."""
    import torch

    from dlperf.engines.base import RankEnv
    from dlperf.engines.torch.engine import TorchEngine
    from dlperf.engines.torch.syncs import host_syncs_per_step
    from dlperf.workloads import check_spec, get_workload, spec_from_mapping

    shape = (
        {"batch_size": 64, "channels_last": True}
        if model == "resnet50"
        else {"num_layers": 4, "hidden_size": 1024, "num_heads": 16, "seq_length": 1024, "micro_batch_size": 4}
    )
    spec = spec_from_mapping({"model": model, "device": "cuda", "precision": "amp-fp16", **shape})
    engine = TorchEngine()
    engine.setup(spec, RankEnv(0, 1, 0, 1))
    step = get_workload(model).builder("torch")(spec, check_spec(spec), engine)
    for _ in range(3):
        step.run()
    torch.cuda.synchronize()
    per_step, first = host_syncs_per_step(step.run, steps=5)
    print(json.dumps({"syncs_per_step": per_step, "first_sync": first}))
    if per_step:
        raise SystemExit(f"{per_step:g} host syncs per step; first: {first}")


def make_jpegs(folder: str) -> None:
    """A small ImageNet-style folder (sizes and decode costs near photographs'), through resnet_speed's writer."""
    sys.path.insert(0, str(HERE))
    from resnet_speed import generated_folder

    cache = Path(f"{folder}.cache")
    args = argparse.Namespace(batch_size=256, iters=60, data_images=JPEG_IMAGES, num_classes=100, data_min_size=224,
                              data_max_size=400, seed=0, data_cache=str(cache))  # fmt: skip
    root = generated_folder(args)
    link = Path(folder)  # the runs read `folder`: its class folders are the generated set's
    link.mkdir(parents=True, exist_ok=True)
    for child in sorted(root.iterdir()):
        if child.is_dir() and not (link / child.name).exists():
            (link / child.name).symlink_to(child)
    print(json.dumps({"folder": str(root), "images": JPEG_IMAGES}))


def choose(phase: str, only: list[str] | None, out: Path) -> list[tuple[str, list[Step]]]:
    """The phases to run and their steps: `all` is every phase but `essentials` (its steps are theirs); `only`
    keeps the steps of those names (in the phases chosen), each step once."""
    table = phases(out)
    names = [name for name in table if name != "essentials"] if phase == "all" else [phase]
    known = {step.name for name in names for step in table[name]}
    unknown = [name for name in only or [] if name not in known]
    if unknown:
        raise ValueError(f"no step {', '.join(unknown)} in {phase}: choose from {', '.join(sorted(known))}")
    seen: set[str] = set()
    chosen = []
    for name in names:
        steps = [s for s in table[name] if (only is None or s.name in only) and s.name not in seen]
        seen.update(s.name for s in steps)
        if steps:
            chosen.append((name, steps))
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("phase", nargs="?", choices=[*phases(Path(".")), "all"])
    parser.add_argument("--out", default="gpu_validation", help="folder for logs, records and results.json")
    parser.add_argument("--only", metavar="STEP[,STEP]", help="run only these steps of the phase (a rerun)")
    parser.add_argument("--dry-run", action="store_true", help="print each phase's commands and budgets only")
    parser.add_argument("--check-imports", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check-nvml", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count-syncs", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--make-jpegs", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_imports:
        check_imports()
    elif args.check_nvml:
        check_nvml()
    elif args.count_syncs:
        count_syncs(args.count_syncs)
    elif args.make_jpegs:
        make_jpegs(args.make_jpegs)
    elif args.phase is None:
        parser.error(f"give a phase: {', '.join(phases(Path('.')))} or all")
    else:
        out = Path(args.out).resolve()
        try:
            chosen = choose(args.phase, args.only.split(",") if args.only else None, out)
        except ValueError as error:
            parser.error(str(error))
        if args.dry_run:
            dry_run(chosen)
            return 0
        status = 0
        for name, steps in chosen:
            status |= run_phase(name, steps, out)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
