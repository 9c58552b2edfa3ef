"""A new launcher is one module and one registry line: a toy (tests/fixtures/toy_launcher) copied into a copy of
the dlperf under test and registered with one line is a `--launcher` choice and places a real run, whose record
names the toy's node. No other file of dlperf changes."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY

import dlperf

SOURCES = Path(dlperf.__file__).parent
TOY = Path(__file__).parents[1] / "fixtures" / "toy_launcher" / "toy.py"
REGISTRY = "launch/__init__.py"
ANCHOR = "LAUNCHERS: dict[str, str] = {\n"
LINE = '    "toy": "dlperf.launch.toy:ToyLauncher",\n'


@pytest.fixture(scope="module")
def toy_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy-launcher") / "src"
    shutil.copytree(SOURCES, root / "dlperf", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(TOY, root / "dlperf" / "launch" / "toy.py")
    registry = root / "dlperf" / REGISTRY
    text = registry.read_text()
    assert text.count(ANCHOR) == 1
    registry.write_text(text.replace(ANCHOR, ANCHOR + LINE))
    return root


def toy_dlperf(root: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "dlperf", *args], env=env, capture_output=True, text=True, timeout=300)


def test_the_toy_is_one_module_and_one_line(toy_tree):
    changed = [
        path.relative_to(SOURCES).as_posix()
        for path in SOURCES.rglob("*.py")
        if "__pycache__" not in path.parts and not filecmp.cmp(path, toy_tree / "dlperf" / path.relative_to(SOURCES))
    ]
    assert changed == [REGISTRY]
    original = (SOURCES / REGISTRY).read_text().splitlines(keepends=True)
    registered = (toy_tree / "dlperf" / REGISTRY).read_text().splitlines(keepends=True)
    assert [line for line in registered if line not in original] == [LINE] and len(registered) == len(original) + 1


@pytest.mark.slow
def test_the_toy_is_a_choice_and_places_a_run(toy_tree, tmp_path):
    done = toy_dlperf(toy_tree, ["run", "--help"])
    assert "--launcher {toy,local,ssh,srun,sbatch,slurm}" in done.stdout
    done = toy_dlperf(toy_tree, ["run", *TINY, "--launcher", "toy", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.rglob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and [r["host"] for r in record["ranks"]] == ["toy-node"]
