"""A new workload is one folder and one registry line: a toy (tests/fixtures/toy_workload) copied into a copy of
the dlperf under test and registered with one line gets its flags from its config dataclass and runs on both
engines, each writing a record with a throughput. No other file of dlperf changes."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dlperf

SOURCES = Path(dlperf.__file__).parent
TOY = Path(__file__).parents[1] / "fixtures" / "toy_workload"
REGISTRY = "workloads/__init__.py"
ANCHOR = "WORKLOADS: dict[str, str] = {\n"
LINE = '    "toy": "dlperf.workloads.toy:ToyWorkload",\n'
SKIP = shutil.ignore_patterns("__pycache__")


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory) -> Path:
    """dlperf's sources with the toy's folder added as workloads/toy and its one line in WORKLOADS."""
    root = tmp_path_factory.mktemp("toy") / "src"
    shutil.copytree(SOURCES, root / "dlperf", ignore=SKIP)
    shutil.copytree(TOY, root / "dlperf" / "workloads" / "toy", ignore=SKIP)
    registry = root / "dlperf" / REGISTRY
    text = registry.read_text()
    assert text.count(ANCHOR) == 1
    registry.write_text(text.replace(ANCHOR, ANCHOR + LINE))
    return root


def toy_dlperf(root: Path, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "dlperf", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_the_toy_is_one_folder_and_one_line(toy_tree):
    """Every file of the copy but the registry equals the original; the registry differs by the one line."""
    changed = []
    for path in SOURCES.rglob("*.py"):
        if "__pycache__" not in path.parts and not filecmp.cmp(path, toy_tree / "dlperf" / path.relative_to(SOURCES)):
            changed.append(path.relative_to(SOURCES).as_posix())
    assert changed == [REGISTRY]
    original = (SOURCES / REGISTRY).read_text().splitlines(keepends=True)
    registered = (toy_tree / "dlperf" / REGISTRY).read_text().splitlines(keepends=True)
    assert [line for line in registered if line not in original] == [LINE]
    assert len(registered) == len(original) + 1
    added = {p.name for p in (toy_tree / "dlperf" / "workloads" / "toy").iterdir() if p.is_file()}
    assert added == {"__init__.py", "torch_step.py", "jax_step.py"}


def test_the_toy_gets_its_flags_from_its_config(toy_tree):
    done = toy_dlperf(toy_tree, ["run", "--help"])
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert (
        "--model toy:" in text and "--toy-width TOY_WIDTH input features of the toy's linear layer (default 8)" in text
    )
    bad = toy_dlperf(toy_tree, ["run", "--model", "toy", "--toy-width", "0", "--dry-run"])
    assert bad.returncode == 2 and "--toy-width: must be a positive integer, got '0'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    foreign = toy_dlperf(toy_tree, ["run", "--model", "resnet50", "--toy-width", "3", "--dry-run"])
    assert foreign.returncode == 2 and "applies to --model toy" in foreign.stderr, foreign.stderr


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["torch", "jax"])
def test_the_toy_runs_on_both_engines(toy_tree, tmp_path, engine):
    if engine == "jax":
        pytest.importorskip("flax", reason="the JAX engine needs jax, flax and optax: pip install 'dlperf[jax]'")
    args = ["run", "--model", "toy", "--engine", engine, "--toy-width", "16", "--device", "cpu",
            "--warmup-iters", "1", "--iters", "6", "--print-every", "2", "--out", str(tmp_path)]  # fmt: skip
    done = toy_dlperf(toy_tree, args, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = tmp_path.rglob(f"toy_w16_fp32_{engine}*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["model"] == "toy" and record["engine"] == engine
    assert record["config"]["toy_width"] == 16 and record["global_batch_size"] == 4 and record["throughput"] > 0
    assert record["loss_last"] < record["loss_first"]  # SGD at lr 0.05 on least squares: the loss falls
