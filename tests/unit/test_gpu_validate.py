"""benchmarks/gpu_validate.py on the CPU: the dry run's phases fit their budgets (9 minutes; the essentials 8),
single steps are picked by name, the run path imports without plotly, and the summary judges the targets from
figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_validate.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_validate  # noqa: E402


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env=os.environ)  # fmt: skip


def _phases(stdout: str) -> dict[str, tuple[int, int, int, list[int]]]:
    """phase: (steps, budget, limit, each step's budget) from a dry run's output."""
    found = {}
    for name, steps, budget, limit in re.findall(r"^phase (\w+): (\d+) steps, budget (\d+) s .* of at most (\d+) s",
                                                 stdout, re.M):  # fmt: skip
        listed = re.findall(r"^  \[\s*(\d+) s\] ", stdout.split(f"phase {name}:")[1].split("\nphase ")[0], re.M)
        found[name] = (int(steps), int(budget), int(limit), [int(b) for b in listed])
    return found


def test_dry_run_prints_each_phase_within_its_budget(tmp_path: Path):
    done = _script("all", "--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    phases = _phases(done.stdout)
    assert list(phases) == ["basics", "resnet", "gpt", "compiled", "llama", "llama3b", "compile", "autotune_gpt",
                            "autotune_resnet"]  # fmt: skip
    for name, (steps, budget, limit, listed) in phases.items():
        assert limit == 540 and budget <= 540, name  # each under 9 minutes: a 10-minute command with room to start
        assert len(listed) == steps and sum(listed) == budget
    assert "-m dlperf peak" in done.stdout and "--data-loader dali" in done.stdout and "--engine jax" in done.stdout
    assert "--model llama --precision amp-bf16 --activation-checkpoint selective" in done.stdout
    # first compiles on an H100 get minutes: every compiled run at least 4, each autotuning test file a command
    compiled = re.findall(r"^  \[\s*(\d+) s\] \S+: .* --compile", done.stdout, re.M)
    assert len(compiled) == 6 and min(map(int, compiled)) >= 240
    assert "-k 'every_compile_mode and autotune and resnet'" in done.stdout
    names = re.findall(r"^  \[\s*\d+ s\] (\S+):", done.stdout, re.M)
    assert len(names) == len(set(names))  # results.json keys on the step's name: each once
    assert not (tmp_path / "results.json").exists()  # a dry run runs nothing


def test_essentials_fit_eight_minutes_with_the_gpu_issues_list(tmp_path: Path):
    done = _script("essentials", "--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    ((steps, budget, limit, listed),) = _phases(done.stdout).values()
    assert limit == 480 and budget == sum(listed) <= 480 and steps == 6
    lines = done.stdout.splitlines()
    assert "tests/e2e/test_cuda.py -k 'not every_compile_mode'" in lines[1]
    assert "--model resnet50 --batch-size 256" in lines[2] and "--precision amp-bf16" in lines[2]
    assert "--num-layers 24 --hidden-size 2048" in lines[3] and "--compile" not in lines[3]
    assert "--model llama" in lines[4] and "--size 1b" in lines[4] and "--compile" not in lines[4]
    assert "harness_overhead.py --device cuda" in lines[5] and "instrument_overhead.py --device cuda" in lines[6]
    for line in lines[2:5]:  # each run stops itself 5 s before its step's limit, so its record says so
        step_budget = int(re.search(r"\[\s*(\d+) s\]", line).group(1))
        assert line.endswith(f"--timeout {step_budget - 5}")


def test_single_steps_by_name_and_unknown_names_refused(tmp_path: Path):
    done = _script("all", "--only", "llama_1b_bf16_eager,resnet_fp16_dali", "--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert {name: v[0] for name, v in _phases(done.stdout).items()} == {"resnet": 1, "gpt": 1}
    bad = _script("essentials", "--only", "gpt_bf16_compile", "--dry-run")
    assert bad.returncode == 2 and "no step gpt_bf16_compile in essentials: choose from" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_benchmark_scripts_figures_are_read_back():
    harness = "round 1: ...\nmedian: dlperf 2510.00 samples/s, bare 2530.00 samples/s, ratio 0.9921 (target >= 0.99)\n"
    hook = "median: bare 812.0 us/step, hooked 815.1 us/step\nhook cost: +3.1 us per step (+0.38 % of the step)\n"
    assert gpu_validate.bench_figures(harness) == {"ratio": 0.9921}
    assert gpu_validate.bench_figures(hook) == {"cost_us": 3.1, "cost_percent": 0.38}


def test_run_path_imports_without_plotly():
    done = _script("--check-imports")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["run_path_ok"] is True


def test_summary_judges_targets_from_figures():
    def ok(**figures):
        return {"ok": True, "seconds": 1.0, "error": None, "figures": figures}

    results = {
        "resnet_fp16_eager": ok(samples_per_s=5000.0),
        "resnet_fp16_compile": ok(samples_per_s=6400.0),
        "resnet_fp16_reduce_overhead": ok(samples_per_s=7000.0),
        "resnet_fp16_dali": ok(samples_per_s=4400.0),  # 0.88 of synthetic
        "gpt_bf16_eager": ok(samples_per_s=3.0, mfu=0.50),
        "resnet_bf16_eager": ok(samples_per_s=5000.0),
        "jax_resnet_bf16": ok(samples_per_s=4600.0),  # 0.92
        "syncs_resnet_fp16": ok(syncs_per_step=0.0),
        "harness_cuda": ok(ratio=0.985),
        "hook_cuda": ok(cost_percent=0.4),
        "peak": {"ok": False, "seconds": 3.0, "error": "RuntimeError: no fp8", "figures": {}},
    }
    every = [(phase, step) for phase, steps in gpu_validate.phases(Path("/x")).items() for step in steps]
    table = gpu_validate.summary(results, every)
    verdicts = {line[:48].strip(): line.split()[-1] for line in table.split("\n\n")[1].splitlines()[1:]}
    assert verdicts["ResNet-50 amp-fp16 eager img/s"] == "met"
    assert verdicts["ResNet-50 amp-fp16 compiled img/s (best mode)"] == "met"  # the best mode counts
    assert verdicts["DALI real / synthetic"] == "MISSED"
    assert verdicts["torchvision real / synthetic"] == "open"  # not measured
    assert verdicts["GPT 1.3B bf16 MFU (best of eager, compiled)"] == "MISSED"
    assert verdicts["JAX / torch ResNet-50 bf16"] == "met"
    assert verdicts["host syncs per amp-fp16 step (ResNet, GPT)"] == "met"
    assert verdicts["harness / bare loop, ResNet-50 bf16 on the GPU"] == "MISSED"
    assert verdicts["the hook's cost, % of a GPU step"] == "met"
    assert "FAIL" in table and "RuntimeError: no fp8" in table and "not run" in table
