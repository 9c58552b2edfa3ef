"""benchmarks/gpu_validate.py on the CPU: the dry run's phases fit their 9-minute budgets, the run path imports
without plotly, and the summary judges the targets from figures."""

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


def test_dry_run_prints_each_phase_within_its_budget(tmp_path: Path):
    done = _script("all", "--dry-run", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    phases = re.findall(r"^phase (\w+): (\d+) steps, budget (\d+) s", done.stdout, re.M)
    assert [p[0] for p in phases] == ["basics", "resnet", "gpt", "llama", "compile"]
    for name, steps, budget in phases:
        assert int(budget) <= 540, name  # each under 9 minutes: a 10-minute command with room to start
        listed = re.findall(r"^  \[\s*(\d+) s\] ", done.stdout.split(f"phase {name}:")[1].split("phase ")[0], re.M)
        assert len(listed) == int(steps) and sum(map(int, listed)) == int(budget)
    assert "-m dlperf peak" in done.stdout and "--data-loader dali" in done.stdout and "--engine jax" in done.stdout
    assert "--model llama --precision amp-bf16 --activation-checkpoint selective" in done.stdout
    assert not (tmp_path / "results.json").exists()  # a dry run runs nothing


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
    assert "FAIL" in table and "RuntimeError: no fp8" in table and "not run" in table
