"""A new workload is one folder and one registry line: a toy (tests/fixtures/toy_workload) copied into a copy of
the dlperf under test and registered with one line gets its flags from its config dataclass, runs on both engines
(each writing a record with a throughput, reported under its title), sweeps with its CPU estimate said, has its
batch searched by maxbatch, lends its names and speed bound to the reports and extract, and is predicted at scale
by its own predictor module. No other file of dlperf changes."""

from __future__ import annotations

import filecmp
import importlib.util
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
    assert added == {"__init__.py", "torch_step.py", "jax_step.py", "predict.py"}


def test_the_toy_gets_its_flags_from_its_config(toy_tree):
    done = toy_dlperf(toy_tree, ["run", "--help"])
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert (
        "--model toy:" in text and "--toy-width TOY_WIDTH input features of the toy's linear layer (default 8)" in text
    )
    bad = toy_dlperf(toy_tree, ["run", "--model", "toy", "--toy-width", "0", "--dry-run"])
    assert bad.returncode == 2 and "--toy-width: must be a positive integer, got 0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    foreign = toy_dlperf(toy_tree, ["run", "--model", "resnet50", "--toy-width", "3", "--dry-run"])
    assert foreign.returncode == 2 and "applies to --model toy" in foreign.stderr, foreign.stderr


def test_the_toy_is_predicted_by_its_own_predictor(toy_tree):
    """`dlperf predict --model toy` takes the toy's flags from its config and prints what its predictor module says
    (3 x 2·w FLOPs per sample at H100 SXM's fitted rate), the same setting flags as Llama's; Llama's is unchanged."""
    base = ["predict", "--model", "toy", "--accelerator", "H100 SXM", "--efficiency", "0.5", "--nodes", "2"]
    done = toy_dlperf(toy_tree, [*base, "--toy-width", "16"])
    assert done.returncode == 0, done.stderr
    rate = 989.4e12 * 0.5  # the data sheet's dense bf16 peak at the efficiency given
    assert done.stdout.strip() == f"toy width 16 on 16 x H100 SXM: {6 * 16 * 4 / rate:.3g} s per step"
    got = json.loads(toy_dlperf(toy_tree, [*base, "--toy-batch", "2", "--json"]).stdout)
    assert got == {"step_s": pytest.approx(6 * 8 * 2 / rate), "devices": 16, "accelerator": "H100 SXM"}
    helped = " ".join(toy_dlperf(toy_tree, ["predict", "--help"]).stdout.split())
    from dlperf.workloads import predictors

    assert "--model toy: --toy-width TOY_WIDTH" in helped and f"--model {{toy,{','.join(predictors())}}}" in helped
    llama = toy_dlperf(toy_tree, ["predict", "--model", "llama", "--size", "8b", "--accelerator", "H100 SXM"])
    assert llama.returncode == 0 and "Llama 32 layers x 4096" in llama.stdout, llama.stderr


def test_the_toy_declares_its_names_and_speed_bound(toy_tree):
    """What reports and extract read through the registry, without running anything: the batch maxbatch varies,
    the names other frameworks give the toy, and its plausible speed."""
    code = (
        "from dlperf.reporting.sources import canonical_model; from dlperf.workloads import plausible_work, "
        "searched_batch; print(searched_batch('toy'), canonical_model('Toy-Model'), canonical_model('toyV1'), "
        "plausible_work())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(toy_tree)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 3)[:3] == ["toy_batch", "toy", "toy"]
    assert "PlausibleWork(what='a toy sample', name_parts=('toy',), flops_per_sample=1000.0)" in done.stdout


@pytest.mark.slow
def test_the_toy_sweeps_on_both_engines_with_its_estimate(toy_tree, tmp_path):
    """One sweep of the toy on each engine (the JAX one where flax is installed): its CPU estimate said, each record
    with a throughput and a falling loss, the sweep's report under the toy's title."""
    engines = ["torch", *(["jax"] if importlib.util.find_spec("flax") else [])]
    config = tmp_path / "toy.yaml"
    config.write_text(
        "model: toy\ndevice: cpu\nwarmup_iters: 1\niters: 6\nprint_every: 2\nrepeats: 1\ntoy_width: 16\n"
        f"matrix: [{', '.join(f'{{engine: {engine}}}' for engine in engines)}]\n"
    )
    out = tmp_path / "out"
    done = toy_dlperf(toy_tree, ["sweep", str(config), "--out", str(out)], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "estimate: toy 1n1g w16_fp32_torch at width 16 takes about" in done.stdout
    assert "for a quick look use --toy-width 2" in done.stdout
    for engine in engines:
        (path,) = out.rglob(f"toy_w16_fp32_{engine}*.json")
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["model"] == "toy" and record["engine"] == engine
        assert record["config"]["toy_width"] == 16 and record["global_batch_size"] == 4 and record["throughput"] > 0
        assert record["loss_last"] < record["loss_first"]  # SGD at lr 0.05 on least squares: the loss falls
    text = (out / "report.md").read_text()
    assert "## Toy least squares" in text and "(Toy least squares: 2·w per sample, forward)" in text


@pytest.mark.slow
def test_maxbatch_searches_the_toy_batch(toy_tree, tmp_path):
    """Two real probes, each a fresh `dlperf run` at --toy-batch 2 and 4: both fit, the ceiling is said."""
    args = ["maxbatch", "--model", "toy", "--device", "cpu", "--warmup-iters", "1", "--iters", "2",
            "--print-every", "1", "--start", "2", "--max-batch", "4", "--out", str(tmp_path)]  # fmt: skip
    done = toy_dlperf(toy_tree, args, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "| 2 | yes | ok |" in done.stdout and "| 4 | yes | ok |" in done.stdout
    saved = json.loads((tmp_path / "toy" / "1n1g" / "maxbatch_w8_fp32_torch.json").read_text())
    assert (saved["batch_flag"], saved["max_batch"]) == ("--toy-batch", 4)
