"""Shared helpers: the CLI in-process or as a real subprocess, and tiny ResNet-50 options."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny import FAST_XLA_COMPILE, OMP_PASSIVE

from dlperf.cli.main import main

# Every JAX process the suite starts compiles the cheap way (tiny.FAST_XLA_COMPILE); a flag given by hand is kept.
if FAST_XLA_COMPILE not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {FAST_XLA_COMPILE}".strip()
# Every torch process the suite starts lets its idle OpenMP threads sleep (tiny.OMP_PASSIVE): the suite's runs share
# two cores with the other worker's, where spinning threads waste the cores their partners wait for
os.environ.setdefault(*OMP_PASSIVE)

# ResNet-50 at 32x32: the smallest shape that exercises the whole path in seconds.
TINY = [
    "--model", "resnet50", "--image-size", "32", "--num-classes", "10", "--batch-size", "4",
    "--warmup-iters", "1", "--iters", "4", "--print-every", "2", "--device", "cpu",
]  # fmt: skip


def run_cli(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """Call the CLI in this process; returns exit code, stdout and stderr."""
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


def run_dlperf(
    args: list[str], cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a separate process (with `env` added to this one's environment)."""
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, **env} if env else None,
    )  # fmt: skip


# The longest files first, longest of all first (their seconds in all on the idle 2-core VM, fresh venv,
# `pytest --durations=0`, 2026-11-25): pytest-xdist hands out whole files in collection order (with
# --no-loadscope-reorder, pyproject.toml), so a long file started last keeps one worker busy alone
LONGEST_FIRST = (
    "test_multihost_ssh.py",  # 165 s
    "test_llama_layouts.py",  # 106.3 CPU-seconds with the GPT's layouts in its launches (2026-12-02)
    "test_tf_official.py",  # 93 s, one test
    "test_run.py",  # 119 s
    "test_evidence.py",  # 103 s
    "test_jax_parallel.py",  # 65.9 CPU-seconds with ResNet-50's JAX sweep (2026-12-02; was 161 s)
    "test_jax_engine.py",  # 57.8 CPU-seconds (2026-12-02; was 150 s)
    "test_sweep.py",  # 75 s
    "test_external_run.py",  # 64 s
    "test_run_faults.py",  # 63 s
    "test_instrument.py",  # 28 s, and the trainers' tests where CI has their interpreter
    "test_frameworks.py",  # 56 s
    "test_add_workload.py",  # 55 s at load 1 (both engines, a real maxbatch)
    "test_waterfall_runs.py",  # 39 s at load 1
    "test_trackers.py",  # 19 s at load 5, 61 s at load 12 (an mlflow server's start-up: 12 s and 31 s of it)
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
